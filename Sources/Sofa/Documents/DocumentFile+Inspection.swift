import SofaStorage

/// What `sofa info` reports about one file: sizes, live bytes and both trees' shapes.
package struct DocumentFileReport: Sendable {
    /// The file's path.
    package var path: String
    /// Bytes of the file (up to the newest commit's end).
    package var fileSize: UInt64
    /// Bytes reachable from the newest commit: file header, both trees, body chunks, the commit log's records,
    /// the commit header and trailer. The rest is garbage that compaction removes.
    package var liveBytes: UInt64
    /// Bytes of body chunks (bodies stored outside their by-ID entry).
    package var bodyChunkBytes: UInt64
    /// The newest commit's number.
    package var commitNumber: UInt64
    /// The last sequence.
    package var lastSequence: UInt64
    /// Documents by state, from the by-ID tree's stored counts.
    package var liveDocuments: UInt64
    package var deletedDocuments: UInt64
    package var conflictedDocuments: UInt64
    /// Shapes of the two trees, and the node size each is built to.
    package var byID: TreeStatistics
    package var bySequence: TreeStatistics
    package var byIDNodeSize: Int
    package var bySequenceNodeSize: Int
    /// Records in the newest commit's log chain (FORMAT.md §10.1.7), and the documents they change: what the
    /// trees do not hold yet.
    package var logRecords: Int
    package var pendingDocuments: Int

    /// The fraction of the file that is not live (0 right after compaction).
    package var fragmentation: Double { fileSize == 0 ? 0 : 1 - Double(liveBytes) / Double(fileSize) }
}

extension Database {
    /// Sizes, counts and tree shapes of the document file at the newest commit (reads every node).
    ///
    /// - Throws: ``SofaError`` when the database is closed or a body chunk does not read.
    package func documentFileReport() throws -> DocumentFileReport {
        let snapshot = try readSnapshot()
        let commit = snapshot.storage.latestCommit
        var bodyBytes: UInt64 = 0
        try snapshot.forEachByID { leaf, i in
            let record = try DocumentRecord(decoding: leaf.value(i), path: snapshot.path)
            for revision in record.tree.revisions {
                guard case .chunk(let offset) = revision.body else { continue }
                bodyBytes += UInt64(try snapshot.storage.readChunk(at: offset, kind: .value,
                                                                   limit: snapshot.byID.limit).fileLength)
            }
            return true
        }
        let trees = (snapshot.byID.root?.subtreeSize ?? 0) + (snapshot.bySequence.root?.subtreeSize ?? 0)
        let log = try logRecords()
        let logBytes = UInt64(log.reduce(0) { $0 + $1.storedBytes })
        let live = StorageFile.fileHeaderLength + trees + bodyBytes + logBytes + (commit.endOffset - commit.offset)
        let counts = snapshot.counts
        return DocumentFileReport(
            path: snapshot.path, fileSize: commit.endOffset, liveBytes: live, bodyChunkBytes: bodyBytes,
            commitNumber: commit.commitNumber, lastSequence: snapshot.lastSequence, liveDocuments: counts.live,
            deletedDocuments: counts.deleted, conflictedDocuments: counts.conflicted,
            byID: snapshot.byID.verify().statistics, bySequence: snapshot.bySequence.verify().statistics,
            byIDNodeSize: documents.byIDConfiguration.nodeSize,
            bySequenceNodeSize: documents.bySequenceConfiguration.nodeSize, logRecords: log.count,
            pendingDocuments: snapshot.pending.count)
    }

    /// Calls `body` with every document by ID, tombstones included (``Document/isDeleted``), at its winning
    /// revision; return false to stop. The second argument is the number of conflicting revisions.
    ///
    /// - Throws: ``SofaError`` for a closed database or a storage failure.
    package func forEachDocument(_ body: (Document, Int) throws -> Bool) throws {
        let snapshot = try readSnapshot()
        try snapshot.forEachByID { leaf, i in
            let record = try DocumentRecord(decoding: leaf.value(i), path: snapshot.path)
            let id = String(decoding: leaf.key(i), as: UTF8.self)
            guard let doc = try snapshot.document(id: id, record: record, revision: nil) else { return true }
            return try body(doc, record.tree.conflictingRevisions.count)
        }
    }

    /// Calls `body` with every node of the by-ID tree (or the by-sequence tree), parents first.
    ///
    /// - Throws: ``SofaError`` — `.corruption` at the first node that does not read.
    package func forEachNode(bySequence: Bool, _ body: (NodeSummary) throws -> Void) throws {
        let snapshot = try readSnapshot()
        try (bySequence ? snapshot.bySequence : snapshot.byID).forEachNode(body)
    }

    /// The newest commit's log records (FORMAT.md §10.1.7), newest first: empty when the trees hold every
    /// document.
    ///
    /// - Throws: ``SofaError`` — `.corruption` when a record of the chain does not read.
    package func logRecords() throws -> [LogRecordSummary] {
        try checkOpen()
        let storage = documents.storage
        let commit = storage.latestCommit  // the newest commit, read once: its metadata and its chain agree
        let metadata = try DocumentFile.metadata(in: commit, path: storage.path)
        guard metadata.logHead != 0 else { return [] }
        return try PendingChanges.records(head: metadata.logHead, length: metadata.logLength, commit: commit,
                                          storage: storage).map {
            LogRecordSummary(offset: $0.offset, previous: $0.previous, entries: $0.entries.count,
                             storedBytes: $0.storedBytes, firstID: $0.entries.first?.id ?? [],
                             lastID: $0.entries.last?.id ?? [])
        }
    }

    /// The document file's commits, newest first (at most `limit`), each with the last sequence it recorded
    /// (nil when its metadata does not decode).
    ///
    /// - Throws: ``SofaError`` — `.corruption` when a header in the chain does not read.
    package func commitHistory(limit: Int? = nil) throws -> [(header: CommitHeader, lastSequence: UInt64?)] {
        let snapshot = try readSnapshot()
        return try snapshot.storage.commitHistory(limit: limit).map {
            ($0, try? DocumentFile.lastSequence(in: $0, path: snapshot.path))
        }
    }
}

/// One record of the document file's commit log, for `sofa dump --tree` (FORMAT.md §10.1.7).
package struct LogRecordSummary: Sendable {
    /// The record's value chunk.
    package var offset: UInt64
    /// The previous record's offset, 0 for the chain's first.
    package var previous: UInt64
    /// Documents the record changes.
    package var entries: Int
    /// Bytes of the chunk in the file, prefix included.
    package var storedBytes: Int
    /// The smallest document ID it changes.
    package var firstID: [UInt8]
    /// The largest document ID it changes.
    package var lastID: [UInt8]
}
