/// How a tree builds its nodes.
public struct BTreeConfiguration: Sendable {
    /// The uncompressed size a node is filled up to before a new one starts (bytes). A node holding a single
    /// entry larger than this is allowed.
    public var nodeSize: Int
    /// The same for inner nodes. Smaller inner nodes make the path a small batch rewrites (a leaf and one
    /// inner node per level, each rewritten whole) cheaper to encode, compress and sync, for a deeper tree.
    public var innerNodeSize: Int
    /// Whether nodes are stored LZ4-compressed (when that saves space).
    public var compress: Bool
    /// The reduction kept with every subtree, or `nil` for row counts only.
    public var reducer: (any Reducer)?

    /// A configuration; 4 KiB nodes by default (inner nodes as large as leaves unless `innerNodeSize` is
    /// given), compressed.
    public init(nodeSize: Int = 4096, innerNodeSize: Int? = nil, compress: Bool = true,
                reducer: (any Reducer)? = nil) {
        precondition(nodeSize >= 128 && (innerNodeSize ?? nodeSize) >= 128, "node sizes must be at least 128 bytes")
        self.nodeSize = nodeSize
        self.innerNodeSize = innerNodeSize ?? nodeSize
        self.compress = compress
        self.reducer = reducer
    }
}

/// A copy-on-write B+tree stored in a ``StorageFile``: byte keys in `memcmp` order, byte values, and a row
/// count and reduction stored with every subtree.
///
/// A `BTree` value is a snapshot: its root never changes. Reads (this file) touch only nodes reachable from
/// that root, which are immutable. Writes (`BTree+Modify.swift`, `TreeBuilder.swift`) append new nodes for
/// the changed paths and return a new tree; unchanged subtrees are shared, never rewritten.
public struct BTree: Sendable {
    /// The file holding the nodes.
    public let file: StorageFile
    /// The root, or `nil` for an empty tree.
    public let root: NodePointer?
    /// How nodes are built and reduced.
    public let configuration: BTreeConfiguration
    /// Reads stay below this offset: a commit's end, ``StorageFile/unlimited`` for the writer's own trees, or
    /// the file's written length for threads the writer waits on while they read its uncommitted trees (the
    /// group-aggregate recompute, after ``StorageFile/flushAppended()``).
    public let limit: UInt64

    /// A tree rooted at `root`, read below `limit`: a commit's ``CommitHeader/endOffset`` for a reader,
    /// ``StorageFile/unlimited`` for the writer's own uncommitted trees (only the single writer may use that), or
    /// the written length for helpers of the writer that it waits for before appending again.
    public init(file: StorageFile, root: NodePointer?, configuration: BTreeConfiguration, limit: UInt64) {
        self.file = file
        self.root = root
        self.configuration = configuration
        self.limit = limit
    }

    /// Tree number `index` of `commit` (an empty tree when the commit has fewer roots).
    public init(file: StorageFile, commit: CommitHeader, index: Int, configuration: BTreeConfiguration) {
        let root = index < commit.roots.count ? commit.roots[index] : nil
        self.init(file: file, root: root, configuration: configuration, limit: commit.endOffset)
    }

    /// Rows in the tree, from the root pointer: O(1).
    public var rowCount: UInt64 { root?.rowCount ?? 0 }

    /// The whole tree's reduction (nil when empty or there is no reducer): O(1).
    public var reduction: [UInt8]? {
        guard let root, configuration.reducer != nil else { return nil }
        return root.reduction
    }

    /// The same tree read by the writer, able to see chunks it has not committed.
    package var forWriter: BTree {
        BTree(file: file, root: root, configuration: configuration, limit: StorageFile.unlimited)
    }

    // MARK: - Nodes

