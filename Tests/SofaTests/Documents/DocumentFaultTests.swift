#if canImport(Glibc)
import Glibc
#endif
import Testing

@testable import Sofa
@testable import SofaStorage

/// Crash-ish tests: a batch whose commit fails at every write and sync (RELIABILITY.md R2, R7, R8) leaves the
/// previous content intact, or commits entirely; the database opens, verifies and takes writes afterwards.
@Suite struct DocumentFaultTests {
    /// What every document holds, by ID: winner revision and body.
    static func contents(_ db: Database) throws -> [String: String] {
        var out: [String: String] = [:]
        var query = db.createAllDocumentsQuery()
        query.allDocsMode = .includeDeleted
        for row in try query.run() {
            out[row.documentID!] = "\(row.value!) \(row.document?.userProperties.description ?? "?")"
        }
        return out
    }

    static func makeBase(_ path: String) throws -> [String: String] {
        let db = try Database(path: path, options: testOptions())
        for i in 0..<40 { try db.put(["n": .number(Double(i))], id: "doc\(i)") }
        let doc = try #require(try db.document(id: "doc1"))
        try db.delete(id: "doc1", rev: doc.revisionID)
        let before = try contents(db)
        try db.close()
        return before
    }

    /// The base database at a fresh path, opened through a fault-injecting layer with `fault` armed.
    static func openFaulty(_ dir: TemporaryDatabaseDirectory, durability: Durability,
                           fault: FaultInjectingSystemCalls.Fault) throws
        -> (path: String, before: [String: String], db: Database) {
        let (path, before, db, faults) = try baseOverFaults(dir, durability: durability)
        faults.arm(fault)
        return (path, before, db)
    }

    /// The base database made at `dir`'s database `name`, its contents, and the database opened again through a
    /// fault-injecting layer (nothing armed).
    static func baseOverFaults(_ dir: TemporaryDatabaseDirectory, name: String = "test",
                               durability: Durability = .full) throws
        -> (path: String, before: [String: String], db: Database, faults: FaultInjectingSystemCalls) {
        let path = dir.database(name)
        let before = try makeBase(path)
        let faults = FaultInjectingSystemCalls()
        let db = try Database(path: path, options: DatabaseOptions(durability: durability), system: faults)
        return (path, before, db, faults)
    }

    /// The batch under test: updates, new documents, a large body (a value chunk) and a conflict.
    static func batch(_ db: Database) throws {
        try db.inBatch {
            for i in 2..<30 {
                let doc = try #require(try db.document(id: "doc\(i)"))
                try db.put(["n": .number(Double(i * 10))], id: doc.id, rev: doc.revisionID)
            }
            for i in 0..<20 { try db.put(["new": .number(Double(i))], id: "new\(i)") }
            try db.put(["big": .string(String(repeating: "y", count: 100_000))], id: "big")
            try db.forceInsert(["theirs": true], id: "doc5", revisionHistory: ["1-theirs"])
        }
    }

    /// Runs `write` (whose commit may meet an injected failure at crash point `point`); returns whether it
    /// committed. A failure must be an I/O error or a refusal, and the handle still serves `before` to readers.
    static func commits(_ db: Database, before: [String: String], point: Int,
                        _ write: () throws -> Void) throws -> Bool {
        do {
            try write()
            return true
        } catch let error as SofaError {
            #expect([.ioError, .writesRefused].contains(error.code), "point \(point): \(error)")
            #expect(try contents(db) == before, "point \(point): readers keep the previous commit")
            return false
        }
    }

