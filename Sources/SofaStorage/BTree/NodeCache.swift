
/// A bounded cache of decoded nodes, keyed by chunk offset, shared by every reader and the writer of a file.
///
/// It sits on every node visit of every query, so it is a small open-addressing table (linear probing, a
/// multiplicative hash of the offset, at most half full) rather than a general dictionary. Eviction is CLOCK
/// (second chance): a hit marks the slot; the hand sweeps the table, clearing marks, and evicts the first
/// unmarked node. Safe because nodes are immutable: the chunk at an offset never changes while any commit can
/// reach it (offsets discarded after a failed commit are purged first). No chunk starts at offset 0 (the file
/// header does), so 0 marks an empty slot.
package final class NodeCache: Sendable {
    private struct State {
        var keys: [UInt64] = []
        var nodes: [Node?] = []
        var referenced: [Bool] = []
        var count = 0
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

    private static func home(_ offset: UInt64, _ mask: Int) -> Int {
        Int(truncatingIfNeeded: (offset &* 0x9E37_79B9_7F4A_7C15) >> 32) & mask
    }

    package func node(at offset: UInt64) -> Node? {
        state.withLock { s in
            guard !s.keys.isEmpty else {
                s.misses += 1
                return nil
            }
            let mask = s.keys.count - 1
            var i = NodeCache.home(offset, mask)
            while true {
                let k = s.keys[i]
                if k == offset {
                    s.hits += 1
                    if !s.referenced[i] { s.referenced[i] = true }
                    return s.nodes[i]
                }
                if k == 0 {
                    s.misses += 1
                    return nil
                }
                i = (i + 1) & mask
            }
        }
    }

    package func insert(_ node: Node, at offset: UInt64) {
        precondition(offset != 0, "no node lives at offset 0")
        let cost = node.memoryCost
        guard cost <= capacityBytes / 4 else { return }
        var evicted: [Node] = []  // released after the lock
        state.withLock { s in
            if s.keys.isEmpty || (s.count + 1) * 2 > s.keys.count { NodeCache.grow(&s) }
            let mask = s.keys.count - 1
            var i = NodeCache.home(offset, mask)
            while s.keys[i] != 0 {
                if s.keys[i] == offset { return }
                i = (i + 1) & mask
            }
            s.keys[i] = offset
            s.nodes[i] = node
            s.referenced[i] = false
            s.count += 1
            s.bytes += cost
            while s.bytes > capacityBytes && s.count > 0 {
                s.hand &= mask
                if s.keys[s.hand] == 0 {
                    s.hand += 1
                } else if s.referenced[s.hand] {
                    s.referenced[s.hand] = false
                    s.hand += 1
                } else {
                    evicted.append(NodeCache.delete(at: s.hand, from: &s))
                }
            }
        }
        _ = evicted
    }

    /// Doubles the table (or makes the first one) and re-places every node.
    private static func grow(_ s: inout State) {
        let oldKeys = s.keys, oldNodes = s.nodes, oldReferenced = s.referenced
        let size = max(1024, oldKeys.count * 2)
        s.keys = [UInt64](repeating: 0, count: size)
        s.nodes = [Node?](repeating: nil, count: size)
        s.referenced = [Bool](repeating: false, count: size)
        s.hand = 0
        let mask = size - 1
        for j in oldKeys.indices where oldKeys[j] != 0 {
            var i = home(oldKeys[j], mask)
            while s.keys[i] != 0 { i = (i + 1) & mask }
            s.keys[i] = oldKeys[j]
            s.nodes[i] = oldNodes[j]
            s.referenced[i] = oldReferenced[j]
        }
    }

    /// Empties slot `i` and shifts later entries of its probe run back, so lookups never meet a hole.
    private static func delete(at slot: Int, from s: inout State) -> Node {
        let mask = s.keys.count - 1
        let node = s.nodes[slot]!
        s.bytes -= node.memoryCost
        s.count -= 1
        var hole = slot
        var j = (slot + 1) & mask
        while s.keys[j] != 0 {
            let distanceFromHome = (j - home(s.keys[j], mask)) & mask
            if distanceFromHome >= (j - hole) & mask {
                s.keys[hole] = s.keys[j]
                s.nodes[hole] = s.nodes[j]
                s.referenced[hole] = s.referenced[j]
                hole = j
            }
            j = (j + 1) & mask
        }
        s.keys[hole] = 0
        s.nodes[hole] = nil
        s.referenced[hole] = false
        return node
    }

    /// Forgets the node at `offset`, if cached: a batch that rewrote it leaves a copy the newest commit no
    /// longer reaches (an older snapshot that still does reads it again from the file). Its memory then goes
    /// to the rewritten nodes, instead of the process growing by the path each small commit rewrites.
    package func remove(at offset: UInt64) {
        let removed = state.withLock { s -> Node? in
            guard !s.keys.isEmpty else { return nil }
            let mask = s.keys.count - 1
            var i = NodeCache.home(offset, mask)
            while s.keys[i] != 0 {
                if s.keys[i] == offset { return NodeCache.delete(at: i, from: &s) }
                i = (i + 1) & mask
            }
            return nil
        }
        _ = removed  // released here, outside the lock
    }

    /// Forgets every node (the file is closing).
    package func removeAll() {
        let old = state.withLock { s -> State in
            let old = s
            s = State(hits: s.hits, misses: s.misses)
            return old
        }
        _ = old  // released here, outside the lock
    }

    /// Forgets every node at or after `offset` (chunks discarded by a failed commit).
    package func removeAll(atOrAbove offset: UInt64) {
        var evicted: [Node] = []
        state.withLock { s in
            // Collect first: deleting shifts entries around (across the table's end, too), so a single sweep
            // that deletes as it goes could step over one.
            let doomed = s.keys.filter { $0 != 0 && $0 >= offset }
            let mask = s.keys.count - 1
            for key in doomed {
                var i = NodeCache.home(key, mask)
                while s.keys[i] != key { i = (i + 1) & mask }
                evicted.append(NodeCache.delete(at: i, from: &s))
            }
        }
        _ = evicted
    }

    /// Hits, misses, nodes and bytes held, for `sofa info` and the benchmarks.
    package var statistics: (hits: Int, misses: Int, nodes: Int, bytes: Int) {
        state.withLock { ($0.hits, $0.misses, $0.count, $0.bytes) }
    }
}
