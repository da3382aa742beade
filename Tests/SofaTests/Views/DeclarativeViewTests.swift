import Testing

@testable import Sofa

/// Declarative views: defined by key paths, persisted, usable after reopening without app code.
@Suite struct DeclarativeViewTests {
    @Test func persistsAcrossReopen() throws {
        let dir = TemporaryDatabaseDirectory("sofa-views")
        var db = try Database(path: dir.database(), options: testOptions())
        try db.inBatch {
            for i in 0..<30 {
                try db.put(["type": "track", "genre": .string(i % 2 == 0 ? "Rock" : "Jazz"),
                            "artist": .string("A\(i % 3)"),
                            "album": ["title": .string("Album \(i % 5)")], "duration": .number(Double(i))], id: "t\(i)")
            }
            try db.put(["type": "note", "genre": "Rock", "artist": "X", "album": ["title": "Y"], "duration": 1000],
                       id: "n")
            try db.put(["type": "track", "genre": "Rock"], id: "incomplete")
        }
        let view = try db.defineView(named: "byHierarchy", keyPaths: ["genre", "artist", "album.title"],
                                     valuePath: "duration", reduce: .sum, documentType: "track")
        let genres = try run(view) { $0.groupLevel = 1 }
        #expect(keys(genres) == [["Jazz"], ["Rock"]] && genres.map(\.value) == [225, 210])
        #expect(try run(view) { $0.mapOnly = true; $0.limit = 1 }.first?.key == ["Jazz", "A0", "Album 0"])
        try db.close()

        db = try Database(path: dir.database(), options: testOptions())
        #expect(try db.viewNames == ["byHierarchy"])
        let reopened = try #require(db.existingView(named: "byHierarchy"))
        #expect(reopened.hasMap)
        #expect(reopened.definition == (try ViewDefinition(keyPaths: ["genre", "artist", "album.title"],
                                                           valuePath: "duration", reduce: .sum,
                                                           documentType: "track")))
        let code = db.view(named: "code")
        code.setMap(version: "1") { _, _ in }
        #expect(code.definition == nil, "a view whose map is code has no definition")
        try code.delete()
        try db.put(["type": "track", "genre": "Jazz", "artist": "Z", "album": ["title": "Q"], "duration": 5], id: "new")
        let again = try run(reopened) { $0.groupLevel = 1 }
        #expect(again.map(\.value) == [230, 210])
        expectSound(reopened)
        try db.close()

        // Read-only, as the `sofa` tool opens it: the stored index answers.
        db = try Database(path: dir.database(), options: testOptions(readOnly: true))
        let readOnly = try #require(db.existingView(named: "byHierarchy"))
        #expect(try run(readOnly) { $0.groupLevel = 2; $0.startKey = ["Jazz"]; $0.endKey = ["Jazz", [:]] }.count == 4)
        #expect(throws: SofaError.self) { try db.defineView(named: "x", keyPaths: ["a"]) }
    }

    @Test func scalarKeysAndBadDefinitions() throws {
        let dir = TemporaryDatabaseDirectory("sofa-views")
        let db = try Database(path: dir.database(), options: testOptions())
        for i in 0..<5 { try db.put(["name": .string("n\(4 - i)")], id: "d\(i)") }
        let view = try db.defineView(named: "byName", keyPaths: ["name"])
        let names = try run(view)
        #expect(keys(names) == ["n0", "n1", "n2", "n3", "n4"] && names[0].value == nil)
        #expect(try run(view) { $0.groupLevel = 1 }.count == 5)
        expectSofaError(.invalidArgument) { try db.defineView(named: "bad", keyPaths: []) }
        expectSofaError(.invalidArgument) { try db.defineView(named: "bad", keyPaths: ["a", ""]) }
        expectSofaError(.invalidArgument) { try db.defineView(named: "a/b", keyPaths: ["a"]) }
        expectSofaError(.invalidArgument) {
            try db.defineView(named: "bad", keyPaths: ["a"], reduce: .custom { _, _, _ in nil })
        }
        // Redefinition resets the index.
        let redefined = try db.defineView(named: "byName", keyPaths: ["name"], reduce: .count)
        #expect(try run(redefined).first?.value == 5)
    }
}
