#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization
import Testing

@testable import Sofa
@testable import SofaStorage

/// `Database.compact()`: every document, tombstone, conflict and large body survives; the file shrinks; readers
/// holding a snapshot keep reading it; later writes go to the new file; a failed rename (fault injection through
/// the `SystemCalls` seam) leaves the original intact and no temporary file; leftovers go on the next open.
@Suite struct CompactionTests {
    /// A database with updates, a deletion, a conflict and bodies stored as chunks of their own.
    static func populate(_ db: Database) throws {
        let large = String(repeating: "lorem ipsum ", count: 200)
        for round in 0..<5 {
            try db.inBatch {
                for i in 0..<200 {
                    let id = "doc\(i)"
                    let rev = try db.document(id: id)?.revisionID
                    var body: JSON = ["n": .number(Double(i)), "round": .number(Double(round))]
                    if i % 50 == 0 { body = ["text": .string(large), "round": .number(Double(round))] }
                    try db.put(body, id: id, rev: rev)
                }
            }
        }
        let doc = try #require(try db.document(id: "doc7"))
        try db.delete(id: "doc7", rev: doc.revisionID)
        try db.forceInsert(["theirs": true], id: "doc8", revisionHistory: ["2-bb", "1-aa"])
    }

    static func fileSize(_ path: String) -> UInt64 {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.uint64Value ?? 0
    }

    @Test func compactionKeepsEveryDocumentAndShrinksTheFile() throws {
        let dir = TemporaryDatabaseDirectory("sofa-compact")
        let path = dir.database()
        let db = try Database(path: path, options: testOptions())
        try Self.populate(db)
        let before = try DocumentFaultTests.contents(db)
        let changesBefore = try db.changes()
        let conflicts = try #require(try db.document(id: "doc8")).conflictingRevisions
        let oldSnapshot = try db.readSnapshot()

        let result = try db.compact()
        #expect(result.sizeAfter < result.sizeBefore / 2, "\(result)")
        // The file ends at the new commit, or after it with a zero tail of at most a preallocation step and a
        // block (FORMAT.md §2, §11).
        let fileSize = Self.fileSize(path + "/docs")
        #expect(result.sizeAfter <= fileSize && fileSize - result.sizeAfter <= StorageFile.preallocationStep + 4096)
        #expect(result.documents == 200 && result.lastSequence == db.lastSequence)
        #expect(try DocumentFaultTests.contents(db) == before)
        #expect(try db.changes() == changesBefore)
        #expect(try #require(try db.document(id: "doc8")).conflictingRevisions == conflicts)
        #expect(!FileManager.default.fileExists(atPath: path + "/docs.compact"))
        expectSound(db, "after compaction")

        // A snapshot taken before still reads the old file's mapping.
        #expect(try oldSnapshot.document(id: "doc0")?.userProperties["round"] == 4)

        // Writes after compaction land in the new file and survive a reopen.
        try db.put(["after": true], id: "late")
        try db.close()
        let reopened = try Database(path: path, options: testOptions())
        var expected = before
        expected["late"] = try DocumentFaultTests.contents(reopened)["late"]
        #expect(try DocumentFaultTests.contents(reopened) == expected)
        #expect(try reopened.document(id: "late")?.userProperties == ["after": true])
        expectSound(reopened, "reopened")
        try reopened.close()
    }

    @Test func readersOnOtherThreadsKeepReadingDuringCompaction() throws {
        let dir = TemporaryDatabaseDirectory("sofa-compact")
        let db = try Database(path: dir.database(), options: testOptions())
        try Self.populate(db)
        let expected = try DocumentFaultTests.contents(db)
        let failures = Mutex<[String]>([])
        let stop = Atomic(false)
        var readers: [Thread] = []
        for r in 0..<3 {
            let thread = Thread {
                var rounds = 0
                while !stop.load(ordering: .acquiring) || rounds == 0 {
                    rounds += 1
                    do {
                        let seen = try DocumentFaultTests.contents(db)
                        if seen != expected { failures.withLock { $0.append("reader \(r): contents differ") } }
                    } catch {
                        failures.withLock { $0.append("reader \(r): \(error)") }
                    }
                }
            }
            readers.append(thread)
            thread.start()
        }
        for _ in 0..<5 { try db.compact() }
        stop.store(true, ordering: .releasing)
        while readers.contains(where: { !$0.isFinished }) { usleep(1000) }
        #expect(failures.withLock { $0 } == [])
        expectSound(db)
        try db.close()
    }

    @Test func viewsKeepWorkingAcrossCompaction() throws {
        let dir = TemporaryDatabaseDirectory("sofa-compact")
        let db = try Database(path: dir.database(), options: testOptions())
        try Self.populate(db)
        let view = db.view(named: "byRound")
        view.setMapReduce(version: "1", map: { doc, emit in emit(doc["round"] ?? nil, 1) }, reduce: .count)
        var query = view.createQuery()
        query.groupLevel = 1
        let before = try query.run().map { "\($0.key) \($0.value ?? nil)" }
        try db.compact()
        #expect(try query.run().map { "\($0.key) \($0.value ?? nil)" } == before)
        // The index resumes from its last indexed sequence, which compaction keeps.
        try db.put(["round": 9], id: "late")
        let after = try query.run().map { "\($0.key) \($0.value ?? nil)" }
        #expect(after == before + ["9 1"], "\(before) → \(after)")
        expectSound(db)
        try db.close()
    }

