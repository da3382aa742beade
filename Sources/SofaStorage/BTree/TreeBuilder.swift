import Dispatch

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
    /// A leaf encoded and waiting to be framed (compressed) together with others, then appended in order.
    private struct EncodedLeaf {
        var payload: [UInt8]
        var reduction: [UInt8]
        var lastKey: [UInt8]
        var rows: Int
    }

    /// Leaves framed at once; their LZ4 compression runs on every core.
    static let leavesPerBatch = 64
    /// Parallel framing tasks per batch, each with its own compressor.
    static let framingTasks = 4

    private var nodes: NodeWriter
    private let configuration: BTreeConfiguration
    /// The leaf being filled: its encoded entries and where each key and value sits in them.
    private var leafBytes: [UInt8] = []
    private var leafEntries: [(key: Range<Int>, value: Range<Int>)] = []
    /// The inner nodes being filled, level 0 just above the leaves.
    private var levels = InnerLevels()
    /// The previous row's key (reused: no allocation per row), valid when `rowCount > 0`.
    private var lastKey: [UInt8] = []
    private var encoded: [EncodedLeaf] = []
    private let compressors: [Compressor]
    /// Rows added so far.
    public private(set) var rowCount: UInt64 = 0

    /// A builder writing into `file` (uncommitted until the caller commits the root).
    public init(file: StorageFile, configuration: BTreeConfiguration) {
        self.nodes = NodeWriter(file: file, configuration: configuration, cachesLeaves: false)
        self.configuration = configuration
        compressors = configuration.compress ? (0..<TreeBuilder.framingTasks).map { _ in Compressor() } : []
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
        var payload: [UInt8] = []
        payload.reserveCapacity(leafBytes.count + 8)
        let reduction = try leafBytes.withUnsafeBytes { all in
            try nodes.encodeLeaf(leafEntries.map {
                (UnsafeRawBufferPointer(rebasing: all[$0.key]), UnsafeRawBufferPointer(rebasing: all[$0.value]))
            }, into: &payload)
        }
        encoded.append(EncodedLeaf(payload: payload, reduction: reduction,
                                   lastKey: Array(leafBytes[leafEntries[leafEntries.count - 1].key]),
                                   rows: leafEntries.count))
        leafBytes.removeAll(keepingCapacity: true)
        leafEntries.removeAll(keepingCapacity: true)
        if encoded.count == TreeBuilder.leavesPerBatch { try writeEncodedLeaves() }
    }

    /// Frames the encoded leaves in parallel (LZ4 is most of a bulk load's single-threaded time), then appends
    /// them in key order and hands their pointers to the level above.
    private func writeEncodedLeaves() throws {
        guard !encoded.isEmpty else { return }
        var framed = [[UInt8]](repeating: [], count: encoded.count)
        let leaves = encoded
        let tasks = min(TreeBuilder.framingTasks, leaves.count)
        framed.withUnsafeMutableBufferPointer { out in
            let job = FramingJob(out: out, compressors: compressors)
            // Task t frames leaves t, t + tasks, …: each writes only its own slots, with its own compressor.
            DispatchQueue.concurrentPerform(iterations: tasks) { t in
                let compressor = job.compressors.isEmpty ? nil : job.compressors[t]
                for i in stride(from: t, to: leaves.count, by: tasks) {
                    var bytes: [UInt8] = []
                    bytes.reserveCapacity(leaves[i].payload.count + FileFormat.chunkPrefixSize)
                    leaves[i].payload.withUnsafeBytes {
                        _ = Chunk.append(kind: .leaf, payload: $0, compressor: compressor, to: &bytes)
                    }
                    job.out[i] = bytes
                }
            }
        }
        encoded.removeAll(keepingCapacity: true)
        for (leaf, chunk) in zip(leaves, framed) {
            let (offset, length) = try chunk.withUnsafeBytes { try nodes.file.append(framed: $0) }
            let pointer = NodePointer(offset: offset, rowCount: UInt64(leaf.rows), subtreeSize: UInt64(length),
                                      reduction: leaf.reduction)
            try levels.push(ChildEntry(key: leaf.lastKey, pointer: pointer), level: 0, nodes: &nodes)
        }
    }

    /// Writes what remains and returns the tree (uncommitted; commit its root).
    public func finish() throws -> BTree {
        if !leafEntries.isEmpty { try flushLeaf() }
        try writeEncodedLeaves()
        let root = try levels.finish(nodes: &nodes)
        return BTree(file: nodes.file, root: root, configuration: configuration, limit: StorageFile.unlimited)
    }
}

/// One batch's framing across threads: task t writes only its own slots of `out` and uses only `compressors[t]`.
private struct FramingJob: @unchecked Sendable {
    let out: UnsafeMutableBufferPointer<[UInt8]>
    let compressors: [Compressor]
}
