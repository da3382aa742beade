import Testing

@testable import Sofa

/// Options applied after the index is read: postFilter, sortDescriptors, skip and limit on output rows;
/// QueryRow decoding; QueryEnumerator equality and staleness.
@Suite struct QueryOptionsTests {
    struct Widget: Decodable, Equatable {
        var price: Double
        var color: String
    }

    static func widgets(_ dir: TemporaryDatabaseDirectory) throws -> (Database, View) {
        let db = try Database(path: dir.database(), options: testOptions())
        let items: [(String, Double, String)] = [("bolt", 3, "red"), ("axle", 12, "blue"), ("cog", 7, "red"),
                                                 ("drum", 12, "green"), ("eye", 1, "blue")]
        for (name, price, color) in items {
            try db.put(["name": .string(name), "price": .number(price), "color": .string(color)], id: name)
        }
        let view = db.view(named: "widgetsByName")
        view.setMap(version: "1") { doc, emit in
            guard let name = doc["name"] else { return }
            emit(name, ["price": doc["price"] ?? nil, "color": doc["color"] ?? nil])
        }
        return (db, view)
    }

    @Test func sortFilterSkipLimit() throws {
        let dir = TemporaryDatabaseDirectory("sofa-views")
        let (db, view) = try Self.widgets(dir)
        let sorted = try run(view) {
            $0.sortDescriptors = [QuerySortDescriptor("value.price", ascending: false), QuerySortDescriptor("key")]
        }
        #expect(keys(sorted) == ["axle", "drum", "cog", "bolt", "eye"])
        let page = try run(view) {
            $0.sortDescriptors = [QuerySortDescriptor("value.price")]
            $0.postFilter = { $0.value?["color"] != "green" }
            $0.skip = 1
            $0.limit = 2
        }
        #expect(keys(page) == ["bolt", "cog"])
        #expect(try page[0].decode(Widget.self) == Widget(price: 3, color: "red"))
        #expect(page[0].toJSON() == ["id": "bolt", "key": "bolt", "value": ["price": 3, "color": "red"]])
        let filtered = try run(view) {
            $0.postFilter = { $0.value?["color"] == "red" }
            $0.descending = true
        }
        #expect(keys(filtered) == ["cog", "bolt"] && filtered.totalRows == 5)
        // All-documents queries sort too.
        var all = db.createAllDocumentsQuery()
        all.sortDescriptors = [QuerySortDescriptor("documentID", ascending: false)]
        all.limit = 2
        #expect(try all.run().map(\.documentID) == ["eye", "drum"])
        expectSound(view)
    }

    @Test func enumeratorEqualityAndStaleness() throws {
        let dir = TemporaryDatabaseDirectory("sofa-views")
        let (db, view) = try Self.widgets(dir)
        let first = try run(view)
        #expect(!first.isStale && first.sequenceNumber == db.lastSequence)
        try db.put(["unrelated": true], id: "zzz")
        #expect(first.isStale)
        let second = try run(view)
        #expect(second == first && !second.isStale)
        try db.put(["name": "fan", "price": 2, "color": "red"], id: "fan")
        #expect(try run(view) != first)
        #expect(try run(view) { $0.keys = ["fan", "bolt", "fan", "nope"] }.map(\.key) == ["bolt", "fan"])
        expectSound(view)
    }
}