    /// The replaced file is released (its descriptor closed, its node cache freed) once no snapshot holds it:
    /// nothing the database keeps for its readers points at it after compaction.
    @Test func compactionReleasesTheOldFile() throws {
        let dir = TemporaryDatabaseDirectory("sofa-compact-release")
        let db = try Database(path: dir.database(), options: testOptions())
        try Self.populate(db)
        weak var old: StorageFile?
        try {
            old = db.documents.storage
            _ = try db.document(id: "doc1")  // a read keeps the newest commit's snapshot
            let snapshot = try db.readSnapshot()
            _ = try db.compact()
            #expect(old != nil, "a snapshot taken before compaction keeps the old file")
            _ = snapshot
        }()
        _ = try db.document(id: "doc1")
        #expect(old == nil, "the old file outlived every snapshot of it")
        try db.close()
    }

    /// A database released without `close()` lets go of its file (descriptor and lock) after reads.
    @Test func releasedDatabaseCanBeReopened() throws {
        let dir = TemporaryDatabaseDirectory("sofa-release")
        let path = dir.database()
        try {
            let db = try Database(path: path, options: testOptions())
            try db.put(["a": 1], id: "x")
            #expect(try db.document(id: "x") != nil)
        }()
        let again = try Database(path: path, options: testOptions())
        #expect(try again.document(id: "x") != nil)
        try again.close()
    }

    @Test func compactingAnEmptyDatabaseWorks() throws {
        let dir = TemporaryDatabaseDirectory("sofa-compact")
        let db = try Database(path: dir.database(), options: testOptions())
        let result = try db.compact()
        #expect(result.documents == 0 && result.lastSequence == 0)
        try db.put(["a": 1], id: "a")
        #expect(db.documentCount == 1)
        expectSound(db)
        try db.close()
    }

    @Test func failedRenameKeepsTheOriginalAndLeavesNoTemporaryFile() throws {
        for call in [FaultInjectingSystemCalls.Call.rename, .fdatasync, .pwrite] {
            let dir = TemporaryDatabaseDirectory("sofa-compact")
            let path = dir.database()
            let setup = try Database(path: path, options: testOptions())
            try Self.populate(setup)
            let before = try DocumentFaultTests.contents(setup)
            try setup.close()
            let sizeBefore = Self.fileSize(path + "/docs")

            let faults = FaultInjectingSystemCalls()
            let db = try Database(path: path, options: testOptions(), system: faults)
            faults.arm(.init(call: call, nth: 1))
            expectSofaError(.ioError, "\(call)") { try db.compact() }
            faults.arm(nil)
            #expect(!FileManager.default.fileExists(atPath: path + "/docs.compact"), "\(call)")
            #expect(Self.fileSize(path + "/docs") == sizeBefore, "\(call)")
            #expect(try DocumentFaultTests.contents(db) == before, "\(call)")
            // The database still works, and a later compaction succeeds.
            try db.put(["x": 1], id: "after-fault")
            try db.compact()
            expectSound(db, "\(call)")
            try db.close()
        }
    }

    @Test func failedReopenAfterTheRenameRefusesWritesUntilReopened() throws {
        let dir = TemporaryDatabaseDirectory("sofa-compact")
        let path = dir.database()
        let faults = FaultInjectingSystemCalls()
        let db = try Database(path: path, options: testOptions(), system: faults)
        try Self.populate(db)
        let before = try DocumentFaultTests.contents(db)
        // Opens during compaction: the temporary file (not there yet), its `.creating` stage, the directory
        // (synced after writing it and again after renaming it into place), the created file, the directory
        // after the compaction's rename, then the renamed file — the one that fails.
        faults.arm(.init(call: .open, nth: 7))
        expectSofaError(.writesRefused) { try db.compact() }
        #expect(faults.failuresInjected == 1)
        faults.arm(nil)
        #expect(throws: SofaError.self) { try db.put(["lost": true], id: "never") }
        try? db.close()

        let reopened = try Database(path: path, options: testOptions())
        #expect(try DocumentFaultTests.contents(reopened) == before)
        #expect(!FileManager.default.fileExists(atPath: path + "/docs.compact"))
        expectSound(reopened)
        try reopened.close()
    }

    @Test func leftoverTemporaryFileIsRemovedOnWritableOpenOnly() throws {
        let dir = TemporaryDatabaseDirectory("sofa-compact")
        let path = dir.database()
        let db = try Database(path: path, options: testOptions())
        try db.put(["a": 1], id: "a")
        try db.close()
        let writer = try openRemovingLeftover(path + "/docs.compact", database: path)
        #expect(writer.documentCount == 1)
        expectSound(writer)
        try writer.close()
    }

    @Test func compactRefusesReadOnlyAndInsideABatch() throws {
        let dir = TemporaryDatabaseDirectory("sofa-compact")
        let path = dir.database()
        let db = try Database(path: path, options: testOptions())
        try db.put(["a": 1], id: "a")
        expectSofaError(.invalidArgument) { try db.inBatch { try db.compact() } }
        try db.close()
        let reader = try Database(path: path, options: testOptions(readOnly: true))
        expectSofaError(.readOnly) { try reader.compact() }
        try reader.close()
    }
}
