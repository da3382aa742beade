import Testing

@testable import Sofa

/// CouchDB's `view_collation` test: the collation order of every key type, and `inclusive_end` combined with
/// `endkey_docid`, ascending and descending.
@Suite struct ViewCollationTests {
    static let values: [JSON] = [
        nil, false, true, 1, 2, 3.0, 4, "a", "A", "aa", "b", "B", "ba", "bb",
        ["a"], ["b"], ["b", "c"], ["b", "c", "a"], ["b", "d"], ["b", "d", "e"],
        ["a": 1], ["a": 2], ["b": 1], ["b": 2], ["b": 2, "a": 1], ["b": 2, "c": 2],
    ]

    /// A database where document `i` (ID "i") emits `values[i]`.
    static func makeView(_ dir: TemporaryDatabaseDirectory) throws -> (Database, View) {
        let db = try Database(path: dir.database(), options: testOptions())
        // Inserted in reverse so the index order cannot come from insertion order.
        for (i, value) in values.enumerated().reversed() { try db.put(["foo": value], id: "\(i)") }
        let view = db.view(named: "collation")
        view.setMap(version: "1") { doc, emit in emit(doc["foo"] ?? nil, nil) }
        return (db, view)
    }

    @Test func orderOfEveryType() throws {
        let dir = TemporaryDatabaseDirectory("sofa-views")
        let (_, view) = try Self.makeView(dir)
        #expect(keys(try run(view)) == Self.values)
        #expect(keys(try run(view) { $0.descending = true }) == Self.values.reversed())
        // Each key alone, by key range and by `keys`.
        for (i, value) in Self.values.enumerated() {
            let one = try run(view) {
                $0.startKey = value
                $0.endKey = value
            }
            #expect(one.map(\.documentID) == ["\(i)"], "key \(value)")
            #expect(try run(view) { $0.keys = [value] }.map(\.documentID) == ["\(i)"])
        }
        expectSound(view)
    }

    @Test func inclusiveEndAndEndKeyDocID() throws {
        let dir = TemporaryDatabaseDirectory("sofa-views")
        let (_, view) = try Self.makeView(dir)
        func last(_ configure: (inout Query) -> Void) throws -> JSON? { try run(view, configure).rows.last?.key }
        #expect(try last { $0.endKey = "b"; $0.inclusiveEnd = true } == "b")
        #expect(try last { $0.endKey = "b"; $0.descending = true; $0.inclusiveEnd = true } == "b")
        #expect(try last { $0.endKey = "b"; $0.inclusiveEnd = false } == "aa")
        #expect(try last { $0.endKey = "b"; $0.descending = true; $0.inclusiveEnd = false } == "B")
        #expect(try last { $0.endKey = "b"; $0.endKeyDocID = "10"; $0.inclusiveEnd = false } == "aa")
        #expect(try last { $0.endKey = "b"; $0.endKeyDocID = "11"; $0.inclusiveEnd = false } == "b")
        #expect(try last { $0.endKey = "b"; $0.endKeyDocID = "10"; $0.inclusiveEnd = true } == "b")
        #expect(try last { $0.endKey = "b"; $0.endKeyDocID = "09"; $0.inclusiveEnd = true } == "aa")
        #expect(try last {
            $0.endKey = "b"; $0.endKeyDocID = "10"; $0.descending = true; $0.inclusiveEnd = false
        } == "B")
        // Descending, doc IDs descend too: (b, "10") lies below (b, "11") and above (b, "0").
        #expect(try last {
            $0.endKey = "b"; $0.endKeyDocID = "11"; $0.descending = true; $0.inclusiveEnd = false
        } == "B")
        #expect(try last {
            $0.endKey = "b"; $0.endKeyDocID = "0"; $0.descending = true; $0.inclusiveEnd = false
        } == "b")
        #expect(try last {
            $0.endKey = "b"; $0.endKeyDocID = "10"; $0.descending = true; $0.inclusiveEnd = true
        } == "b")
        // Start bounds with doc IDs, and exclusive starts.
        #expect(try run(view) { $0.startKey = "b"; $0.inclusiveStart = false }.first?.key == "B")
        #expect(try run(view) { $0.startKey = "b"; $0.startKeyDocID = "11" }.first?.key == "B")
        #expect(try run(view) { $0.startKey = "b"; $0.startKeyDocID = "10" }.first?.key == "b")
        #expect(try run(view) {
            $0.startKey = "b"; $0.startKeyDocID = "10"; $0.inclusiveStart = false
        }.first?.key == "B")
        #expect(try run(view) { $0.startKey = "b"; $0.descending = true; $0.inclusiveStart = false }.first?.key == "aa")
    }

    /// Prefix matching on strings and on the last item of array keys, both directions.
    @Test func prefixMatchLevels() throws {
        let dir = TemporaryDatabaseDirectory("sofa-views")
        let db = try Database(path: dir.database(), options: testOptions())
        let emitted: [JSON] = ["fo", "foo", "foolish", "fong", "fop",
                               [1], [1, "x"], [1, "xtc"], [1, "y"], [2], [1, ["a"]]]
        for (i, key) in emitted.enumerated() { try db.put(["k": key], id: "d\(i)") }
        let view = db.view(named: "prefix")
        view.setMap(version: "1") { doc, emit in emit(doc["k"] ?? nil, nil) }
        let foo = try run(view) { $0.startKey = "foo"; $0.endKey = "foo"; $0.prefixMatchLevel = 1 }
        #expect(keys(foo) == ["foo", "foolish"])
        let fooDown = try run(view) {
            $0.startKey = "foo"; $0.endKey = "foo"; $0.prefixMatchLevel = 1; $0.descending = true
        }
        #expect(keys(fooDown) == ["foolish", "foo"])
        let one = try run(view) { $0.startKey = [1]; $0.endKey = [1]; $0.prefixMatchLevel = 1 }
        #expect(keys(one) == [[1], [1, "x"], [1, "xtc"], [1, "y"], [1, ["a"]]])
        let x = try run(view) { $0.startKey = [1, "x"]; $0.endKey = [1, "x"]; $0.prefixMatchLevel = 2 }
        #expect(keys(x) == [[1, "x"], [1, "xtc"]])
        let nested = try run(view) { $0.startKey = [1, ["a"]]; $0.endKey = [1, ["a"]]; $0.prefixMatchLevel = 2 }
        #expect(keys(nested) == [[1, ["a"]]])
        expectSound(view)
    }

    /// Doc IDs holding bytes 0x00 and 0x01 still sort by raw bytes under one key.
    @Test func documentIDsWithControlBytes() throws {
        let dir = TemporaryDatabaseDirectory("sofa-views")
        let db = try Database(path: dir.database(), options: testOptions())
        let ids = ["a", "a\u{0}", "a\u{0}b", "a\u{1}", "a\u{2}", "ab", "b"]
        for id in ids.shuffled() { try db.put(["k": 1], id: id) }
        let view = db.view(named: "same")
        view.setMap(version: "1") { doc, emit in
            emit(doc["k"] ?? nil, nil)
            emit(doc["k"] ?? nil, 2)
        }
        let rows = try run(view)
        #expect(rows.map(\.documentID) == ids.flatMap { [$0, $0] })
        let bounded = try run(view) {
            $0.startKey = 1; $0.startKeyDocID = "a\u{0}"; $0.endKey = 1; $0.endKeyDocID = "a\u{1}"
        }
        #expect(Set(bounded.compactMap(\.documentID)) == ["a\u{0}", "a\u{0}b", "a\u{1}"] && bounded.count == 6)
        expectSound(view)
    }
}
