import Foundation
import Testing

@testable import Sofa
@testable import SofaStorage

/// What the map function is given: the document's properties with the real `_id` and `_rev`, including for a
/// stored body that carries `_id` or `_rev` members of its own (the indexer's fallback path in
/// `Mapper.map(id:record:snapshot:into:)`; a put never stores one, so the tests write such bodies below the API).
@Suite struct ViewMapInputTests {
    /// Emits the properties the map sees: key `_id`, value the `_rev`, the member names in order, and `n`.
    static let echo: MapFunction = { doc, emit in
        let names = doc.objectValue.map { $0.keys.map { JSON.string($0) } } ?? []
        emit(doc["_id"] ?? nil, ["rev": doc["_rev"] ?? nil, "members": .array(names), "n": doc["n"] ?? nil])
    }

    /// Stores `body` (compact JSON text, kept byte for byte) as revision `rev` of document `id`, bypassing the
    /// API's split of `_id`/`_rev` out of the properties.
    static func storeRaw(_ db: Database, id: String, body: String, rev: String) throws {
        let revision = try #require(RevisionID(rev))
        try db.write {
            _ = try db.documents.forceInsert(Array(id.utf8), body: Array(body.utf8), history: [revision],
                                             deleted: false)
        }
    }

    @Test func mapSeesRealIDAndRevisionWhenTheBodyHasItsOwn() throws {
        let dir = TemporaryDatabaseDirectory("sofa-views")
        let db = try Database(path: dir.database(), options: testOptions())
        try db.put(["n": 1], id: "plain")
        try Self.storeRaw(db, id: "own-id", body: #"{"_id":"someone-else","n":2}"#, rev: "1-aa")
        try Self.storeRaw(db, id: "own-rev", body: #"{"n":3,"_rev":"9-ff"}"#, rev: "2-bb")
        try Self.storeRaw(db, id: "own-both", body: #"{"_rev":"7-cc","n":4,"_id":"plain"}"#, rev: "3-cc")
        // Over the inline limit: the body is read from its own chunk.
        let padding = String(repeating: "x", count: 2000)
        try Self.storeRaw(db, id: "own-id-chunk", body: #"{"pad":"\#(padding)","_id":"zz","n":5}"#, rev: "1-dd")

        // Member order: the indexer puts `_id` and `_rev` first; a body's own member keeps its place.
        let expected: [String: (rev: String, members: [JSON], n: Double)] = [
            "plain": (try #require(try db.document(id: "plain")).revisionID, ["_id", "_rev", "n"], 1),
            "own-id": ("1-aa", ["_id", "_rev", "n"], 2),
            "own-rev": ("2-bb", ["_id", "n", "_rev"], 3),
            "own-both": ("3-cc", ["_rev", "n", "_id"], 4),
            "own-id-chunk": ("1-dd", ["pad", "_rev", "_id", "n"], 5),
        ]
        let view = db.view(named: "echo")
        view.setMap(version: "1", Self.echo)
        let sum = db.view(named: "sum")
        sum.setMapReduce(version: "1", map: { doc, emit in emit(doc["_id"] ?? nil, doc["n"]) }, reduce: .sum)
        try view.updateIndex()
        try sum.updateIndex()

        let rows = try run(view)
        #expect(ids(rows) == ["own-both", "own-id", "own-id-chunk", "own-rev", "plain"])
        for row in rows {
            let id = try #require(row.documentID)
            let want = try #require(expected[id])
            #expect(row.key == .string(id), "\(id): the key is the map's _id")
            #expect(row.value?["rev"] == .string(want.rev), "\(id)")
            #expect(row.value?["members"] == .array(want.members), "\(id)")
            #expect(row.value?["n"] == .number(want.n), "\(id)")
            #expect(try db.document(id: id)?.revisionID == want.rev, "\(id)")
            // The document's properties agree with what the map saw: its own `_id` and `_rev`.
            let properties = try #require(try db.document(id: id)).properties
            #expect(properties["_id"] == .string(id), "\(id)")
            #expect(properties["_rev"] == .string(want.rev), "\(id)")
            #expect(properties["n"] == .number(want.n), "\(id)")
        }
        // The stored `_id` values are not keys; "plain" has one row although "own-both" stored `_id: "plain"`.
        #expect(ids(try run(view) { $0.keys = ["someone-else", "zz"] }).isEmpty)
        #expect(ids(try run(view) { $0.keys = ["plain"] }) == ["plain"])
        #expect(try run(sum).first?.value?.doubleValue == 15)

        // An update through the API stores the body without `_id`: the incremental update re-maps it.
        try db.put(["n": 20], id: "own-id", rev: "1-aa")
        try view.updateIndex()
        try sum.updateIndex()
        let updated = try #require(try db.document(id: "own-id"))
        let row = try #require(try run(view) { $0.keys = ["own-id"] }.first)
        #expect(row.value?["rev"] == .string(updated.revisionID))
        #expect(row.value?["members"] == ["_id", "_rev", "n"])
        #expect(try run(sum).first?.value?.doubleValue == 33)
        #expect(view.totalRows == 5)

        expectSound(view)
        expectSound(sum)
        expectSound(db)
    }

    /// `Mapper.map(id:record:inlineBody:snapshot:into:)` given the winner's body as bytes of the by-ID entry (the
    /// update's in-place path: the record decoded without copying bodies) maps a document exactly as from the
    /// record's own copy; and a body stored in a value chunk maps as the same bytes given inline.
    @Test func inPlaceBodiesMapAsStoredOnes() throws {
        let dir = TemporaryDatabaseDirectory("sofa-views")
        let db = try Database(path: dir.database(), options: testOptions())
        try db.put(["n": 1, "t": "small"], id: "inline")
        try db.put(["n": 2, "pad": .string(String(repeating: "x", count: 2000))], id: "chunk")
        try Self.storeRaw(db, id: "own-id", body: #"{"_id":"someone-else","n":3}"#, rev: "1-aa")
        let snapshot = try db.readSnapshot()
        let mapper = Mapper(map: Self.echo, documentType: nil, calls: nil)
        var fromChunk: [String] = []
        for id in ["inline", "chunk", "own-id"] {
            let key = Array(id.utf8)
            let entry = try #require(try key.withUnsafeBytes { k in
                try snapshot.withEntry(for: k) { $0.map(Array.init) }
            })
            var copied = MappedChunk(), inPlace = MappedChunk()
            try entry.withUnsafeBytes { e in
                try key.withUnsafeBytes { k in
                    let record = try DocumentRecord(decoding: e, path: snapshot.path)
                    try mapper.map(id: k, record: record, snapshot: snapshot, into: &copied)
                    var bodyRange: Range<Int>?
                    let lean = try DocumentRecord(decoding: e, path: snapshot.path, bodyOf: nil, at: &bodyRange)
                    guard case .chunk(let offset) = record.tree.winner.body else {
                        let body = try #require(bodyRange, "\(id): an inline body found in the entry")
                        try mapper.map(id: k, record: lean, inlineBody: UnsafeRawBufferPointer(rebasing: e[body]),
                                       snapshot: snapshot, into: &inPlace)
                        return
                    }
                    #expect(bodyRange == nil)
                    fromChunk.append(id)
                    let chunk = try snapshot.storage.readChunk(at: offset, kind: .value, limit: snapshot.byID.limit)
                    try chunk.withUnsafeBytes {
                        try mapper.map(id: k, record: lean, inlineBody: $0, snapshot: snapshot, into: &inPlace)
                    }
                }
            }
            #expect(copied.rows.count == 1, "\(id)")
            #expect(inPlace.arena == copied.arena, "\(id)")
            #expect(inPlace.documentBytes == copied.documentBytes, "\(id)")
            #expect(inPlace.rows.map { [$0.start, $0.keyLength, $0.valueLength] }
                    == copied.rows.map { [$0.start, $0.keyLength, $0.valueLength] }, "\(id)")
        }
        #expect(fromChunk == ["chunk"], "the large body is in a value chunk, the others inline")
        expectSound(db)
    }
}
