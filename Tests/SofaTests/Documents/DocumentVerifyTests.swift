#if canImport(Glibc)
import Glibc
#endif
import Testing

@testable import Sofa
@testable import SofaStorage

/// `Database.verify()` finds what it promises to: trees that disagree, entries that do not decode, bodies that
/// do not read. Each case commits a deliberately broken state through the storage layer.
@Suite struct DocumentVerifyTests {
    static func database(_ dir: TemporaryDatabaseDirectory) throws -> Database {
        let db = try Database(path: dir.database(), options: testOptions())
        // One batch, larger than a log record may hold: the trees hold everything (FORMAT.md §10.1.7), and
        // `commitBroken` changes what readers see.
        try db.inBatch {
            for i in 0..<50 { try db.put(["n": .number(Double(i))], id: "doc\(i)") }
            try db.put(["big": .string(String(repeating: "z", count: 5000))], id: "big")
        }
        #expect(try db.readSnapshot().pending.isEmpty)
        #expect(try db.verify().isEmpty)
        return db
    }

    /// Replaces the newest commit's trees with `change` applied to them, keeping its commit log.
    static func commitBroken(_ db: Database, byID: [BTreeAction] = [], bySequence: [BTreeAction] = []) throws {
        let snapshot = try db.readSnapshot()
        let newByID = try snapshot.byID.forWriter.modified(by: byID)
        let newBySequence = try snapshot.bySequence.forWriter.modified(by: bySequence)
        try db.documents.storage.commit(roots: [newByID.root, newBySequence.root],
                                        metadata: DocumentFile.encodeMetadata(lastSequence: snapshot.lastSequence,
                                                                              logHead: snapshot.pending.head,
                                                                              logLength: snapshot.pending.length))
    }

    static func messages(_ db: Database) throws -> String {
        try db.verify().map(\.message).joined(separator: " | ")
    }

    /// A byte of the newest one-sync commit's data changed after it was written (FORMAT.md §5, §6): opening
    /// would keep the commit (a flipped bit, not a lost write), so verify recomputes the data check and says so.
    @Test func damagedDataOfTheNewestCommitFailsItsDataCheck() throws {
        let dir = TemporaryDatabaseDirectory("sofa-verify")
        let db = try Self.database(dir)
        try db.put(["n": 51], id: "last")
        let commit = db.documents.storage.latestCommit
        let check = try #require(commit.dataCheck, "a small commit records a data check")
        #expect(try db.verify().isEmpty)
        // Flip a bit in the middle of the commit's data through a second descriptor (the mapping sees it).
        let at = Int(check.start + (commit.offset - check.start) / 2)
        let fd = open(db.path + "/docs", O_RDWR)
        try #require(fd >= 0)
        defer { close(fd) }
        var byte: UInt8 = 0
        #expect(pread(fd, &byte, 1, at) == 1)
        byte ^= 0x10
        #expect(pwrite(fd, &byte, 1, at) == 1)
        let problems = try db.verify()
        let found = try #require(problems.first { $0.message.contains("data check fails") }, "\(problems)")
        #expect(found.offset == Int(check.start) && found.path?.hasSuffix("docs") == true)
        byte ^= 0x10
        #expect(pwrite(fd, &byte, 1, at) == 1)
        #expect(try db.verify().isEmpty)
        try db.close()
    }

    @Test func missingAndStraySequenceEntriesAreFound() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Self.database(dir)
        try Self.commitBroken(db, bySequence: [.remove(DocumentFile.sequenceKey(3))])
        #expect(try Self.messages(db).contains("by-sequence has 50 entries for 51 documents"))
        try Self.commitBroken(db, bySequence: [.put(DocumentFile.sequenceKey(3), Array("doc7".utf8))])
        #expect(try Self.messages(db).contains("by-sequence 3 names \"doc7\", whose by-ID sequence is 8"))
    }

    @Test func undecodableEntriesAndBadIDsAreFound() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Self.database(dir)
        try Self.commitBroken(db, byID: [.put(Array("doc1".utf8), [0x80, 1, 1])])
        #expect(try Self.messages(db).contains("unknown document flags"))
        let record = try #require(try db.readSnapshot().record(Array("doc2".utf8)))
        var wrongFlags = record.encoded()
        wrongFlags[0] = DocumentRecord.flagDeleted
        try Self.commitBroken(db, byID: [.put(Array("doc1".utf8), record.encoded()),
                                         .put(Array("doc2".utf8), wrongFlags)])
        var text = try Self.messages(db)
        #expect(text.contains("disagree with its revisions"))
        #expect(text.contains("by-sequence 2 names \"doc1\", whose by-ID sequence is 3"), "doc1 took doc2's")
        // A key that is not UTF-8, whose record repeats doc3's sequence.
        let doc3 = try #require(try db.readSnapshot().record(Array("doc3".utf8)))
        try Self.commitBroken(db, byID: [.put([0x41, 0xFF], doc3.encoded())])
        text = try Self.messages(db)
        #expect(text.contains("is not a valid document ID"))
        #expect(text.contains("belongs to more than one document"))
    }

    @Test func unreadableBodiesAreFound() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Self.database(dir)
        var record = try #require(try db.readSnapshot().record(Array("big".utf8)))
        guard case .chunk(let offset) = record.tree.winner.body else {
            Issue.record("a 5000-byte body should be a chunk")
            return
        }
        var tree = record.tree.revisions
        tree[0].body = .chunk(offset: offset + 1)
        record.tree = RevisionTree(revisions: tree)
        try Self.commitBroken(db, byID: [.put(Array("big".utf8), record.encoded())])
        #expect(try Self.messages(db).contains("body of \"big\""))
        expectSofaError(.corruption) { try db.document(id: "big") }
    }
}
