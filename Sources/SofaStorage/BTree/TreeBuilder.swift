/// Builds a tree bottom-up from rows already in ascending key order: the bulk load used for first index
/// builds and compaction.
///
/// Leaves are packed full (up to the configured node size) and written as soon as they fill, and each inner
/// level keeps only the node it is filling, so memory stays at one node per level however many rows stream
/// through. The result is the same tree shape a perfectly packed B+tree would have.
///
/// ```swift
/// let builder = TreeBuilder(file: file, configuration: config)
/// for (key, value) in sortedRows { try builder.add(key: key, value: value) }
/// let tree = try builder.finish()
/// try file.commit(roots: [tree.root], metadata: [])
/// ```
public final class TreeBuilder {
    private var nodes: NodeWriter
    private let configuration: BTreeConfiguration
    /// The leaf being filled: its encoded entries and where each key and value sits in them.
    private var leafBytes: [UInt8] = []
    private var leafEntries: [(key: Range<Int>, value: Range<Int>)] = []
    /// The inner nodes being filled, level 0 just above the leaves, and whether each level already emitted
    /// a node (then it is not the root).
    private var levels: [[ChildEntry]] = []
    private var levelSize: [Int] = []
    private var emitted: [Bool] = []
    /// The previous row's key (reused: no allocation per row), valid when `rowCount > 0`.
    private var lastKey: [UInt8] = []
    /// Rows added so far.
    public private(set) var rowCount: UInt64 = 0

    /// A builder writing into `file` (uncommitted until the caller commits the root).
    public init(file: StorageFile, configuration: BTreeConfiguration) {
        self.nodes = NodeWriter(file: file, configuration: configuration)
        self.configuration = configuration
    }

    /// Adds the next row.
    ///
    /// - Throws: `.invalidArgument` when `key` is not greater than the previous key; storage errors.
    public func add(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) throws {
        if rowCount > 0, lastKey.withUnsafeBytes({ compareBytes($0, key) }) >= 0 {
            throw SofaError(.invalidArgument, "bulk load keys must be strictly ascending (row \(rowCount))",
                            path: nodes.file.path)
        }
        let size = NodeWriter.leafEntrySize(keyCount: key.count, valueCount: value.count)
        if !leafEntries.isEmpty && leafBytes.count + size > configuration.nodeSize { try flushLeaf() }
        leafBytes.appendVarint(UInt64(key.count))
        let k = leafBytes.count..<(leafBytes.count + key.count)
        leafBytes.append(contentsOf: key)
        leafBytes.appendVarint(UInt64(value.count))
        let v = leafBytes.count..<(leafBytes.count + value.count)
        leafBytes.append(contentsOf: value)
        leafEntries.append((k, v))
        lastKey.removeAll(keepingCapacity: true)
        lastKey.append(contentsOf: key)
        rowCount += 1
    }

    /// Adds the next row from arrays.
    public func add(key: [UInt8], value: [UInt8]) throws {
        try key.withUnsafeBytes { k in try value.withUnsafeBytes { v in try add(key: k, value: v) } }
    }

    private func flushLeaf() throws {
        let entry = try leafBytes.withUnsafeBytes { all in
            try nodes.writeLeaf(leafEntries.map {
                (UnsafeRawBufferPointer(rebasing: all[$0.key]), UnsafeRawBufferPointer(rebasing: all[$0.value]))
            })
        }
        leafBytes.removeAll(keepingCapacity: true)
        leafEntries.removeAll(keepingCapacity: true)
        try push(entry, level: 0)
    }

    private func push(_ entry: ChildEntry, level: Int) throws {
        if level == levels.count {
            levels.append([])
            levelSize.append(0)
            emitted.append(false)
        }
        let size = NodeWriter.innerEntrySize(entry)
        if !levels[level].isEmpty && levelSize[level] + size > configuration.nodeSize {
            try flushLevel(level)
        }
        levels[level].append(entry)
        levelSize[level] += size
    }

    private func flushLevel(_ level: Int) throws {
        let entry = try nodes.writeInner(levels[level][...])
        levels[level].removeAll(keepingCapacity: true)
        levelSize[level] = 0
        emitted[level] = true
        try push(entry, level: level + 1)
    }

    /// Writes what remains and returns the tree (uncommitted; commit its root).
    public func finish() throws -> BTree {
        if !leafEntries.isEmpty { try flushLeaf() }
        var root: NodePointer?
        var level = 0
        while level < levels.count {
            let isTop = level == levels.count - 1
            if isTop && !emitted[level] && levels[level].count == 1 {
                root = levels[level][0].pointer
                break
            }
            if !levels[level].isEmpty { try flushLevel(level) }
            level += 1
        }
        return BTree(file: nodes.file, root: root, configuration: configuration, limit: StorageFile.unlimited)
    }
}
