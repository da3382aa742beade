import Glibc
import Testing

@testable import Sofa
@testable import SofaStorage

/// The document file's commit log (FORMAT.md §10.1.7): small commits add log records instead of rewriting the
/// trees; readers see the trees with the pending changes on top; the chain is folded into the trees at its
/// bounds or by a larger commit, and read back on opening.
@Suite struct CommitLogTests {
    static func body(_ i: Int) -> JSON {
        ["title": .string("Track \(i)"), "genre": "Jazz", "duration": .number(Double(i))]
    }

    /// Roots of both trees of the newest commit (offsets), to tell whether a commit rewrote them.
    static func roots(_ db: Database) throws -> [UInt64?] {
        let snapshot = try db.readSnapshot()
        return [snapshot.byID.root?.offset, snapshot.bySequence.root?.offset]
    }

    @Test func smallCommitsAddLogRecordsAndLargerOnesFoldThem() throws {
        let dir = TemporaryDatabaseDirectory()
        var db = try Database(path: dir.database(), options: testOptions())
        try db.inBatch { for i in 0..<100 { try db.put(Self.body(i), id: "doc-\(1000 + i)") } }
        let treeRoots = try Self.roots(db)
        #expect(try db.readSnapshot().pending.isEmpty)

        // One put: a log record; the trees stay as they were.
        let first = try db.put(["changed": true], id: "doc-1005", rev: db.document(id: "doc-1005")!.revisionID)
        try db.put(Self.body(100), id: "doc-1100")
        try db.delete(id: "doc-1007", rev: db.document(id: "doc-1007")!.revisionID)
        var pending = try db.readSnapshot().pending
        #expect(try Self.roots(db) == treeRoots)
        #expect(pending.length == 3 && pending.entries.count == 3)
        #expect(pending.entries.map { String(decoding: $0.id, as: UTF8.self) } == ["doc-1005", "doc-1007", "doc-1100"])
        #expect(pending.entries[0].storedSequence == 6 && pending.entries[2].storedSequence == nil)
        #expect(try db.document(id: "doc-1005")?.revisionID == first.revisionID)
        #expect(try db.document(id: "doc-1100")?.userProperties == Self.body(100))
        #expect(try db.document(id: "doc-1007")?.isDeleted ?? true)
        #expect(db.documentCount == 100 && db.deletedDocumentCount == 1 && db.lastSequence == 103)
        // The changes feed: each document once, at its newest sequence.
        let changes = try db.changes(since: 0)
        #expect(changes.count == 101)
        #expect(changes.suffix(3).map(\.documentID) == ["doc-1005", "doc-1100", "doc-1007"])
        #expect(changes.suffix(3).map(\.sequence) == [101, 102, 103])
        expectSound(db)

        // A batch of up to deltaLimit documents is one more record; a document changed again replaces its entry.
        try db.inBatch {
            for i in 0..<PendingChanges.deltaLimit {
                try db.put(Self.body(200 + i), id: "new-\(i)")
            }
        }
        try db.put(["again": true], id: "doc-1005", rev: first.revisionID)
        pending = try db.readSnapshot().pending
        #expect(pending.length == 5 && pending.entries.count == 3 + PendingChanges.deltaLimit)
        #expect(pending.entries.first { $0.id == Array("doc-1005".utf8) }?.storedSequence == 6)
        #expect(try Self.roots(db) == treeRoots)

        // Reopening reads the chain back.
        try db.close()
        db = try Database(path: dir.database(), options: testOptions())
        let reread = try db.readSnapshot().pending
        #expect(reread.length == pending.length && reread.head == pending.head)
        #expect(reread.entries.map(\.id) == pending.entries.map(\.id))
        #expect(reread.entries.map(\.record) == pending.entries.map(\.record))
        #expect(try db.document(id: "doc-1005")?.userProperties == ["again": true])
        #expect(db.documentCount == 100 + PendingChanges.deltaLimit)
        expectSound(db)

        // A larger batch rewrites the trees with every pending change: the log is empty again.
        try db.inBatch { for i in 0...PendingChanges.deltaLimit { try db.put(Self.body(300 + i), id: "big-\(i)") } }
        #expect(try db.readSnapshot().pending.isEmpty)
        #expect(try Self.roots(db) != treeRoots)
        #expect(try db.document(id: "doc-1005")?.userProperties == ["again": true])
        #expect(try db.changes(since: 0).count == 101 + 2 * PendingChanges.deltaLimit + 1)
        #expect(db.documentCount == 101 + 2 * PendingChanges.deltaLimit)
        expectSound(db)
    }

