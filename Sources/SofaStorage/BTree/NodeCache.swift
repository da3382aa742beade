
/// A bounded cache of decoded nodes, keyed by chunk offset, shared by every reader and the writer of a file.
///
/// It sits on every node visit of every query, so it is a small open-addressing table (linear probing, a
/// multiplicative hash of the offset, at most half full) rather than a general dictionary. Each slot holds the
/// offset, the node and its mark together, so a lookup in a table too large for the CPU caches misses once per
/// probe, not once for each of three parallel arrays (a random `document(id:)` at 1M documents visits three
/// nodes). Eviction is CLOCK
/// (second chance): a hit marks the slot; the hand sweeps the table, clearing marks, and evicts the first
/// unmarked node. Safe because nodes are immutable: the chunk at an offset never changes while any commit can
/// reach it (offsets discarded after a failed commit are purged first). No chunk starts at offset 0 (the file
/// header does), so 0 marks an empty slot.
package final class NodeCache: Sendable {
    /// A table slot: `offset` 0 when empty. The node's ``Node/memoryCost`` is kept beside it (in what would be
    /// padding: 24 bytes either way), so that evicting a node does not read the node itself, a cache miss per
    /// eviction when the cache churns (an incremental view update evicts thousands).
    private struct Slot {
        var offset: UInt64 = 0
        var node: Node?
        var cost: Int32 = 0
        var referenced = false
    }

    private struct State {
        var slots: [Slot] = []
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
            guard !s.slots.isEmpty else {
                s.misses += 1
                return nil
            }
            let mask = s.slots.count - 1
            var i = NodeCache.home(offset, mask)
            while true {
                let k = s.slots[i].offset
                if k == offset {
                    s.hits += 1
                    if !s.slots[i].referenced { s.slots[i].referenced = true }
                    return s.slots[i].node
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
        guard cost <= capacityBytes / 4, cost <= Int(Int32.max) else { return }
        var evicted: [Node] = []  // released after the lock
        state.withLock { s in
            if s.slots.isEmpty || (s.count + 1) * 2 > s.slots.count { NodeCache.grow(&s) }
            let mask = s.slots.count - 1
            var i = NodeCache.home(offset, mask)
            while s.slots[i].offset != 0 {
                if s.slots[i].offset == offset { return }
                i = (i + 1) & mask
            }
            s.slots[i] = Slot(offset: offset, node: node, cost: Int32(cost), referenced: false)
            s.count += 1
            s.bytes += cost
            while s.bytes > capacityBytes && s.count > 0 {
                s.hand &= mask
                if s.slots[s.hand].offset == 0 {
                    s.hand += 1
                } else if s.slots[s.hand].referenced {
                    s.slots[s.hand].referenced = false
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
        let old = s.slots
        let size = max(1024, old.count * 2)
        s.slots = [Slot](repeating: Slot(), count: size)
        s.hand = 0
        let mask = size - 1
        for slot in old where slot.offset != 0 {
            var i = home(slot.offset, mask)
            while s.slots[i].offset != 0 { i = (i + 1) & mask }
            s.slots[i] = slot
        }
    }

    /// Empties slot `i` and shifts later entries of its probe run back, so lookups never meet a hole.
    private static func delete(at slot: Int, from s: inout State) -> Node {
        let mask = s.slots.count - 1
        let node = s.slots[slot].node!
        s.bytes -= Int(s.slots[slot].cost)
        s.count -= 1
        var hole = slot
        var j = (slot + 1) & mask
        while s.slots[j].offset != 0 {
            let distanceFromHome = (j - home(s.slots[j].offset, mask)) & mask
            if distanceFromHome >= (j - hole) & mask {
                s.slots[hole] = s.slots[j]
                hole = j
            }
            j = (j + 1) & mask
        }
        s.slots[hole] = Slot()
        return node
    }

    /// Forgets the node at `offset`, if cached: a batch that rewrote it leaves a copy the newest commit no
    /// longer reaches (an older snapshot that still does reads it again from the file). Its memory then goes
    /// to the rewritten nodes, instead of the process growing by the path each small commit rewrites.
    package func remove(at offset: UInt64) {
        let removed = state.withLock { s -> Node? in
            guard !s.slots.isEmpty else { return nil }
            let mask = s.slots.count - 1
            var i = NodeCache.home(offset, mask)
            while s.slots[i].offset != 0 {
                if s.slots[i].offset == offset { return NodeCache.delete(at: i, from: &s) }
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
            let doomed = s.slots.lazy.map(\.offset).filter { $0 != 0 && $0 >= offset }
            let mask = s.slots.count - 1
            for key in Array(doomed) {
                var i = NodeCache.home(key, mask)
                while s.slots[i].offset != key { i = (i + 1) & mask }
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
