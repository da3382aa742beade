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
        try db.inBatch { for i in stride(from: 0, to: 200, by: 2) { try db.put(Self.body(i), id: "doc-\(1000 + i)") } }
        // Pending: new documents between and after the tree's, updates, a deletion and a conflict.
        for i in stride(from: 1, to: 40, by: 6) { try db.put(Self.body(i), id: "doc-\(1000 + i)") }
        try db.put(Self.body(999), id: "zzz")
        try db.put(Self.body(998), id: "aaa")
        try db.put(["v": 2], id: "doc-1010", rev: db.document(id: "doc-1010")!.revisionID)
        try db.delete(id: "doc-1020", rev: db.document(id: "doc-1020")!.revisionID)
        try db.forceInsert(["branch": true], id: "doc-1030", revisionHistory: ["2-ab", db.document(id: "doc-1030")!.revisionID])
        #expect(try db.readSnapshot().pending.entries.count == 12)

        func everyAnswer() throws -> [String] {
            var out: [String] = []
            for mode in [AllDocsMode.allDocs, .includeDeleted, .showConflicts, .onlyConflicts, .bySequence] {
                for descending in [false, true] {
                    var q = db.createAllDocumentsQuery()
                    q.allDocsMode = mode
                    q.descending = descending
                    out.append("\(mode) \(descending): " + (try q.run().rows.map { "\($0.key)=\($0.documentID ?? "")" }.joined(separator: ",")))
                    q.skip = 3
                    q.limit = 7
                    if mode == .bySequence {
                        q.startKey = descending ? 150 : 20
                        q.endKey = descending ? 20 : 150
                    } else {
                        q.startKey = descending ? "doc-1100" : "doc-1003"
                        q.endKey = descending ? "doc-1003" : "doc-1100"
                    }
                    out.append("range \(mode) \(descending): " + (try q.run().rows.map { "\($0.documentID ?? "")" }.joined(separator: ",")))
                    var k = db.createAllDocumentsQuery()
                    k.allDocsMode = mode
                    k.keys = mode == .bySequence ? [5, 101, 104, 108, 300] : ["aaa", "doc-1007", "doc-1020", "nope", "doc-1030"]
                    out.append("keys \(mode): " + (try k.run().rows.map { "\($0.documentID ?? "")\($0.conflictingRevisions)" }.joined(separator: ",")))
                }
            }
            out.append("changes: " + (try db.changes(since: 90, limit: 20).map { "\($0.sequence):\($0.documentID)" }.joined(separator: ",")))
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

    /// Compaction writes the pending changes into the new file's trees; the compacted file has no log.
    @Test func compactionFoldsTheLog() throws {
        let dir = TemporaryDatabaseDirectory()
        var db = try Database(path: dir.database(), options: testOptions())
        try db.inBatch { for i in 0..<100 { try db.put(Self.body(i), id: "doc-\(1000 + i)") } }
        for i in 0..<10 { try db.put(Self.body(500 + i), id: "doc-\(1000 + i * 3)", rev: db.document(id: "doc-\(1000 + i * 3)")!.revisionID) }
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

    /// A read-only open reads the chain; a damaged log record is reported by opening and by verify, naming it.
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
}
