/// Appends rows above every key of a tree while holding its right edge in memory: the last leaf and the last
/// inner node of each level stay unwritten until ``finish()``, and only nodes that fill are written before.
///
/// A batch modify (``BTree/modified(by:compress:)``) that appends past the tree's largest key rewrites the right
/// edge — the partly filled last leaf and every inner node above it — so a bulk load applied in chunks (a
/// pipelined `WriteBatch` of the document file) rewrote that edge once per chunk: the bytes merged, encoded and
/// compressed again and left dead in the file. An appender resumed from the tree takes the chunks one after the
/// other and writes the edge once, when it finishes (BENCHMARKS.md §3, "D1, tenth round").
///
/// The tree it finishes holds the original rows followed by the appended ones, every leaf at one depth (the
/// tree grows a level when its top fills), every node filled as far as the target allows before the next
/// begins (FORMAT.md §8, as a bulk load fills them, ``TreeBuilder``); an edge node resumed from an older file,
/// larger than the target, is written as it was plus what fits. Until then the original tree is still whole
/// and readable, but does not hold the appended rows, and the nodes the appender wrote are reachable from no
/// root: only the appender's owner may use it, and it must finish before the tree is read or committed. After
/// a failed write the appender refuses every call (a storage error discards the uncommitted nodes it points at).
///
/// Exclusivity is unchecked on its state: one thread at a time owns an appender (its batch's writer, or the
/// flush thread the writer handed it to), never overlapping its own accesses, and the dynamic checks were ~15 %
/// of a pipelined chunk's instructions (callgrind, D1).
///
/// ```swift
/// let appender = try TreeAppender(resuming: tree)
/// for (key, value) in rowsAboveTheTree { try appender.append(key: key, value: value) }
/// tree = try appender.finish()
/// ```
package final class TreeAppender {
    @exclusivity(unchecked) private var nodes: NodeWriter
    private let configuration: BTreeConfiguration
    /// The open last leaf's entries, encoded one after the other as its payload will hold them after the entry
    /// count (FORMAT.md §8): `leafSize` bytes of a buffer of `leafCapacity`, which grows and is reused from leaf
    /// to leaf. Encoding each entry as it comes costs one copy per field, where collecting the entries and
    /// encoding the leaf at the end cost two, and array appends (callgrind, D1). The last entry holds the tree's
    /// largest key (the leaf is empty only for an empty tree, and once finished).
    @exclusivity(unchecked) private var leaf: UnsafeMutableRawPointer
    @exclusivity(unchecked) private var leafCapacity: Int
    /// The open leaf's entry bytes: the sum of ``NodeWriter/leafEntrySize(keyCount:valueCount:)`` over them.
    @exclusivity(unchecked) private var leafSize = 0
    /// Where each entry's key and value lie in ``leaf``.
    @exclusivity(unchecked) private var leafLayout: [Node.Layout] = []
    /// The open inner node of each level above the leaves.
    @exclusivity(unchecked) private var levels = InnerLevels()
    /// Whether the appender takes no more calls: it finished, or a write failed.
    @exclusivity(unchecked) private var closed = false
    /// The offsets of the leaves written so far, in order, but for the right-edge leaf ``finish()`` writes. They
    /// do not go into the node cache as they are written: filling the cache with fresh memory as a bulk load
    /// writes was a fifth of D1's CPU time in this machine's page faults (BENCHMARKS.md §3, "D1, eleventh
    /// round"); the owner reads them into it later, off its critical path, if it wants them there.
    package private(set) var writtenLeaves: [UInt64] = []

    /// An appender continuing `tree` (a writer's tree: uncommitted nodes readable). Reads the tree's right edge
    /// — one node per level — and its first leaf's depth, and takes the edge's nodes out of the node cache, as a
    /// modify replacing them does.
    ///
    /// - Throws: `.corruption` when the right edge's leaf is not at the depth of the first leaf; storage errors.
    package init(resuming tree: BTree) throws {
        configuration = tree.configuration
        nodes = NodeWriter(file: tree.file, configuration: tree.configuration, cachesLeaves: false)
        // Twice the target: room for a leaf filled to it, and most of a resumed edge leaf written with a larger
        // target by an older build; an entry that does not fit grows the buffer.
        leafCapacity = 2 * max(configuration.nodeSize, 1024)
        leaf = UnsafeMutableRawPointer.allocate(byteCount: leafCapacity, alignment: 8)
        guard let root = tree.root else { return }
        // Every leaf lies at one depth (the batch modify's rule too): a damaged tree whose edge is shorter or
        // longer than its first path is not extended. (Read before the edge leaves the node cache.)
        let height = try tree.height(of: root.offset)
        var edge: [Node] = []
        var offset = root.offset
        var node = try tree.node(at: offset, cachingLeaf: false)
        tree.file.nodeCache.remove(at: offset)
        while !node.isLeaf {
            edge.append(node)
            offset = node.childOffset(node.count - 1)
            node = try tree.node(at: offset, cachingLeaf: false)
            tree.file.nodeCache.remove(at: offset)
        }
        guard edge.count == height else { throw tree.misplacedLeaf(at: offset) }
        // Each edge node's entries but the last, which points to the edge node below: that one is rewritten.
        levels = InnerLevels(resuming: edge.reversed())
        for i in 0..<node.count { appendToLeaf(key: node.key(i), value: node.value(i)) }
    }

    deinit { leaf.deallocate() }

    /// The largest key of the tree as it stands (original and appended rows); nil while the tree is empty and
    /// once the appender is closed.
    package var largestKey: [UInt8]? {
        closed ? nil : leafLayout.last.map { Array(key(of: $0)) }
    }

    /// The key of the open leaf's entry at `layout`.
    @inline(__always)
    private func key(of layout: Node.Layout) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: leaf + Int(layout.keyStart), count: Int(layout.keyLength))
    }

    /// Appends a row whose key is above every key of the tree and every row appended before.
    ///
    /// - Throws: `.invalidArgument` when `key` is not above the tree's largest key (nothing changes); storage
    ///   errors (the appender is then closed).
    package func append(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) throws {
        try append(key: key, valueCount: value.count) { $0.copyMemory(from: value) }
    }

    /// Appends a row from arrays; see ``append(key:value:)-(UnsafeRawBufferPointer,UnsafeRawBufferPointer)``.
    package func append(key: [UInt8], value: [UInt8]) throws {
        try key.withUnsafeBytes { k in try value.withUnsafeBytes { v in try append(key: k, value: v) } }
    }

    /// Appends a row whose value `write` stores in place, into the open leaf: exactly `valueCount` bytes, all of
    /// which it must write (a value encoded straight into the leaf, not into an array first). Otherwise as
    /// ``append(key:value:)-(UnsafeRawBufferPointer,UnsafeRawBufferPointer)``.
    package func append(key: UnsafeRawBufferPointer, valueCount: Int,
                        writingValue write: (UnsafeMutableRawBufferPointer) -> Void) throws {
        try checkOpen()
        if let last = leafLayout.last, compareBytes(self.key(of: last), key) >= 0 {
            throw SofaError(.invalidArgument, "appended keys must be above every key of the tree",
                            path: nodes.file.path)
        }
        // Filled as FORMAT.md §8 says: the entries' bytes within the target, the leading count not counted.
        let size = NodeWriter.leafEntrySize(keyCount: key.count, valueCount: valueCount)
        if !leafLayout.isEmpty && leafSize + size > configuration.nodeSize {
            try closingOnFailure { try writeLeaf() }
        }
        appendToLeaf(key: key, valueCount: valueCount, size: size, writingValue: write)
    }

    /// Writes the right edge, bottom up, and returns the tree (uncommitted: commit its root). The appender is
    /// closed afterwards, whether it succeeds or throws.
    package func finish() throws -> BTree {
        try checkOpen()
        defer { closed = true }
        if !leafLayout.isEmpty {
            try writeLeaf()
            // The edge leaf is not counted as written: the next appender resumed from the tree rewrites it, and
            // it would then sit in the node cache unreachable, pushing live leaves out of it.
            writtenLeaves.removeLast()
        }
        let root = try levels.finish(nodes: &nodes)
        return BTree(file: nodes.file, root: root, configuration: configuration, limit: StorageFile.unlimited)
    }

    private func checkOpen() throws {
        guard !closed else {
            throw SofaError(.invalidArgument, "the tree appender was finished, or a write of it failed",
                            path: nodes.file.path)
        }
    }

    /// Runs `body`, closing the appender if it throws.
    private func closingOnFailure(_ body: () throws -> Void) throws {
        do {
            try body()
        } catch {
            closed = true
            throw error
        }
    }

    private func appendToLeaf(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
        appendToLeaf(key: key, valueCount: value.count,
                     size: NodeWriter.leafEntrySize(keyCount: key.count, valueCount: value.count)) {
            $0.copyMemory(from: value)
        }
    }

    /// Encodes an entry at the end of the open leaf, its value written by `write`; `size` is its
    /// ``NodeWriter/leafEntrySize(keyCount:valueCount:)``.
    @inline(__always)
    private func appendToLeaf(key: UnsafeRawBufferPointer, valueCount: Int, size: Int,
                              writingValue write: (UnsafeMutableRawBufferPointer) -> Void) {
        if leafCapacity - leafSize < size {
            leafCapacity = max(2 * leafCapacity, leafSize + size)
            let grown = UnsafeMutableRawPointer.allocate(byteCount: leafCapacity, alignment: 8)
            grown.copyMemory(from: leaf, byteCount: leafSize)
            leaf.deallocate()
            leaf = grown
        }
        leafLayout.append(NodeWriter.storeLeafEntry(key: key, valueCount: valueCount, writingValue: write,
                                                    at: leaf + leafSize, base: leaf))
        leafSize += size
    }

    /// Writes the open leaf and hands its pointer to the level above.
    private func writeLeaf() throws {
        let entry = try nodes.writeLeaf(encodedEntries: UnsafeRawBufferPointer(start: leaf, count: leafSize),
                                        layout: leafLayout)
        leafSize = 0
        leafLayout.removeAll(keepingCapacity: true)
        writtenLeaves.append(entry.pointer.offset)
        try levels.push(entry, level: 0, nodes: &nodes)
    }
}
