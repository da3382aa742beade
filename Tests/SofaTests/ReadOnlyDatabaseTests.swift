#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing

@testable import Sofa
@testable import SofaStorage

/// R9 at the database level: a database whose directory and files are read-only (mode 0555/0444), opened with
/// `readOnly: true`. Every read works; every write fails with `.readOnly` before any system call; not a byte,
/// mode or timestamp of the files changes and no file appears.
///
/// (The test runs as root in CI, which file modes do not stop, so "no write" is proven by counting the
/// system calls the database makes and by comparing the files, not by the modes.)
@Suite struct ReadOnlyDatabaseTests {
    /// Every file under `path` with its bytes, mode and modification time.
    static func snapshot(_ path: String) throws -> [String: String] {
        var out: [String: String] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: path).sorted() {
            var info = stat()
            #expect(stat(path + "/" + name, &info) == 0)
            let bytes = FileManager.default.contents(atPath: path + "/" + name) ?? Data()
            out[name] = "\(bytes.count) \(bytes.hashValue) mode \(String(info.st_mode, radix: 8)) "
                + "mtime \(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec)"
            out[name + ":bytes"] = bytes.base64EncodedString()
        }
        return out
    }

    @Test func readOnlyDatabaseReadsEverythingAndWritesNothing() throws {
        let dir = TemporaryDatabaseDirectory("sofa-readonly")
        let path = dir.database()
        do {
            let db = try Database(path: path, options: testOptions())
            for i in 0..<50 { try db.put(["n": .number(Double(i))], id: "doc\(i)") }
            let doc = try #require(try db.document(id: "doc7"))
            try db.delete(id: "doc7", rev: doc.revisionID)
            try db.close()
        }
        for name in try FileManager.default.contentsOfDirectory(atPath: path) {
            #expect(chmod(path + "/" + name, 0o444) == 0)
        }
        #expect(chmod(path, 0o555) == 0)
        defer { chmod(path, 0o755) }  // so the temporary directory can be removed
        let before = try Self.snapshot(path)

        let calls = FaultInjectingSystemCalls()
        let db = try Database(path: path, options: testOptions(readOnly: true), system: calls)
        #expect(FaultInjectingSystemCalls.Call.allCases.filter(\.isWriteOrSync).allSatisfy { calls.count($0) == 0 })
        #expect(calls.count(.lock) == 0, "read-only opening takes no write lock")

        // Reads: every document, all-docs queries in each mode, changes, verify.
        #expect(db.documentCount == 49)
        #expect(db.deletedDocumentCount == 1)
        #expect(try db.document(id: "doc3")?.properties["n"] == 3)
        #expect(try db.document(id: "doc7") == nil)
        #expect(try db.document(id: "doc7", includeDeleted: true)?.isDeleted == true)
        #expect(try db.createAllDocumentsQuery().run().count == 49)
        var bySequence = db.createAllDocumentsQuery()
        bySequence.allDocsMode = .bySequence
        #expect(try bySequence.run().count == 49)
        expectSound(db, "read-only")

        // Writes: each refused with .readOnly, and none reaches the system.
        let callsBefore = FaultInjectingSystemCalls.Call.allCases.map { calls.count($0) }
        expectSofaError(.readOnly, "put") { try db.put(["n": 1], id: "new") }
        expectSofaError(.readOnly, "update") {
            let doc = try #require(try db.document(id: "doc3"))
            return try db.put(["n": 4], id: "doc3", rev: doc.revisionID)
        }
        expectSofaError(.readOnly, "delete") { try db.delete(id: "doc3", rev: "1-00") }
        expectSofaError(.readOnly, "forceInsert") {
            try db.forceInsert(["x": 1], id: "doc3", revisionHistory: ["9-ab"])
        }
        expectSofaError(.readOnly, "batch") { try db.inBatch { try db.put(["n": 1], id: "in-batch") } }
        let writeCalls = zip(FaultInjectingSystemCalls.Call.allCases, callsBefore).filter { call, count in
            call.isWriteOrSync && calls.count(call) != count
        }
        #expect(writeCalls.isEmpty, "write or sync calls after refused writes: \(writeCalls)")
        try db.close()

        #expect(try Self.snapshot(path) == before, "the files are byte for byte, mode and time unchanged")
    }

    @Test func readOnlyOpeningOfAMissingDatabaseCreatesNothing() throws {
        let dir = TemporaryDatabaseDirectory("sofa-readonly")
        let path = dir.database("missing")
        expectSofaError(.notFound) { try Database(path: path, options: testOptions(readOnly: true)) }
        #expect(!FileManager.default.fileExists(atPath: path))
    }
}
