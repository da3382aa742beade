/// Appends rows above every key of a tree while holding its right edge in memory: the last leaf and the last
/// inner node of each level stay unwritten until ``finish()``, and only nodes that fill are written before.
///
/// A batch modify (``BTree/modified(by:compress:)``) that appends past the tree's largest key rewrites the right
/// edge — the partly filled last leaf and every inner node above it — so a bulk load applied in chunks (a
/// pipelined ``WriteBatch``) rewrote that edge once per chunk: the bytes merged, encoded and compressed again and
/// left dead in the file. An appender resumed from the tree takes the chunks one after the other and writes the
/// edge once, when it finishes (BENCHMARKS.md §3, "D1, tenth round").
///
/// The tree it finishes holds the original rows followed by the appended ones, its leaves filled full before
/// a new one starts (as a bulk load fills them, ``TreeBuilder``) and every leaf at the original depth (a tree
/// grows a level when its top fills). Until then the original tree is still whole and readable, but does not
/// hold the appended rows, and the nodes the appender wrote are reachable from no root: only the appender's
/// owner may use it, and it must finish before the tree is read or committed.
///
/// ```swift
/// let appender = try TreeAppender(resuming: tree)
/// for (key, value) in rowsAboveTheTree { try appender.append(key: key, value: value) }
/// tree = try appender.finish()
/// ```
///
/// Exclusivity is unchecked on its state: one thread at a time owns an appender (its batch's writer, or the
/// flush thread the writer handed it to), never overlapping its own accesses, and the dynamic checks were ~15 %
/// of a pipelined chunk's instructions (callgrind, D1).
package final class TreeAppender {
    @exclusivity(unchecked) private var nodes: NodeWriter
    private let configuration: BTreeConfiguration
    /// The open last leaf: each entry's key and value, one after the other, and where each sits there. It
    /// holds the tree's largest key as its last (it is empty only for an empty tree, and after ``finish()``).
    @exclusivity(unchecked) private var leafBytes: [UInt8] = []
    @exclusivity(unchecked) private var leafEntries: [(key: Range<Int>, value: Range<Int>)] = []
    /// The open leaf's payload size without its entry count (the sum of ``NodeWriter/leafEntrySize``).
    @exclusivity(unchecked) private var leafEntriesSize = 0
    /// The open inner node of each level, level 0 just above the leaves, and its payload size without its
    /// entry count. The top level's entries are the root's children.
    @exclusivity(unchecked) private var levels: [[ChildEntry]] = []
    @exclusivity(unchecked) private var levelSizes: [Int] = []
    /// Whether ``finish()`` has run: the appender takes no more rows.
    @exclusivity(unchecked) private var finished = false

    /// An appender continuing `tree` (a writer's tree: uncommitted nodes readable). Reads the tree's right edge
    /// — one node per level — and takes the edge's nodes out of the node cache, as a modify replacing them does.
    ///
    /// - Throws: `.corruption` when the edge's leaf is not at the depth of the edge's inner nodes; storage
    ///   errors.
    package init(resuming tree: BTree) throws {
        configuration = tree.configuration
        nodes = NodeWriter(file: tree.file, configuration: tree.configuration)
        guard let root = tree.root else { return }
        var inner: [Node] = []
        var offset = root.offset
        var node = try tree.node(at: offset)
        tree.file.nodeCache.remove(at: offset)
        while !node.isLeaf {
            guard node.count > 0 else { throw TreeAppender.emptyInner(at: offset, in: tree.file) }
            inner.append(node)
            offset = node.childOffset(node.count - 1)
            node = try tree.node(at: offset)
            tree.file.nodeCache.remove(at: offset)
        }
        for i in 0..<node.count { appendToLeaf(key: node.key(i), value: node.value(i)) }
        guard !leafEntries.isEmpty else { throw TreeAppender.emptyLeaf(at: offset, in: tree.file) }
        // Each edge node's entries but the last, which points to the edge node below: that one is rewritten.
        for parent in inner.reversed() {
            var entries: [ChildEntry] = []
            var size = 0
            entries.reserveCapacity(parent.count)
            for i in 0..<(parent.count - 1) {
                let entry = ChildEntry(key: Array(parent.key(i)), pointer: parent.child(i))
                size += NodeWriter.innerEntrySize(entry)
                entries.append(entry)
            }
            levels.append(entries)
            levelSizes.append(size)
        }
    }

    private static func emptyInner(at offset: UInt64, in file: StorageFile) -> SofaError {
        SofaError(.corruption, "inner node \(offset) has no entries", path: file.path, offset: Int(clamping: offset))
    }

    private static func emptyLeaf(at offset: UInt64, in file: StorageFile) -> SofaError {
        SofaError(.corruption, "leaf \(offset) has no entries", path: file.path, offset: Int(clamping: offset))
    }

    /// The largest key of the tree as it stands (original and appended rows); nil while it is empty.
    package var largestKey: [UInt8]? {
        leafEntries.last.map { Array(leafBytes[$0.key]) }
    }

    /// Appends a row whose key is above every key of the tree and every row appended before.
    ///
    /// - Throws: `.invalidArgument` when `key` is not above the tree's largest key; storage errors.
    package func append(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) throws {
        precondition(!finished, "append after finish")
        if let last = leafEntries.last,
           leafBytes.withUnsafeBytes({ compareBytes(UnsafeRawBufferPointer(rebasing: $0[last.key]), key) }) >= 0 {
            throw SofaError(.invalidArgument, "appended keys must be above every key of the tree",
                            path: nodes.file.path)
        }
        // Filled as FORMAT.md §8 says: the entries' bytes within the target, the leading count not counted.
        let size = NodeWriter.leafEntrySize(keyCount: key.count, valueCount: value.count)
        if !leafEntries.isEmpty && leafEntriesSize + size > configuration.nodeSize { try writeLeaf() }
        appendToLeaf(key: key, value: value)
    }

    /// Appends a row from arrays; see ``append(key:value:)-(UnsafeRawBufferPointer,_)``.
    package func append(key: [UInt8], value: [UInt8]) throws {
        try key.withUnsafeBytes { k in try value.withUnsafeBytes { v in try append(key: k, value: v) } }
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
        try push(entry, level: 0)
    }

    /// Adds `entry` to the open node of `level`, first writing that node when the entry would overflow it.
    private func push(_ entry: ChildEntry, level: Int) throws {
        if level == levels.count {
            levels.append([])
            levelSizes.append(0)
        }
        let size = NodeWriter.innerEntrySize(entry)
        if !levels[level].isEmpty && levelSizes[level] + size > configuration.innerNodeSize {
            let written = try nodes.writeInner(levels[level][...])
            levels[level].removeAll(keepingCapacity: true)
            levelSizes[level] = 0
            try push(written, level: level + 1)
        }
        levels[level].append(entry)
        levelSizes[level] += size
    }

    /// Writes the right edge, bottom up, and returns the tree (uncommitted: commit its root). The appender
    /// takes no more rows.
    package func finish() throws -> BTree {
        precondition(!finished, "finish called twice")
        finished = true
        if !leafEntries.isEmpty { try writeLeaf() }
        var root: NodePointer?
        var level = 0
        while level < levels.count {
            if level == levels.count - 1 {
                // The top level's open node holds every node of its level: one child (a lone leaf too) is the
                // root itself.
                let top = levels[level]
                root = top.count == 1 ? top[0].pointer : try nodes.writeInner(top[...]).pointer
                break
            }
            if !levels[level].isEmpty {
                let written = try nodes.writeInner(levels[level][...])
                levels[level].removeAll()
                levelSizes[level] = 0
                try push(written, level: level + 1)
            }
            level += 1
        }
        return BTree(file: nodes.file, root: root, configuration: configuration, limit: StorageFile.unlimited)
    }
}