    /// The chain is folded by the commit that would make it longer than its bounds, and never holds more.
    @Test func chainsAreFoldedAtTheirBounds() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions())
        try db.inBatch { for i in 0..<50 { try db.put(Self.body(i), id: "doc-\(1000 + i)") } }
        var folds = 0, longest = 0
        for i in 0..<(PendingChanges.maximumLength * 2 + 10) {
            try db.put(Self.body(i), id: "single-\(i)")
            let pending = try db.readSnapshot().pending
            if pending.isEmpty { folds += 1 }
            longest = max(longest, pending.length)
            #expect(pending.length <= PendingChanges.maximumLength)
        }
        #expect(folds == 2 && longest == PendingChanges.maximumLength)
        // Bodies near the inline limit fill the byte bound first.
        let large = JSON.object(["text": .string(String(repeating: "x", count: 1000))])
        folds = 0
        for i in 0..<300 {
            try db.put(large, id: "large-\(i)")
            let pending = try db.readSnapshot().pending
            #expect(pending.bytes <= PendingChanges.maximumBytes)
            if pending.isEmpty { folds += 1 }
        }
        #expect(folds >= 2)
        #expect(db.documentCount == 50 + PendingChanges.maximumLength * 2 + 10 + 300)
        expectSound(db)
    }

    /// All-documents queries, by ID and by sequence, ascending and descending, with ranges, keys, skip and
    /// limit, give the same rows with pending changes as after they are folded into the trees.
    @Test func queriesReadThroughPendingChanges() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions())
        // Enough documents for many leaves, so that pending changes cut spans of several of them.
        try db.inBatch { for i in stride(from: 0, to: 4000, by: 2) { try db.put(Self.body(i), id: "doc-\(1000 + i)") } }
        // Pending: new documents between and after the tree's, updates, a deletion and a conflict.
        for i in stride(from: 1, to: 40, by: 6) + [1501, 2999, 3999] { try db.put(Self.body(i), id: "doc-\(1000 + i)") }
        try db.put(Self.body(999), id: "zzz")
        try db.put(Self.body(998), id: "aaa")
        try db.put(["v": 2], id: "doc-1010", rev: db.document(id: "doc-1010")!.revisionID)
        try db.delete(id: "doc-1020", rev: db.document(id: "doc-1020")!.revisionID)
        let base = try #require(try db.document(id: "doc-1030")).revisionID
        try db.forceInsert(["branch": true], id: "doc-1030", revisionHistory: ["2-ab", base])
        #expect(try db.readSnapshot().pending.entries.count == 15)
        #expect(try db.readSnapshot().byID.verify().statistics.leafNodes > 5)

        func everyAnswer() throws -> [String] {
            var out: [String] = []
            for mode in [AllDocsMode.allDocs, .includeDeleted, .showConflicts, .onlyConflicts, .bySequence] {
                for descending in [false, true] {
                    var q = db.createAllDocumentsQuery()
                    q.allDocsMode = mode
                    q.descending = descending
                    let all = try q.run().rows.map { "\($0.key)=\($0.documentID ?? "")" }
                    out.append("\(mode) \(descending): " + all.joined(separator: ","))
                    q.skip = 3
                    q.limit = 7
                    if mode == .bySequence {
                        q.startKey = descending ? 150 : 20
                        q.endKey = descending ? 20 : 150
                    } else {
                        q.startKey = descending ? "doc-1100" : "doc-1003"
                        q.endKey = descending ? "doc-1003" : "doc-1100"
                    }
                    let range = try q.run().rows.map { $0.documentID ?? "" }
                    out.append("range \(mode) \(descending): " + range.joined(separator: ","))
                    var k = db.createAllDocumentsQuery()
                    k.allDocsMode = mode
                    k.keys = mode == .bySequence ? [5, 101, 104, 108, 300]
                        : ["aaa", "doc-1007", "doc-1020", "nope", "doc-1030"]
                    let keyed = try k.run().rows.map { "\($0.documentID ?? "")\($0.conflictingRevisions)" }
                    out.append("keys \(mode): " + keyed.joined(separator: ","))
                }
            }
            let changes = try db.changes(since: 90, limit: 20).map { "\($0.sequence):\($0.documentID)" }
            out.append("changes: " + changes.joined(separator: ","))
            out.append("counts: \(db.documentCount) \(db.deletedDocumentCount)")
            return out
        }
        let throughLog = try everyAnswer()
        expectSound(db)
        // Compaction folds the pending changes into the new file's trees and changes nothing a query reads.
        _ = try db.compact()
        #expect(try db.readSnapshot().pending.isEmpty)
        let folded = try everyAnswer()
        #expect(throughLog.count == folded.count)
        for (a, b) in zip(throughLog, folded) { #expect(a == b) }
        expectSound(db)
    }

    /// A pipelined batch (chunks applied on the flush thread) writes the pending changes into the trees with its
    /// first chunk; reads inside the batch see them before, during and after.
    @Test func aPipelinedBatchFoldsTheLogWithItsFirstChunk() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions())
        try db.inBatch { for i in 0..<100 { try db.put(Self.body(i), id: "m-\(1000 + i)") } }
        for i in 0..<5 { try db.put(Self.body(i), id: "a-\(i)") }
        let updated = try db.put(["v": 2], id: "m-1050", rev: db.document(id: "m-1050")!.revisionID)
        #expect(try db.readSnapshot().pending.entries.count == 6)
        try db.inBatch {
            #expect(try db.document(id: "a-3")?.userProperties == Self.body(3))
            for i in 0..<(3 * WriteBatch.pipelineChunk + 10) {
                try db.put(Self.body(i), id: "z-\(10_000 + i)")
                if i == WriteBatch.pipelineChunk + 5 {
                    #expect(try db.document(id: "a-3")?.userProperties == Self.body(3))
                    #expect(try db.document(id: "m-1050")?.revisionID == updated.revisionID)
                }
            }
            #expect(db.documents.batch?.chunksHandedOff ?? 0 >= 2)
        }
        #expect(try db.readSnapshot().pending.isEmpty)
        #expect(try db.document(id: "a-4")?.userProperties == Self.body(4))
        #expect(try db.document(id: "m-1050")?.userProperties == ["v": 2])
        #expect(db.documentCount == 105 + 3 * WriteBatch.pipelineChunk + 10)
        #expect(try db.changes(since: 100).prefix(6).map(\.documentID) == ["a-0", "a-1", "a-2", "a-3", "a-4", "m-1050"])
        expectSound(db)
    }

    /// A batch appending IDs above the trees answers "absent" for an ID above its overlay with one comparison;
    /// the log's pending changes are looked up first, so a document the log holds is never taken for new — before
    /// a hand-off and with the log in the chunk in flight — and a fold writes log IDs that fall between the
    /// batch's own.
    @Test func aBatchAboveTheTreesStillSeesTheLog() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions())
        try db.inBatch { for i in 0..<50 { try db.put(Self.body(i), id: "a-\(1000 + i)") } }
        let logged = try db.put(["v": 5], id: "z-5")
        try db.put(["v": 3], id: "m-1003x")  // sorts between the batch's m- IDs
        try db.inBatch {
            for i in 0..<10 { try db.put(Self.body(i), id: "m-\(1000 + i)") }
            expectSofaError(.conflict) { try db.put(["new": true], id: "z-5") }
            for i in 10..<(WriteBatch.pipelineChunk + 20) { try db.put(Self.body(i), id: "m-\(1000 + i)") }
            #expect(db.documents.batch?.chunksHandedOff == 1)
            expectSofaError(.conflict) { try db.put(["new": true], id: "z-5") }
            expectSofaError(.conflict) { try db.put(["new": true], id: "m-1003x") }
        }
        #expect(try db.readSnapshot().pending.isEmpty)
        #expect(try db.document(id: "z-5")?.revisionID == logged.revisionID)
        #expect(try db.document(id: "m-1003x")?.userProperties == ["v": 3])
        #expect(db.documentCount == 52 + WriteBatch.pipelineChunk + 20)
        expectSound(db)
    }

    /// Compaction writes the pending changes into the new file's trees; the compacted file has no log.
    @Test func compactionFoldsTheLog() throws {
        let dir = TemporaryDatabaseDirectory()
        var db = try Database(path: dir.database(), options: testOptions())
        try db.inBatch { for i in 0..<100 { try db.put(Self.body(i), id: "doc-\(1000 + i)") } }
        for i in 0..<10 {
            let id = "doc-\(1000 + i * 3)"
            try db.put(Self.body(500 + i), id: id, rev: db.document(id: id)!.revisionID)
        }
        try db.put(Self.body(7), id: "extra")
        let before = try db.changes(since: 0).map { "\($0.sequence) \($0.documentID) \($0.revisionID)" }
        _ = try db.compact()
        #expect(try db.readSnapshot().pending.isEmpty)
        #expect(try db.changes(since: 0).map { "\($0.sequence) \($0.documentID) \($0.revisionID)" } == before)
        expectSound(db)
        try db.close()
        db = try Database(path: dir.database(), options: testOptions())
        #expect(try db.document(id: "doc-1027")?.userProperties == Self.body(509))
        #expect(db.documentCount == 101)
        expectSound(db)
    }

    /// A read-only open reads the chain; a damaged log record is reported by the first read and by verify,
    /// naming it.
    @Test func readOnlyOpeningAndDamagedRecords() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions())
        try db.inBatch { for i in 0..<20 { try db.put(Self.body(i), id: "doc-\(1000 + i)") } }
        try db.put(Self.body(42), id: "pending")
        let head = try db.readSnapshot().pending.head
        try db.close()
        let reader = try Database(path: dir.database(), options: testOptions(readOnly: true))
        #expect(try reader.document(id: "pending")?.userProperties == Self.body(42))
        #expect(reader.documentCount == 21)
        try reader.close()

        // Damage the first of two records: the newest commit's own data still checks, so opening keeps it, and
        // reading its chain meets the damaged record.
        let writer = try Database(path: dir.database(), options: testOptions())
        try writer.put(Self.body(43), id: "pending-2")
        #expect(try writer.readSnapshot().pending.length == 2)
        try writer.close()
        let fd = open(dir.database() + "/docs", O_RDWR)
        try #require(fd >= 0)
        defer { close(fd) }
        var byte: UInt8 = 0
        let at = off_t(head) + 20  // inside the payload, after the 16-byte chunk prefix
        #expect(pread(fd, &byte, 1, at) == 1)
        byte ^= 0x10
        #expect(pwrite(fd, &byte, 1, at) == 1)
        let damaged = try Database(path: dir.database(), options: testOptions(readOnly: true))
        defer { try? damaged.close() }
        let error = try #require(throws: SofaError.self) { _ = try damaged.document(id: "pending") }
        #expect(error.code == .corruption && error.offset == Int(head))
        #expect(try damaged.verify().contains { $0.code == .corruption })
    }

    /// A view's incremental update reads the changes through the log: an update of a document the trees hold
    /// (its tree sequence hidden), a deletion and a creation, each one commit; the index equals one rebuilt from
    /// scratch after every step.
    @Test func viewUpdatesReadThroughTheLog() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions())
        try db.inBatch { for i in 0..<40 { try db.put(["n": .number(Double(i))], id: "doc-\(1000 + i)") } }
        let view = db.view(named: "byN")
        view.setMapReduce(version: "1", map: { doc, emit in emit(doc["n"] ?? nil, nil) }, reduce: .count)
        func rows(_ v: View) throws -> [String] {
            var q = v.createQuery()
            q.mapOnly = true
            return try q.run().map { "\($0.key) \($0.documentID ?? "")" }
        }
        _ = try rows(view)
        let steps: [() throws -> Void] = [
            { try db.put(["n": 100], id: "doc-1003", rev: db.document(id: "doc-1003")!.revisionID) },
            { try db.delete(id: "doc-1007", rev: db.document(id: "doc-1007")!.revisionID) },
            { try db.put(["n": 200], id: "new") },
            { try db.put(["n": 300], id: "doc-1003", rev: db.document(id: "doc-1003")!.revisionID) },
        ]
        for (n, step) in steps.enumerated() {
            try step()
            #expect(try db.readSnapshot().pending.length == n + 1)
            let incremental = try rows(view)
            let fresh = db.view(named: "fresh\(n)")
            fresh.setMapReduce(version: "1", map: { doc, emit in emit(doc["n"] ?? nil, nil) }, reduce: .count)
            #expect(incremental == (try rows(fresh)), "step \(n)")
            expectSound(view, "step \(n)")
        }
        #expect(try rows(view).contains("300.0 doc-1003") || (try rows(view)).contains("300 doc-1003"))
        expectSound(db)
    }

    /// A read inside a batch flushes only the batch's own documents: with none yet, the trees stay as they are
    /// and the batch may still commit a log record.
    @Test func aReadInsideABatchLeavesTheLogAlone() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions())
        try db.inBatch { for i in 0..<40 { try db.put(Self.body(i), id: "doc-\(1000 + i)") } }
        try db.put(Self.body(40), id: "pending")
        let roots = try Self.roots(db)
        try db.inBatch {
            #expect(db.documentCount == 41)
            #expect(try db.changes(since: 40).map(\.documentID) == ["pending"])
            try db.put(Self.body(41), id: "more")
        }
        #expect(try Self.roots(db) == roots)
        #expect(try db.readSnapshot().pending.length == 2)
        expectSound(db)
    }

    /// All-documents queries and the changes feed where pending changes hide the trees' entries, with limits
    /// that stop inside the trees' part and inside the log's.
    @Test func hiddenSequencesAndLimitsAcrossTheLog() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions())
        try db.inBatch { for i in 0..<30 { try db.put(Self.body(i), id: "doc-\(1000 + i)") } }
        for i in [2, 5, 8, 20] {  // sequences 3, 6, 9 and 21 move to 31…34
            let id = "doc-\(1000 + i)"
            try db.put(["v": .number(Double(i))], id: id, rev: db.document(id: id)!.revisionID)
        }
        try db.put(Self.body(99), id: "zzz")
        func sequences(_ keys: [JSON]) throws -> [String] {
            var q = db.createAllDocumentsQuery()
            q.allDocsMode = .bySequence
            q.keys = keys
            return try q.run().map { $0.documentID ?? "" }
        }
        #expect(try sequences([3, 6, 31, 35, 36]) == ["doc-1002", "zzz"])
        #expect(try db.changes(since: 0, limit: 10).map(\.sequence) == [1, 2, 4, 5, 7, 8, 10, 11, 12, 13])
        #expect(try db.changes(since: 29, limit: 3).map(\.sequence) == [30, 31, 32])
        var descending = db.createAllDocumentsQuery()
        descending.allDocsMode = .bySequence
        descending.descending = true
        descending.skip = 2
        descending.limit = 6
        #expect(try descending.run().map(\.sequenceNumber) == [33, 32, 31, 30, 29, 28])
        var ascending = db.createAllDocumentsQuery()
        ascending.startKey = "doc-1028"
        ascending.limit = 3
        #expect(try ascending.run().map { $0.documentID ?? "" } == ["doc-1028", "doc-1029", "zzz"])
        expectSound(db)
    }

    /// Verify compares each pending change with the trees it sits on.
    @Test func verifyFindsALogThatDisagreesWithTheTrees() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions())
        try db.inBatch { for i in 0..<20 { try db.put(Self.body(i), id: "doc-\(1000 + i)") } }
        try db.put(["v": 2], id: "doc-1004", rev: db.document(id: "doc-1004")!.revisionID)
        expectSound(db)
        // Replace the trees under the log: doc-1004 now sits at another sequence there.
        let snapshot = try db.readSnapshot()
        var record = try #require(try snapshot.byID.get(Array("doc-1004".utf8)).map {
            try $0.withUnsafeBytes { try DocumentRecord(decoding: $0, path: "test") }
        })
        record.sequence = 19
        let byID = try snapshot.byID.forWriter.modified(by: [.put(Array("doc-1004".utf8), record.encoded())])
        try db.documents.storage.commit(roots: [byID.root, snapshot.bySequence.root],
                                        metadata: DocumentFile.encodeMetadata(lastSequence: snapshot.lastSequence,
                                                                              logHead: snapshot.pending.head,
                                                                              logLength: snapshot.pending.length))
        let messages = try db.verify().map(\.message).joined(separator: " | ")
        #expect(messages.contains("the log's change of \"doc-1004\" supersedes sequence 5"), "\(messages)")
    }

    /// A log record whose stored flags disagree with the trees (a damaged or crafted file) makes counts wrong,
    /// never a trap; verify says what is wrong.
    @Test func countsOfADisagreeingLogWrapInsteadOfTrapping() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions())
        // An empty database: no trees. The record claims to supersede a live document the trees lack.
        let tree = RevisionTree(first: RevisionID.derived(parent: nil, deleted: true, body: []), deleted: true,
                                body: .empty)
        let entry = LogEntry(id: Array("ghost".utf8), record: DocumentRecord(sequence: 1, tree: tree).encoded(),
                             sequence: 1, storedSequence: 0, storedFlags: 0)
        let payload = PendingChanges.encodeRecord([entry], previous: 0)
        let (offset, _) = try payload.withUnsafeBytes {
            try db.documents.storage.append(kind: .value, payload: $0, compress: false)
        }
        try db.documents.storage.commit(roots: [nil, nil], metadata: DocumentFile.encodeMetadata(
            lastSequence: 1, logHead: offset, logLength: 1))
        #expect(db.deletedDocumentCount == 1)
        #expect(db.documents.batch == nil)
        #expect(db.documentCount == Int.max, "live 0 − 1 wraps, and the count clamps")
        var all = db.createAllDocumentsQuery()
        all.allDocsMode = .includeDeleted
        #expect(try all.run().map { $0.documentID ?? "" } == ["ghost"])
        #expect(try db.verify().contains { $0.message.contains("the log's change of \"ghost\"") })
    }

    /// A chain whose records' sequences do not ascend, or whose header counts another length, is corrupt, and
    /// the first read says so.
    @Test func chainsOutOfOrderOrOfAnotherLengthAreCorrupt() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions())
        try db.put(Self.body(1), id: "a")
        try db.put(Self.body(2), id: "b")
        let snapshot = try db.readSnapshot()
        let storage = db.documents.storage
        // Another length than the chain has.
        try storage.commit(roots: [nil, nil], metadata: DocumentFile.encodeMetadata(
            lastSequence: 2, logHead: snapshot.pending.head, logLength: 3))
        let error = try #require(throws: SofaError.self) { _ = try db.document(id: "a") }
        #expect(error.code == .corruption && error.message.contains("has 2 records; its header says 3"))
        // A record whose sequence is not above the record before it.
        let stale = LogEntry(id: Array("c".utf8), record: snapshot.pending.entry(0).record, sequence: 1,
                             storedSequence: nil, storedFlags: 0)
        let payload = PendingChanges.encodeRecord([stale], previous: snapshot.pending.head)
        let (offset, _) = try payload.withUnsafeBytes { try storage.append(kind: .value, payload: $0, compress: false) }
        try storage.commit(roots: [nil, nil], metadata: DocumentFile.encodeMetadata(
            lastSequence: 3, logHead: offset, logLength: 3))
        let order = try #require(throws: SofaError.self) { _ = try db.document(id: "a") }
        #expect(order.code == .corruption && order.message.contains("not above 2"), "\(order)")
        #expect(try db.verify().contains { $0.code == .corruption })
    }
}
