import SofaStorage

// The working trees' open right edges (``WriteBatch/edges``): which chunks go there, and how.
extension WriteBatch {
    /// Appenders holding the right edges of both working trees open across chunks (``TreeAppender``).
    struct OpenEdges {
        let byID: TreeAppender
        let bySequence: TreeAppender

        /// Appenders resuming the working trees `byID` and `bySequence`.
        init(resuming byID: BTree, _ bySequence: BTree) throws {
            self.byID = try TreeAppender(resuming: byID)
            self.bySequence = try TreeAppender(resuming: bySequence)
        }

        /// Writes both edges and returns the whole trees.
        func finish() throws -> (byID: BTree, bySequence: BTree) {
            (try byID.finish(), try bySequence.finish())
        }

        /// The by-ID leaves the appender wrote so far (``TreeAppender/writtenLeaves``), for the next commit to read
        /// into the node cache (``DocumentFile/startNodeCacheFill()``). The by-sequence tree's are left out: the
        /// changes feed and view updates read them once, in order, and in the cache they took the room of by-ID
        /// leaves, which D3's and D4's reads come back to (at 1M the two trees' leaves are about the 256 MiB cache
        /// of `sofa-compare`). (They may include leaves no tree reaches any more: reading one into the cache
        /// wastes its room, no more.)
        var writtenLeaves: [UInt64] { byID.writtenLeaves }
    }

    /// Whether `changes` (in ascending ID order when `sorted`), with the log's `logged` changes, only append to
    /// both trees: every ID is new and above `largest` (the by-ID tree's largest ID), so every new sequence is
    /// above the by-sequence tree's too (sequences only grow) and no by-sequence entry is removed.
    static func appendsToTrees(_ changes: Changes, sorted: Bool, above largest: [UInt8]?,
                               logged: [LogEntry]) -> Bool {
        guard sorted, logged.isEmpty, !changes.isEmpty else { return false }
        if let largest, changes.compareID(at: 0, to: largest) <= 0 { return false }
        return changes.entries.allSatisfy { $0.storedSequence == nil }
    }

    /// Appends `changes` (new IDs in ascending order, above every ID of the trees) to the trees' open edges: the
    /// encoded records to the by-ID tree, then the new sequences in ascending order to the by-sequence tree.
    static func append(_ changes: Changes, to edges: OpenEdges) throws {
        try changes.forEach { _, id, record, _ in try edges.byID.append(key: id, value: record) }
        // Sequences follow the puts, which follow the IDs in a bulk load: sort only when they do not.
        let entries = changes.entries
        var order: [Int]?
        if !entries.indices.dropFirst().allSatisfy({ entries[$0 - 1].sequence < entries[$0].sequence }) {
            order = entries.indices.sorted { entries[$0].sequence < entries[$1].sequence }
        }
        try changes.forEach(in: order) { _, id, _, e in
            // `DocumentFile.sequenceKey`'s bytes: the sequence, big-endian.
            try withUnsafeBytes(of: e.sequence.bigEndian) { try edges.bySequence.append(key: $0, value: id) }
        }
    }
}
