/// One thread's reader of a ``BTree``, for a run of lookups or range reduces made one after another (a view
/// update's mapping chunk: a by-ID and a back-index lookup per document; a chunk of its group recompute: a range
/// reduce per touched group, in key order).
///
/// Every read of a plain ``BTree`` starts at the root and asks the file's ``NodeCache`` for each node of the
/// path: a lock round trip, and a retain and release of the node. With two threads reading at once, the root and
/// the upper inner nodes are the same objects on both, so their reference counts (and the cache's lock word)
/// bounce between the cores' caches on every node visit. A reader keeps, per depth below the root, a
/// direct-mapped memo of the inner nodes its reads went through (1,024 slots a level, one reference each, taken
/// once), and the last leaf it read as a node, and lends them to each later read without a retain, a release or
/// a cache probe: the root and the upper levels are then read from the memo, and a run of sorted reads finds the
/// path it shares with the previous one there.
///
/// The memo's nodes are outside the node cache's budget, so their total is bounded: the slots hold at most
/// ``memoBudget`` bytes of nodes (by ``Node/memoryCost``; by default 4 MiB, in which the ~1,000 inner nodes
/// above a 1M-document by-ID tree's leaves nearly all fit), plus, outside that, the last inner node read at each
/// depth that did not fit and the last leaf. A view update's mapping holds two readers per worker and one
/// worker per core: at most about 8 MiB a core.
///
/// A leaf that a lookup reads from the file without caching it (`cachingLeaf` false), or that a range reduce reads
/// on its range's edge, is decompressed into a buffer of the reader's and walked in place (``LeafLookup``,
/// ``ReduceParts/addLeafRows(_:chunkOffset:range:path:)``): no `Node`, no allocation, no cache insert. Whether a
/// chunk is a leaf is read from its kind byte before it is checked or decompressed, so an inner node missing
/// from the cache is read once, through the tree. The reader keeps the file's mapping, so reading a chunk takes
/// the file's lock only when the mapping has grown.
///
/// Answers are those of the plain ``BTree`` reads: the memo holds immutable nodes by offset (a chunk never
/// changes while a commit reaches it), and a chunk read by the reader is checked as
/// ``StorageFile/readChunk(at:kind:limit:)`` checks it (CRC32C, lengths, decompressed size), so a damaged node
/// gives the same `.corruption` error. Not thread-safe: one per thread, alive no longer than the operation it
/// serves (the nodes it holds stay in memory while it lives).
///
/// A reader over a tree whose limit is the file's written length rather than a commit's end (a group recompute
/// reads the rows it has just appended, not yet committed) must not outlive the writer's next append or
/// ``StorageFile/discardUncommitted()``: a discard drops the uncommitted chunks it reads, and the appends after
/// it reuse their offsets for other chunks, which a memo by offset would not notice.
package final class BTreeReader {
    /// The tree read.
    package let tree: BTree
    private struct Slot {
        var offset: UInt64 = 0
        var node: Unmanaged<Node>?
        /// The node's ``Node/memoryCost`` when it was kept (counted in `memoBytes`).
        var cost = 0
    }

    /// The most bytes of nodes (by ``Node/memoryCost``) the slots hold at once, unless the reader is given
    /// another budget.
    package static let defaultMemoBudget = 4 << 20
    /// The most bytes of nodes (by ``Node/memoryCost``) this reader's slots hold at once.
    package let memoBudget: Int
    /// Bytes of the nodes in the slots.
    package private(set) var memoBytes = 0
    /// Per depth, the last inner node read there that the slots had no room for (over ``memoBudget``): kept
    /// while the read that went through it may still use it.
    private var unslotted: [(offset: UInt64, node: Node)?] = []

    /// Inner-node slots per depth: a power of two. Enough for the level above the leaves of a 1M-document
    /// by-ID tree (about a thousand inner nodes), so that scattered lookups find it here too.
    private static let slotsPerLevel = 1024
    /// The leaf last read as a node (from the node cache, or decoded), kept in a slot of its own: leaves are
    /// not memoized by depth (a table of them would keep thousands alive), but a run of sorted reads often
    /// reads the same one again.
    private var leaf: (offset: UInt64, node: Node)?
    /// `depths × slotsPerLevel` slots; slot `depth × slotsPerLevel + hash(offset)` holds a node of that depth.
    private var slots: UnsafeMutablePointer<Slot>
    private var depths = 0
    /// The mapping the last chunk read used
    /// (see ``StorageFile/unsafeChunkBytes(at:ifKind:limit:mapping:scratch:)``).
    private var mapping: Mapping?
    private let scratch = ScratchBuffer()
    /// The leaf last read in place, and its payload bytes (in `scratch` or `mapping`, valid until the next
    /// read): sorted range reduces often begin in the leaf the previous one ended in.
    private var lastLeaf: (offset: UInt64, bytes: UnsafeRawBufferPointer)?
    /// Node visits answered from the memo, for tests and benchmarks.
    package private(set) var memoHits = 0
    /// Node visits that went to the node cache or the file and were then kept in the memo.
    package private(set) var memoMisses = 0
    /// Leaf chunks read from the file in place (checked, and decompressed into the reader's buffer when
    /// compressed), for tests: inner nodes are never read this way.
    package private(set) var leavesReadInPlace = 0
    /// True while a ``withValue(for:cachingLeaf:_:)`` body runs: the bytes it is lent may be in the memo's nodes
    /// or the reader's buffer, which another read through this reader would replace.
    private var lending = false

    /// A reader of `tree` whose memo's slots hold at most `memoBudget` bytes of nodes.
    package init(_ tree: BTree, memoBudget: Int = BTreeReader.defaultMemoBudget) {
        self.tree = tree
        self.memoBudget = memoBudget
        slots = .allocate(capacity: 0)
    }

    deinit {
        for i in 0..<(depths * BTreeReader.slotsPerLevel) { slots[i].node?.release() }
        slots.deinitialize(count: depths * BTreeReader.slotsPerLevel)
        slots.deallocate()
    }

    @inline(__always)
    private static func slot(_ offset: UInt64, depth: Int) -> Int {
        depth &* slotsPerLevel &+ Int(truncatingIfNeeded: (offset &* 0x9E37_79B9_7F4A_7C15) >> 54)
    }

    /// The memo's node at `offset` for `depth`, if it holds it (not counted).
    @inline(__always)
    private func held(_ offset: UInt64, depth: Int) -> Unmanaged<Node>? {
        if let leaf, leaf.offset == offset { return Unmanaged.passUnretained(leaf.node) }
        guard depth < depths else { return nil }
        let s = slots[BTreeReader.slot(offset, depth: depth)]
        if s.offset == offset, let node = s.node { return node }
        if let u = unslotted[depth], u.offset == offset { return Unmanaged.passUnretained(u.node) }
        return nil
    }

    /// The memo's node at `offset` for `depth`, if it holds it; counted in ``memoHits``.
    @inline(__always)
    private func remembered(_ offset: UInt64, depth: Int) -> Unmanaged<Node>? {
        guard let node = held(offset, depth: depth) else { return nil }
        memoHits += 1
        return node
    }

    /// Keeps `node` (at `offset`, `depth` below the root) in the memo, in place of the node its slot held (a
    /// leaf in place of the last leaf; when the slots would go over ``memoBudget``, in place of the depth's
    /// unslotted node): safe because a node is only lent while its read is at that depth, and a descent replaces
    /// only deeper ones; one leaf is lent at a time.
    private func remember(_ node: Node, at offset: UInt64, depth: Int) -> Unmanaged<Node> {
        memoMisses += 1
        if node.isLeaf {
            leaf = (offset, node)
            return Unmanaged.passUnretained(node)
        }
        if depth >= depths { grow(to: depth + 1) }
        let i = BTreeReader.slot(offset, depth: depth)
        let cost = node.memoryCost
        guard memoBytes - slots[i].cost + cost <= memoBudget else {
            unslotted[depth] = (offset, node)
            return Unmanaged.passUnretained(node)
        }
        slots[i].node?.release()
        memoBytes += cost - slots[i].cost
        let kept = Unmanaged.passRetained(node)
        slots[i] = Slot(offset: offset, node: kept, cost: cost)
        return kept
    }

    private func grow(to newDepths: Int) {
        let n = BTreeReader.slotsPerLevel
        let larger = UnsafeMutablePointer<Slot>.allocate(capacity: newDepths * n)
        larger.moveInitialize(from: slots, count: depths * n)
        (larger + depths * n).initialize(repeating: Slot(), count: (newDepths - depths) * n)
        slots.deallocate()
        slots = larger
        unslotted += repeatElement(nil, count: newDepths - depths)
        depths = newDepths
    }

    /// The node at `offset`, `depth` below the root: from the memo, else from the tree (node cache or file),
    /// then kept. Lend it with `_withUnsafeGuaranteedRef` only while the read is at this depth.
    ///
    /// `Unmanaged._withUnsafeGuaranteedRef` is an underscored standard-library API: it lends the object without a
    /// retain and release, on the caller's promise that something else keeps it alive for the closure's duration.
    /// Here that is the memo (a slot's retained reference, `unslotted` or `leaf`), which no read replaces at
    /// this depth or above while the closure runs.
    @inline(__always)
    private func node(at offset: UInt64, depth: Int) throws -> Unmanaged<Node> {
        if let node = remembered(offset, depth: depth) { return node }
        return remember(try tree.node(at: offset), at: offset, depth: depth)
    }

    // MARK: - Lookups

    /// Calls `body` with the value stored under `key` (nil when there is none), valid during the call; `body`
    /// must not use this reader (a precondition: the bytes may be the reader's own). A leaf neither in the memo
    /// nor in the node cache is read from the file into the reader's buffer and, unless `cachingLeaf`, searched
    /// there without being decoded or cached (as ``BTree/value(for:cachingLeaf:)`` does it).
    package func withValue<R>(for key: UnsafeRawBufferPointer, cachingLeaf: Bool = true,
                              _ body: (UnsafeRawBufferPointer?) throws -> R) throws -> R {
        precondition(!lending, "a BTreeReader.withValue body read through the same reader")
        lending = true
        defer { lending = false }
        return try lookUp(key, cachingLeaf: cachingLeaf, body)
    }

    private func lookUp<R>(_ key: UnsafeRawBufferPointer, cachingLeaf: Bool,
                           _ body: (UnsafeRawBufferPointer?) throws -> R) throws -> R {
        guard tree.limit != StorageFile.unlimited else {
            // The writer's own trees: chunks it has not written yet are read through the file's pending bytes.
            guard let slice = try tree.value(for: key, cachingLeaf: cachingLeaf) else { return try body(nil) }
            return try slice.withUnsafeBytes { try body($0) }
        }
        guard var offset = tree.root?.offset else { return try body(nil) }
        var depth = 0
        while true {
            let node: Unmanaged<Node>
            if let kept = remembered(offset, depth: depth) {
                node = kept
            } else if cachingLeaf || offset >= tree.limit {
                // (Past the limit, the tree throws its corruption error.)
                node = remember(try tree.node(at: offset), at: offset, depth: depth)
            } else {
                if let cached = tree.file.nodeCache.node(at: offset) {
                    node = remember(cached, at: offset, depth: depth)
                } else if let leaf = try unsafeLeafInPlace(at: offset) {
                    // Searched in place, neither decoded nor cached.
                    return try body(try LeafLookup.value(for: key, inLeaf: leaf, chunkOffset: offset,
                                                         path: tree.file.path))
                } else {
                    // An inner node (nearly always cached already): read, decoded and cached through the tree.
                    node = remember(try tree.uncachedNode(at: offset), at: offset, depth: depth)
                }
            }
            // `node` is alive: the memo holds it (``node(at:depth:)``).
            let step = node._withUnsafeGuaranteedRef { n -> DescentStep in
                let i = n.lowerBound(key)
                if n.isLeaf { return .answer(i < n.count && compareBytes(n.key(i), key) == 0 ? i : nil) }
                return .child(i < n.count ? n.childOffset(i) : nil)
            }
            switch step {
            case .answer(let i):
                guard let i else { return try body(nil) }
                // `node` is alive: the memo holds it, and `body` does not read through this reader.
                return try node._withUnsafeGuaranteedRef { try body($0.value(i)) }
            case .child(let child):
                guard let child else { return try body(nil) }
                offset = child
                depth += 1
            }
        }
    }

    /// The value under `key`, copied; nil when there is none.
    package func get(_ key: UnsafeRawBufferPointer, cachingLeaf: Bool = true) throws -> [UInt8]? {
        try withValue(for: key, cachingLeaf: cachingLeaf) { $0.map { Array($0) } }
    }

    /// The payload bytes of the node at `offset` (below the tree's finite limit) when it is a leaf, read from
    /// the file into the reader's buffer (or the last leaf so read, again); nil, with nothing read, when the
    /// chunk's kind byte says it is not a leaf (an inner node: the caller reads it through the tree). Unsafe: the
    /// bytes are valid only until the reader's next read.
    private func unsafeLeafInPlace(at offset: UInt64) throws -> UnsafeRawBufferPointer? {
        if let lastLeaf, lastLeaf.offset == offset { return lastLeaf.bytes }
        // Clear the last leaf first: a read that throws may have overwritten the buffer its bytes are in.
        let last = lastLeaf
        lastLeaf = nil
        guard let bytes = try tree.file.unsafeChunkBytes(at: offset, ifKind: .leaf, limit: tree.limit,
                                                         mapping: &mapping, scratch: scratch) else {
            lastLeaf = last  // nothing was read: its bytes are intact
            return nil
        }
        leavesReadInPlace += 1
        lastLeaf = (offset, bytes)
        return bytes
    }

    // MARK: - Reduces

    /// ``BTree/reduceAndFirstEntry(in:)``, its inner nodes read through the memo, and the leaves on the range's
    /// edges that are not in the memo or the node cache read in place (not decoded, not cached; the first row
    /// is then a copy).
    package func reduceAndFirstEntry(in range: KeyRange) throws -> (reduction: Reduction, first: NodeSlice?) {
        precondition(!lending, "a BTreeReader.withValue body read through the same reader")
        return try tree.reduceAndFirstEntry(in: range, through: self)
    }
}