    @Test func commitFailingAtEveryWriteAndSyncIsAllOrNothing() throws {
        let dir = TemporaryDatabaseDirectory()
        var after: [String: String]?
        var failures = 0
        for point in 0..<12 {
            let (path, before, db, faults) = try Self.baseOverFaults(dir, name: "crash\(point)")
            faults.crashAfter(writesAndSyncs: point)
            let committed = try Self.commits(db, before: before, point: point) { try Self.batch(db) }
            if !committed { failures += 1 }
            faults.arm(nil)
            try? db.close()

            let reopened = try Database(path: path, options: testOptions())
            let now = try Self.contents(reopened)
            if committed {
                after = after ?? now
                #expect(now == after, "point \(point): a returned commit is all there")
            } else {
                #expect(now == before || now.count == before.count + 21, "point \(point): all or nothing")
                if now != before { #expect(now == (after ?? now), "point \(point)") }
            }
            expectSound(reopened, "point \(point)")
            try reopened.put(["later": true], id: "later")
            #expect(try reopened.document(id: "later") != nil)
            try reopened.close()
        }
        #expect(failures >= 3 && after != nil, "the loop reached both failing and succeeding commits")
    }

    /// The same for a commit small enough to be a log record on top of the base's chain (FORMAT.md §10.1.7):
    /// whatever write or sync fails, the reopened database holds the chain before it or the chain with it.
    @Test func logRecordCommitFailingAtEveryWriteAndSyncIsAllOrNothing() throws {
        let dir = TemporaryDatabaseDirectory()
        var failures = 0, successes = 0
        for point in 0..<6 {
            let (path, before, db, faults) = try Self.baseOverFaults(dir, name: "log\(point)")
            let chain = try db.readSnapshot().pending.length
            #expect(chain > 0, "the base is made of single-document commits")
            faults.crashAfter(writesAndSyncs: point)
            let committed = try Self.commits(db, before: before, point: point) {
                try db.inBatch {
                    let doc = try #require(try db.document(id: "doc3"))
                    try db.put(["n": 333], id: "doc3", rev: doc.revisionID)
                    try db.put(["new": 1], id: "small1")
                    try db.put(["new": 2], id: "small2")
                }
            }
            faults.arm(nil)
            try? db.close()
            let reopened = try Database(path: path, options: testOptions())
            let now = try Self.contents(reopened)
            let pending = try reopened.readSnapshot().pending.length
            if committed || now != before {
                successes += 1
                #expect(now.count == before.count + 2 && now["doc3"]?.contains("333") == true, "point \(point)")
                #expect(pending == chain + 1, "point \(point): one more record")
            } else {
                failures += 1
                #expect(pending == chain, "point \(point): the chain before it")
            }
            expectSound(reopened, "point \(point)")
            try reopened.put(["later": true], id: "later")
            #expect(try reopened.document(id: "later") != nil)
            try reopened.close()
        }
        #expect(failures >= 1 && successes >= 1, "the loop reached both failing and succeeding commits")
    }

    /// The same for a pipelined batch (chunks applied and synced early on the flush thread, FORMAT.md §11
    /// "early syncs"): whichever write or sync fails — a chunk's, a zero tail's, an early sync on its own thread,
    /// the commit's — the reopened database holds the base or the whole batch.
    @Test func pipelinedBatchFailingAtEveryWriteAndSyncIsAllOrNothing() throws {
        let dir = TemporaryDatabaseDirectory()
        let count = 4 * WriteBatch.pipelineChunk + 10
        var failures = 0, successes = 0
        var after: [String: String]?
        for point in 0..<20 {
            let (path, before, db, faults) = try Self.baseOverFaults(dir, name: "pipelined\(point)")
            faults.crashAfter(writesAndSyncs: point)
            var random = SeededRandom(seed: 29)
            let committed = try Self.commits(db, before: before, point: point) {
                try db.inBatch {
                    // IDs above the base's ("doc…"): the batch is pipelined.
                    for i in 1...count {
                        try db.put(PipelinedBatchTests.body(i, size: 300, random: &random), id: "pipe\(100_000 + i)")
                    }
                    #expect(try #require(db.documents.batch).chunksHandedOff == 4, "point \(point)")
                }
            }
            faults.arm(nil)
            try? db.close()
            let reopened = try Database(path: path, options: testOptions())
            let now = try Self.contents(reopened)
            if committed || now != before {
                // The whole batch over the untouched base, and the same every time.
                successes += 1
                #expect(now.count == before.count + count, "point \(point): the whole batch")
                #expect(before.allSatisfy { now[$0.key] == $0.value }, "point \(point): the base untouched")
                after = after ?? now
                #expect(now == after, "point \(point): the same batch as at the first success")
            } else {
                failures += 1  // `now == before`: nothing of the batch
            }
            expectSound(reopened, "point \(point)")
            try reopened.put(["later": true], id: "later")
            try reopened.close()
        }
        #expect(failures >= 5 && successes >= 1,
                "the loop reached both failing and succeeding commits (\(failures), \(successes))")
    }

    @Test func failedSyncRefusesWritesUntilReopened() throws {
        let dir = TemporaryDatabaseDirectory()
        let (path, before, db) = try Self.openFaulty(dir, durability: .full, fault: .init(call: .fdatasync, nth: 1))
        expectSofaError(.ioError) { try Self.batch(db) }
        expectSofaError(.writesRefused) { try db.put(["a": 1], id: "after") }
        #expect(try Self.contents(db) == before)
        try db.close()
        let reopened = try Database(path: path, options: testOptions())
        #expect(try Self.contents(reopened) == before)
        try Self.batch(reopened)
        #expect(reopened.documentCount == 39 + 21)
        expectSound(reopened)
    }

    @Test func aBatchThatMetAStorageErrorCannotCommitEvenIfTheErrorWasCaught() throws {
        let dir = TemporaryDatabaseDirectory()
        let (_, before, db) = try Self.openFaulty(dir, durability: .none,
                                                  fault: .init(call: .pwrite, nth: 1, errno: ENOSPC))
        // Incompressible, and larger than the storage layer's 1 MiB write buffer, so appending it writes.
        var random = SeededRandom(seed: 3)
        let letters = (0..<(3 << 19)).map { _ in UInt8(ascii: "a") + UInt8(random.next() % 26) }
        let huge: JSON = ["huge": .string(String(decoding: letters, as: UTF8.self))]
        expectSofaError(.diskFull) {
            try db.inBatch {
                try db.put(["n": 1], id: "first")
                expectSofaError(.diskFull) { try db.put(huge, id: "huge") }
                try db.put(["n": 2], id: "after")  // the caller went on; the commit must still refuse
            }
        }
        #expect(try Self.contents(db) == before)
        try db.put(huge, id: "huge")
        #expect(db.documentCount == 40)
        expectSound(db)
    }

    @Test func diskFullDuringABatchKeepsTheHandleUsable() throws {
        let dir = TemporaryDatabaseDirectory()
        let (_, before, db) = try Self.openFaulty(dir, durability: .none,
                                                  fault: .init(call: .pwrite, nth: 1, errno: ENOSPC))
        expectSofaError(.diskFull) { try Self.batch(db) }
        #expect(try Self.contents(db) == before)
        // Space is back: the same handle commits.
        try Self.batch(db)
        #expect(db.documentCount == 39 + 21)
        #expect(try db.document(id: "doc5")?.conflictingRevisions.count == 1)
        expectSound(db)
    }
}
