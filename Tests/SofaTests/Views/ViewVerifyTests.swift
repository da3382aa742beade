import Foundation
import Testing

@testable import Sofa
@testable import SofaStorage

/// `Database.verify()` over views: a declarative view's rows must equal a fresh map of the documents up to its
/// last indexed sequence. Rows and back-index entries are tampered with here through the index's own write path
/// (consistently, so only the fresh map can tell), and each tampering is reported with the file and an offset.
@Suite struct ViewVerifyTests {
    /// A database with 50 tracks and the declarative view `byArtist` (key artist, value duration, count).
    static func populate(_ db: Database) throws -> View {
        try db.inBatch {
            for i in 0..<50 {
                try db.put(["type": "track", "artist": .string("artist \(i % 9)"), "duration": .number(Double(i))],
                           id: "track\(i)")
            }
        }
        let view = try db.defineView(named: "byArtist", keyPaths: ["artist"], valuePath: "duration", reduce: .count,
                                     documentType: "track")
        try view.updateIndex()
        return view
    }

    /// Applies `rows` and `back` actions to the view's index and commits them under the same header.
    static func tamper(_ view: View, rows: [BTreeAction], back: [BTreeAction] = []) throws {
        let index = try #require(try view.index())
        let snapshot = try index.snapshot()
        let newRows = try BTree(file: index.storage, root: snapshot.rows.root, configuration: index.rowsConfiguration,
                                limit: StorageFile.unlimited).modified(by: rows)
        let newBack = try BTree(file: index.storage, root: snapshot.backIndex.root,
                                configuration: index.backConfiguration, limit: StorageFile.unlimited).modified(by: back)
        try index.commit(rows: newRows, backIndex: newBack, header: snapshot.header)
    }

    /// The row key and value of the first row of document `id`.
    static func firstRow(of id: String, in view: View) throws -> (key: [UInt8], value: RowValue) {
        let snapshot = try #require(try view.index()).snapshot()
        let entry = try #require(try snapshot.backIndex.get(Array(id.utf8)))
        let key = try entry.withUnsafeBytes(BackIndexEntry.decode)[0]
        let rowKey = RowKey.make(key: key, id: Array(id.utf8), index: 0)
        let value = try #require(try snapshot.rows.get(rowKey))
        return (rowKey, try value.withUnsafeBytes { try RowValue($0) })
    }

    /// Expects `db.verify()` to report exactly problems in the view's file, each with an offset, one of them
    /// containing `text`.
    static func expectFound(_ db: Database, _ view: View, _ text: String,
                            sourceLocation: SourceLocation = #_sourceLocation) throws {
        let problems = try db.verify()
        #expect(!problems.isEmpty, "nothing found", sourceLocation: sourceLocation)
        #expect(problems.allSatisfy { $0.path == view.indexPath && $0.offset != nil }, "\(problems)",
                sourceLocation: sourceLocation)
        #expect(problems.contains { $0.message.contains(text) }, "\(problems)", sourceLocation: sourceLocation)
    }

    @Test func soundViewPassesAndStaleDocumentsAreNotCompared() throws {
        let dir = TemporaryDatabaseDirectory("sofa-view-verify")
        let db = try Database(path: dir.database(), options: testOptions())
        let view = try Self.populate(db)
        #expect(try db.verify() == [])
        // Changes after the last update: the index is stale, not wrong.
        try db.put(["type": "track", "artist": "late", "duration": 1], id: "late")
        let doc = try #require(try db.document(id: "track3"))
        try db.put(["type": "track", "artist": "renamed", "duration": 3], id: "track3", rev: doc.revisionID)
        #expect(view.isStale)
        #expect(try db.verify() == [])
        try view.updateIndex()
        #expect(try db.verify() == [])
        try db.close()
    }

    @Test func aRowWithAWrongValueIsFound() throws {
        let dir = TemporaryDatabaseDirectory("sofa-view-verify")
        let db = try Database(path: dir.database(), options: testOptions())
        let view = try Self.populate(db)
        let (rowKey, row) = try Self.firstRow(of: "track7", in: view)
        let wrong = RowValue.encode(keyLength: row.keyLength, sequence: row.sequence, key: row.key, value: 999)
        try Self.tamper(view, rows: [.put(rowKey, wrong)])
        #expect(try view.index()!.verify() == [], "the trees and back-index ⇄ rows still agree")
        try Self.expectFound(db, view, "row 0 of \"track7\" differs")
        try db.close()
    }

    @Test func missingAndExtraRowsAreFound() throws {
        let dir = TemporaryDatabaseDirectory("sofa-view-verify")
        let db = try Database(path: dir.database(), options: testOptions())
        let view = try Self.populate(db)
        // track9's row and back-index entry removed together.
        let (rowKey, _) = try Self.firstRow(of: "track9", in: view)
        try Self.tamper(view, rows: [.remove(rowKey)], back: [.remove(Array("track9".utf8))])
        try Self.expectFound(db, view, "\"track9\" (sequence 10) emits 1 rows but none are indexed")

        // Back as it was, plus a row for a document that does not exist.
        let dir2 = TemporaryDatabaseDirectory("sofa-view-verify")
        let db2 = try Database(path: dir2.database(), options: testOptions())
        let view2 = try Self.populate(db2)
        var key: [UInt8] = []
        try CollationKey.encode("ghost artist", into: &key)
        let ghost = Array("ghost".utf8)
        try Self.tamper(view2, rows: [.put(RowKey.make(key: key, id: ghost, index: 0),
                                           RowValue.encode(keyLength: key.count, sequence: 1, key: "ghost artist",
                                                           value: 1))],
                        back: [.put(ghost, BackIndexEntry.encode([key]))])
        try Self.expectFound(db2, view2, "the back-index lists \"ghost\", which is not a document")
        try db.close()
        try db2.close()
    }

    @Test func backIndexOutOfStepWithTheRowsIsFoundWithTheCommitOffset() throws {
        let dir = TemporaryDatabaseDirectory("sofa-view-verify")
        let db = try Database(path: dir.database(), options: testOptions())
        let view = try Self.populate(db)
        try Self.tamper(view, rows: [], back: [.remove(Array("track5".utf8))])
        let commit = try #require(try view.index()).storage.latestCommit.offset
        let problems = try db.verify()
        #expect(problems.contains {
            $0.message == "the back-index lists 49 rows; the rows tree holds 50" && $0.offset == Int(commit)
        }, "\(problems)")
        #expect(problems.allSatisfy { $0.path == view.indexPath })
        try db.close()
    }

    @Test func aCodeViewIsCheckedForConsistencyOnly() throws {
        let dir = TemporaryDatabaseDirectory("sofa-view-verify")
        let db = try Database(path: dir.database(), options: testOptions())
        try db.put(["n": 1], id: "a")
        let view = db.view(named: "code")
        view.setMap(version: "1") { doc, emit in emit(doc["n"] ?? nil, nil) }
        try view.updateIndex()
        // A code view's map may depend on anything the app has: no fresh map is compared, so a changed row is
        // not a finding (the trees still agree with each other).
        let (rowKey, row) = try Self.firstRow(of: "a", in: view)
        try Self.tamper(view, rows: [.put(rowKey, RowValue.encode(keyLength: row.keyLength, sequence: row.sequence,
                                                                  key: row.key, value: "changed"))])
        #expect(try db.verify() == [])
        try db.close()
    }
}
