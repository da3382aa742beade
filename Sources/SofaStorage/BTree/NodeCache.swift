
/// A bounded cache of decoded nodes, keyed by chunk offset, shared by every reader and the writer of a file.
///
/// Eviction is CLOCK (second chance): a hit marks the node; the hand sweeps past marked nodes, clearing the
/// mark, and evicts the first unmarked one. Safe because nodes are immutable: the chunk at an offset never
/// changes while any commit can reach it (offsets discarded after a failed commit are purged first).
package final class NodeCache: Sendable {
    private struct Slot {
        var node: Node
        var referenced: Bool
        var ringIndex: Int
    }

    private struct State {
        var slots: [UInt64: Slot] = [:]
        var ring: [UInt64] = []
        var hand = 0
        var bytes = 0
        var hits = 0
        var misses = 0
    }

    package let capacityBytes: Int
    private let state = Lock(State())

    package init(capacityBytes: Int) {
        self.capacityBytes = max(0, capacityBytes)
    }

    package func node(at offset: UInt64) -> Node? {
        state.withLock { s in
            guard var slot = s.slots[offset] else {
                s.misses += 1
                return nil
            }
            s.hits += 1
            if !slot.referenced {
                slot.referenced = true
                s.slots[offset] = slot
            }
            return slot.node
        }
    }

    package func insert(_ node: Node, at offset: UInt64) {
        let cost = node.memoryCost
        guard cost <= capacityBytes / 4 else { return }
        state.withLock { s in
            guard s.slots[offset] == nil else { return }
            s.slots[offset] = Slot(node: node, referenced: false, ringIndex: s.ring.count)
            s.ring.append(offset)
            s.bytes += cost
            while s.bytes > capacityBytes, !s.ring.isEmpty {
                if s.hand >= s.ring.count { s.hand = 0 }
                let victim = s.ring[s.hand]
                if s.slots[victim]!.referenced {
                    s.slots[victim]!.referenced = false
                    s.hand += 1
                } else {
                    remove(victim, from: &s)
                }
            }
        }
    }

    /// Forgets every node at or after `offset` (chunks discarded by a failed commit).
    package func removeAll(atOrAbove offset: UInt64) {
        state.withLock { s in
            for key in s.slots.keys where key >= offset { remove(key, from: &s) }
        }
    }

    private func remove(_ offset: UInt64, from s: inout State) {
        guard let slot = s.slots.removeValue(forKey: offset) else { return }
        s.bytes -= slot.node.memoryCost
        let last = s.ring.removeLast()
        if slot.ringIndex < s.ring.count {
            s.ring[slot.ringIndex] = last
            s.slots[last]!.ringIndex = slot.ringIndex
        }
    }

    /// Hits, misses, nodes and bytes held, for `sofa info` and the benchmarks.
    package var statistics: (hits: Int, misses: Int, nodes: Int, bytes: Int) {
        state.withLock { ($0.hits, $0.misses, $0.slots.count, $0.bytes) }
    }
}