    /// The node at `offset`, from the cache or decoded from the file and then cached — unless it is a leaf and
    /// `cachingLeaf` is false: a leaf read once (one lookup of many scattered ones, or a leaf about to be
    /// replaced) would only push useful nodes out, at the cost of evicting them.
    package func node(at offset: UInt64, cachingLeaf: Bool = true) throws -> Node {
        guard offset < limit else {
            throw SofaError(.corruption, "node pointer \(offset) is past the end of its commit (\(limit))",
                            path: file.path, offset: Int(clamping: offset))
        }
        if let cached = file.nodeCache.node(at: offset) { return cached }
        return try uncachedNode(at: offset, cachingLeaf: cachingLeaf)
    }

    /// The node at `offset` (below ``limit``), read from the file without probing the node cache (the caller
    /// just did), then cached as ``node(at:cachingLeaf:)`` caches it.
    package func uncachedNode(at offset: UInt64, cachingLeaf: Bool = true) throws -> Node {
        let payload = try nodePayload(at: offset)
        let node = try Node(payload: payload, isLeaf: payload.kind == .leaf, path: file.path)
        if cachingLeaf || !node.isLeaf { file.nodeCache.insert(node, at: offset) }
        return node
    }

    /// The payload of the node chunk at `offset` (below ``limit``), read from the file; a chunk of another
    /// kind is corruption.
    private func nodePayload(at offset: UInt64) throws -> ChunkPayload {
        guard offset < limit else {
            throw SofaError(.corruption, "node pointer \(offset) is past the end of its commit (\(limit))",
                            path: file.path, offset: Int(clamping: offset))
        }
        let payload = try file.readChunk(at: offset, kind: nil, limit: limit)
        guard payload.kind == .leaf || payload.kind == .inner else {
            throw SofaError(.corruption, "a \(payload.kind) chunk where a tree node was expected",
                            path: file.path, offset: Int(clamping: offset))
        }
        return payload
    }

    // MARK: - Point lookup

    /// The value stored under `key`, or `nil`.
    public func get(_ key: [UInt8]) throws -> [UInt8]? {
        try get(key, cachingLeaf: true)
    }

    /// ``get(_:)``, keeping the leaf out of the node cache when `cachingLeaf` is false (see
    /// ``node(at:cachingLeaf:)``).
    package func get(_ key: [UInt8], cachingLeaf: Bool) throws -> [UInt8]? {
        try key.withUnsafeBytes { k in
            try value(for: k, cachingLeaf: cachingLeaf).map { $0.withUnsafeBytes { Array($0) } }
        }
    }

    /// The value under `key` as a node slice (valid while the returned node lives), for callers that decode
    /// in place; its leaf is cached unless `cachingLeaf` is false.
    ///
    /// With `cachingLeaf` false, a leaf not already in the cache is searched in its payload without being
    /// decoded into a ``Node`` (``LeafLookup``): the slice then holds the payload instead of a node.
    package func value(for key: UnsafeRawBufferPointer, cachingLeaf: Bool = true) throws -> NodeSlice? {
        guard var offset = root?.offset else { return nil }
        while true {
            let node: Node
            if cachingLeaf {
                node = try self.node(at: offset)
            } else if offset < limit, let cached = file.nodeCache.node(at: offset) {
                node = cached
            } else {
                let payload = try nodePayload(at: offset)
                guard payload.kind == .inner else {
                    guard let value = try LeafLookup.value(for: key, inLeaf: payload, path: file.path) else {
                        return nil
                    }
                    return NodeSlice(payload: payload, value: value)
                }
                node = try Node(payload: payload, isLeaf: false, path: file.path)
                file.nodeCache.insert(node, at: offset)
            }
            if node.isLeaf {
                let i = node.lowerBound(key)
                guard i < node.count, compareBytes(node.key(i), key) == 0 else { return nil }
                return NodeSlice(node: node, index: i)
            }
            let i = node.lowerBound(key)
            guard i < node.count else { return nil }  // beyond the largest key
            offset = node.childOffset(i)
        }
    }

    // MARK: - Scans