/// What a lookup found in a node: in a leaf, the entry's index (nil: no such key); in an inner node, the child to
/// descend to (nil: the key is beyond the largest).
private enum DescentStep {
    case answer(Int?)
    case child(UInt64?)
}

/// Where a range reduce's descent gets its nodes: the tree itself (node cache, or the file), or a thread's
/// ``BTreeReader``.
protocol NodeSource {
    /// Calls `body` with the node at `offset`, `depth` below the root; `body` may read deeper nodes.
    func withNode<R>(at offset: UInt64, depth: Int, _ body: (Node) throws -> R) throws -> R
    /// When the node at `offset` is a leaf the source reads in place, adds its rows of `range` to `parts` and
    /// returns true; false when the node is to be read with ``withNode(at:depth:_:)``.
    func reduceLeafInPlace(at offset: UInt64, depth: Int, range: KeyRange, into parts: inout ReduceParts) throws
        -> Bool
}

extension BTree: NodeSource {
    func withNode<R>(at offset: UInt64, depth: Int, _ body: (Node) throws -> R) throws -> R {
        try body(node(at: offset))
    }

    func reduceLeafInPlace(at offset: UInt64, depth: Int, range: KeyRange, into parts: inout ReduceParts) throws
        -> Bool
    {
        false
    }
}

extension BTreeReader: NodeSource {
    func withNode<R>(at offset: UInt64, depth: Int, _ body: (Node) throws -> R) throws -> R {
        // The node is alive while `body` runs: the memo holds it, and `body` reads only deeper nodes.
        try node(at: offset, depth: depth)._withUnsafeGuaranteedRef(body)
    }

    func reduceLeafInPlace(at offset: UInt64, depth: Int, range: KeyRange, into parts: inout ReduceParts) throws
        -> Bool
    {
        guard tree.limit != StorageFile.unlimited, offset < tree.limit else { return false }
        if held(offset, depth: depth) != nil { return false }
        if let cached = tree.file.nodeCache.node(at: offset) {
            _ = remember(cached, at: offset, depth: depth)
            // The `withNode` that follows finds it in the memo; that visit is this miss, not also a hit.
            memoHits -= 1
            return false
        }
        guard let leaf = try unsafeLeafInPlace(at: offset) else { return false }
        try parts.addLeafRows(leaf, chunkOffset: offset, range: range, path: tree.file.path)
        return true
    }
}
