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
    /// The open last leaf: each entry's key and value, one after the other, and where each sits there. It
    /// holds the tree's largest key as its last (it is empty only for an empty tree, and once finished).
    @exclusivity(unchecked) private var leafBytes: [UInt8] = []
    @exclusivity(unchecked) private var leafEntries: [(key: Range<Int>, value: Range<Int>)] = []
    /// The open leaf's entry bytes (the sum of ``NodeWriter/leafEntrySize(keyCount:valueCount:)``).
    @exclusivity(unchecked) private var leafEntriesSize = 0
    /// The open inner node of each level above the leaves.
    @exclusivity(unchecked) private var levels: InnerLevels
    /// Whether the appender takes no more calls: it finished, or a write failed.
    @exclusivity(unchecked) private var closed = false

    /// An appender continuing `tree` (a writer's tree: uncommitted nodes readable). Reads the tree's right edge
    /// — one node per level — and its first leaf's depth, and takes the edge's nodes out of the node cache, as a
    /// modify replacing them does.
    ///
    /// - Throws: `.corruption` when the right edge's leaf is not at the depth of the first leaf; storage errors.
    package init(resuming tree: BTree) throws {
        configuration = tree.configuration
        nodes = NodeWriter(file: tree.file, configuration: tree.configuration)
        guard let root = tree.root else {
            levels = InnerLevels()
            return
        }
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
        levels = InnerLevels(resuming: edge.reversed().map { parent in
            (0..<(parent.count - 1)).map { ChildEntry(key: Array(parent.key($0)), pointer: parent.child($0)) }
        })
        for i in 0..<node.count { appendToLeaf(key: node.key(i), value: node.value(i)) }
    }

    /// The largest key of the tree as it stands (original and appended rows); nil while the tree is empty and
    /// once the appender is closed.
    package var largestKey: [UInt8]? {
        closed ? nil : leafEntries.last.map { Array(leafBytes[$0.key]) }
    }

    /// Appends a row whose key is above every key of the tree and every row appended before.
    ///
    /// - Throws: `.invalidArgument` when `key` is not above the tree's largest key (nothing changes); storage
    ///   errors (the appender is then closed).
    package func append(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) throws {
        try checkOpen()
        if let last = leafEntries.last,
           leafBytes.withUnsafeBytes({ compareBytes(UnsafeRawBufferPointer(rebasing: $0[last.key]), key) }) >= 0 {
            throw SofaError(.invalidArgument, "appended keys must be above every key of the tree",
                            path: nodes.file.path)
        }
        // Filled as FORMAT.md §8 says: the entries' bytes within the target, the leading count not counted.
        let size = NodeWriter.leafEntrySize(keyCount: key.count, valueCount: value.count)
        if !leafEntries.isEmpty && leafEntriesSize + size > configuration.nodeSize {
            try closingOnFailure { try writeLeaf() }
        }
        appendToLeaf(key: key, value: value)
    }

    /// Appends a row from arrays; see ``append(key:value:)-(UnsafeRawBufferPointer,UnsafeRawBufferPointer)``.
    package func append(key: [UInt8], value: [UInt8]) throws {
        try key.withUnsafeBytes { k in try value.withUnsafeBytes { v in try append(key: k, value: v) } }
    }

    /// Writes the right edge, bottom up, and returns the tree (uncommitted: commit its root). The appender is
    /// closed afterwards, whether it succeeds or throws.
    package func finish() throws -> BTree {
        try checkOpen()
        defer { closed = true }
        if !leafEntries.isEmpty { try writeLeaf() }
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
        let keyStart = leafBytes.count
        leafBytes.append(contentsOf: key)
        let valueStart = leafBytes.count
        leafBytes.append(contentsOf: value)
        leafEntries.append((keyStart..<valueStart, valueStart..<leafBytes.count))
        leafEntriesSize += NodeWriter.leafEntrySize(keyCount: key.count, valueCount: value.count)
    }

    /// Writes the open leaf and hands its pointer to the level above.
    private func writeLeaf() throws {
        let entry = try leafBytes.withUnsafeBytes { all in
            try nodes.writeLeaf(leafEntries.map {
                (UnsafeRawBufferPointer(rebasing: all[$0.key]), UnsafeRawBufferPointer(rebasing: all[$0.value]))
            }, payloadSize: varintSize(UInt64(leafEntries.count)) + leafEntriesSize)
        }
        leafBytes.removeAll(keepingCapacity: true)
        leafEntries.removeAll(keepingCapacity: true)
        leafEntriesSize = 0
        try levels.push(entry, level: 0, nodes: &nodes)
    }
}
