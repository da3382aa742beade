import SofaStorage

/// What `sofa info` reports about one view and its index file: the view's state (rows, last sequence indexed,
/// version, reduce, staleness) and the file's sizes and both trees' shapes, measured the way
/// ``DocumentFileReport`` measures the document file.
package struct ViewFileReport: Sendable {
    /// The view's name.
    package var name: String
    /// The index file's path (`NAME.sofa/views/NAME`).
    package var path: String
    /// Bytes of the file (up to the newest commit's end).
    package var fileSize: UInt64
    /// Bytes reachable from the newest commit: file header, both trees, the commit header and trailer.
    package var liveBytes: UInt64
    /// The newest commit's number.
    package var commitNumber: UInt64
    /// The database sequence the index reflects.
    package var lastSequenceIndexed: UInt64
    /// True when the database has changes after ``lastSequenceIndexed``.
    package var isStale: Bool
    /// The map/reduce version string the index was built with.
    package var mapVersion: String
    /// The reduce the stored reductions are made with: `count`, `sum`, `stats`, `custom`, or nil for none.
    package var reduceName: String?
    /// True for a declarative view (its definition is stored in the file).
    package var isDeclarative: Bool
    /// Shapes of the rows tree and the back-index, and the node size each is built to.
    package var rows: TreeStatistics
    package var backIndex: TreeStatistics
    package var rowsNodeSize: Int
    package var backIndexNodeSize: Int

    /// The fraction of the file that is not live (0 right after compaction).
    package var fragmentation: Double { fileSize == 0 ? 0 : 1 - Double(liveBytes) / Double(fileSize) }
}

extension View {
    /// Sizes, state and tree shapes of the view's index file at its newest commit (reads every node); nil when
    /// the view has no index file.
    ///
    /// - Throws: ``SofaError`` when the database is closed or the file does not open.
    package func fileReport() throws -> ViewFileReport? {
        guard let index = try index() else { return nil }
        let snapshot = try index.snapshot()
        let commit = index.storage.latestCommit
        let trees = (snapshot.rows.root?.subtreeSize ?? 0) + (snapshot.backIndex.root?.subtreeSize ?? 0) +
            (snapshot.groups.root?.subtreeSize ?? 0)
        let live = StorageFile.fileHeaderLength + trees + (commit.endOffset - commit.offset)
        let header = snapshot.header
        let reduceName: String? = header.reduceKind == 0 ? nil
            : Reduce.builtIn(kind: header.reduceKind)?.name ?? "custom"
        return ViewFileReport(
            name: name, path: index.path, fileSize: commit.endOffset, liveBytes: live,
            commitNumber: commit.commitNumber, lastSequenceIndexed: header.lastSequence,
            isStale: header.lastSequence < database.lastSequence, mapVersion: header.mapVersion,
            reduceName: reduceName, isDeclarative: !header.definition.isEmpty,
            rows: snapshot.rows.verify().statistics, backIndex: snapshot.backIndex.verify().statistics,
            rowsNodeSize: index.rowsConfiguration.nodeSize, backIndexNodeSize: index.backConfiguration.nodeSize)
    }

    /// Calls `body` with every row of the index in index order (emitted key, value, document ID), without
    /// updating the index; return false to stop (`sofa dump --view`).
    ///
    /// - Throws: ``SofaError`` — `.corruption` at a row or node that does not read.
    package func forEachRow(_ body: (_ key: JSON, _ value: JSON?, _ documentID: String) throws -> Bool) throws {
        guard let index = try index() else { return }
        try index.snapshot().rows.forEach { rowKey, value in
            let row = try RowValue(value)
            return try body(row.key, row.value, try RowKey.documentIDString(rowKey, keyLength: row.keyLength))
        }
    }

    /// Calls `body` with every node of the rows tree (or the back-index), parents first.
    ///
    /// - Throws: ``SofaError`` — `.corruption` at the first node that does not read.
    package func forEachNode(backIndex: Bool, _ body: (NodeSummary) throws -> Void) throws {
        guard let index = try index() else { return }
        let snapshot = try index.snapshot()
        try (backIndex ? snapshot.backIndex : snapshot.rows).forEachNode(body)
    }

    /// The index file's commits, newest first (at most `limit`), each with the last sequence indexed it
    /// recorded (nil when its metadata does not decode).
    ///
    /// - Throws: ``SofaError`` — `.corruption` when a header in the chain does not read.
    package func commitHistory(limit: Int? = nil) throws -> [(header: CommitHeader, lastSequence: UInt64?)] {
        guard let index = try index() else { return [] }
        return try index.storage.commitHistory(limit: limit).map {
            ($0, try? ViewHeader(decoding: $0, path: index.path).lastSequence)
        }
    }
}