    /// Calls `body` with each row in `range`, in ascending key order or descending, after skipping `skip`
    /// rows (skipped whole subtrees cost nothing: their stored counts are used). Stop by returning `false`.
    ///
    /// The buffers passed to `body` are valid only during the call.
    public func forEach(
        in range: KeyRange = .all, descending: Bool = false, skip: UInt64 = 0,
        _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        try forEachEntry(in: range, descending: descending, skip: skip) { node, i in
            try body(node.key(i), node.value(i))
        }
    }

    /// ``forEach(in:descending:skip:_:)`` handing out each row as its leaf and index, for callers that keep
    /// rows undecoded (holding the node keeps its bytes valid) instead of copying them.
    package func forEachEntry(
        in range: KeyRange = .all, descending: Bool = false, skip: UInt64 = 0,
        _ body: (_ leaf: Node, _ index: Int) throws -> Bool
    ) throws {
        try forEachSpan(in: range, descending: descending, skip: skip) { leaf, span in
            if descending {
                for i in span.reversed() where try !body(leaf, i) { return false }
            } else {
                for i in span where try !body(leaf, i) { return false }
            }
            return true
        }
    }

    /// ``forEachEntry(in:descending:skip:_:)`` a leaf at a time: `body` gets each leaf with the entries of it
    /// to visit (in ascending index order; the caller visits them in descending order when `descending`), so
    /// it can read what it needs of all of them before handling any (independent loads the CPU overlaps, where
    /// entry-by-entry work waits for each one in turn). Stop by returning `false`.
    package func forEachSpan(
        in range: KeyRange = .all, descending: Bool = false, skip: UInt64 = 0,
        _ body: (_ leaf: Node, _ span: ClosedRange<Int>) throws -> Bool
    ) throws {
        guard let root, !range.isEmpty else { return }
        var toSkip = skip
        _ = try visit(root.offset, low: nil, range: range, descending: descending, skip: &toSkip, body)
    }

    /// Returns false when `body` asked to stop.
    private func visit(
        _ offset: UInt64, low: UnsafeRawBufferPointer?, range: KeyRange, descending: Bool, skip: inout UInt64,
        _ body: (Node, ClosedRange<Int>) throws -> Bool
    ) throws -> Bool {
        let node = try node(at: offset)
        if node.isLeaf {
            let span = leafSpan(node, range)
            guard !span.isEmpty else { return true }
            let first = span.lowerBound, last = span.upperBound - 1
            let available = UInt64(last - first + 1)
            if skip >= available {
                skip -= available
                return true
            }
            let s = Int(skip)
            skip = 0
            return try body(node, descending ? first...(last - s) : (first + s)...last)
        }
        guard let span = childSpan(node, range) else { return true }
        let step = descending ? -1 : 1
        var i = descending ? span.upperBound : span.lowerBound
        while span.contains(i) {
            defer { i += step }
            let childLow = i == 0 ? low : node.key(i - 1)
            let placement = placement(ofChild: i, in: node, span: span, low: childLow, range: range)
            switch placement {
            case .below, .above: continue
            case .inside where skip >= node.childRowCount(i):
                skip -= node.childRowCount(i)
            case .inside, .partial:
                if try !visit(node.childOffset(i), low: childLow, range: range, descending: descending,
                              skip: &skip, body) {
                    return false
                }
            }
        }
        return true
    }

    /// The entries of a leaf inside `range`, by binary search.
    package func leafSpan(_ node: Node, _ range: KeyRange) -> Range<Int> {
        var first = 0, end = node.count
        if let lower = range.lower {
            first = lower.key.withUnsafeBytes { node.lowerBound($0, strictly: !lower.inclusive) }
        }
        if let upper = range.upper {
            end = upper.key.withUnsafeBytes { node.lowerBound($0, strictly: upper.inclusive) }
        }
        return first < end ? first..<end : first..<first
    }

    /// The children of an inner node that can hold keys of `range`, found by binary search: child i holds
    /// keys in (key[i-1], key[i]], so the first is the first child whose largest key reaches the lower
    /// bound, and the last is the first whose largest key reaches the upper bound. Children strictly between
    /// them lie wholly inside the range; only the two ends need `classify`.
    package func childSpan(_ node: Node, _ range: KeyRange) -> ClosedRange<Int>? {
        var first = 0
        if let lower = range.lower {
            first = lower.key.withUnsafeBytes { node.lowerBound($0, strictly: !lower.inclusive) }
        }
        var last = node.count - 1
        if let upper = range.upper {
            last = min(last, upper.key.withUnsafeBytes { node.lowerBound($0) })
        }
        return first <= last ? first...last : nil
    }

    /// Where child `i` of an inner node (holding keys in (`low`, key[i]]) lies relative to `range`, given the
    /// node's ``childSpan(_:_:)``: children strictly between the span's ends are wholly inside it.
    package func placement(ofChild i: Int, in node: Node, span: ClosedRange<Int>, low: UnsafeRawBufferPointer?,
                           range: KeyRange) -> Placement {
        guard i == span.lowerBound || i == span.upperBound else { return .inside }
        return classify(range, low: low, high: node.key(i))
    }

    /// Where a subtree holding keys in (low, high] lies relative to `range`.
    package enum Placement { case below, above, inside, partial }

    package func classify(_ range: KeyRange, low: UnsafeRawBufferPointer?, high: UnsafeRawBufferPointer) -> Placement {
        if range.isBelow(high) { return .below }
        if let low, let upper = range.upper, upper.key.withUnsafeBytes({ compareBytes(low, $0) }) >= 0 {
            return .above
        }
        let lowInside: Bool
        if let lower = range.lower {
            lowInside = low.map { l in lower.key.withUnsafeBytes { compareBytes(l, $0) } >= 0 } ?? false
        } else {
            lowInside = true
        }
        return lowInside && !range.isAbove(high) ? .inside : .partial
    }

    /// Every row in `range`, copied (convenience for tests and small ranges).
    public func rows(in range: KeyRange = .all, descending: Bool = false) throws -> [(key: [UInt8], value: [UInt8])] {
        var out: [(key: [UInt8], value: [UInt8])] = []
        try forEach(in: range, descending: descending) { k, v in
            out.append((Array(k), Array(v)))
            return true
        }
        return out
    }
}

/// One leaf entry's value, kept alive with its leaf (a decoded node, or the payload a lookup searched in place).
package struct NodeSlice {
    /// What keeps the value's bytes alive: the leaf node, or the leaf's payload when it was searched without
    /// being decoded (``BTree/value(for:cachingLeaf:)`` with `cachingLeaf` false).
    private let owner: AnyObject
    private let value: UnsafeRawBufferPointer
    /// The decoded leaf and the entry's index in it; nil for a value found in an undecoded leaf.
    package let entry: (node: Node, index: Int)?

    /// Entry `index` of the decoded leaf `node`.
    package init(node: Node, index: Int) {
        owner = node
        value = node.value(index)
        entry = (node, index)
    }

    /// A value found in the undecoded leaf `payload` (``LeafLookup``); `value` points into it, and stays valid
    /// because the slice holds `payload` (which holds its mapping or its decompressed bytes).
    init(payload: ChunkPayload, value: UnsafeRawBufferPointer) {
        owner = payload
        self.value = value
        entry = nil
    }

    /// A copy of `value` (a row of a leaf read in place, whose bytes do not last: ``BTreeReader``), held in a
    /// payload of its own.
    init(copying value: UnsafeRawBufferPointer) {
        let memory = UnsafeMutableRawPointer.allocate(byteCount: max(1, value.count), alignment: 8)
        if let base = value.baseAddress { memory.copyMemory(from: base, byteCount: value.count) }
        let copy = ChunkPayload(taking: memory, count: value.count, offset: 0, kind: .leaf, fileLength: 0)
        owner = copy
        self.value = UnsafeRawBufferPointer(start: copy.base, count: value.count)
        entry = nil
    }

    /// Calls `body` with the value's bytes, valid during the call.
    package func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try withExtendedLifetime(owner) { try body(value) }
    }
}
