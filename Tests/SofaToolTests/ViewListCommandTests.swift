import Foundation
import Sofa
import Testing

/// `sofa view list`: each view's definition, rows, last sequence indexed and staleness, as a table and as
/// JSON lines.
@Suite struct ViewListCommandTests {
    @Test func tableAndJSONLines() throws {
        let dir = Tool.Directory()
        let path = try Tool.database(in: dir, Tool.tracks)
        let empty = try Tool.run(["view", "list", path])
        #expect(empty.status == 0, "\(empty.error)")
        #expect(empty.lines.last == "0 views, database last sequence 9")
        try Tool.createView(path, ["byHierarchy", "--key", "genre,artist,album.title,title", "--value", "duration",
                                   "--reduce", "_sum", "--type", "track"])
        try Tool.createView(path, ["byYear", "--key", "year"])

        let table = try Tool.run(["view", "list", path])
        #expect(table.status == 0, "\(table.error)")
        let lines = table.lines
        #expect(lines.count == 5)
        #expect(lines[0].split(separator: " ") == ["view", "key", "value", "reduce", "type", "rows", "indexed", "seq",
                                                   "stale"])
        #expect(lines[2].split(separator: " ") == ["byHierarchy", "genre,artist,album.title,title", "duration", "_sum",
                                                   "track", "8", "9"])
        #expect(lines[3].split(separator: " ") == ["byYear", "year", "-", "-", "-", "8", "9"])
        #expect(lines[4] == "2 views, database last sequence 9")

        // A new document makes both stale until a query updates one.
        #expect(try Tool.run(["load", path, "-"], input: "{\"_id\":\"x\",\"year\":2000}\n").status == 0)
        #expect(try Tool.run(["query", path, "byYear", "--limit", "0"]).status == 0)
        let objects = try Tool.run(["view", "list", path, "--json"]).jsonLines()
        #expect(objects.map { $0["view"] as? String } == ["byHierarchy", "byYear"])
        let hierarchy = objects[0], year = objects[1]
        #expect(hierarchy["keyPaths"] as? [String] == ["genre", "artist", "album.title", "title"])
        #expect(hierarchy["valuePath"] as? String == "duration")
        #expect(hierarchy["reduce"] as? String == "sum")
        #expect(hierarchy["documentType"] as? String == "track")
        #expect(hierarchy["declarative"] as? Bool == true)
        #expect(hierarchy["rows"] as? Int == 8)
        #expect(hierarchy["lastSequenceIndexed"] as? Int == 9)
        #expect(hierarchy["stale"] as? Bool == true)
        #expect(year["valuePath"] is NSNull)
        #expect(year["reduce"] is NSNull)
        #expect(year["rows"] as? Int == 9)
        #expect(year["lastSequenceIndexed"] as? Int == 10)
        #expect(year["stale"] as? Bool == false)
        let stale = try Tool.run(["view", "list", path]).lines
        #expect(stale[2].hasSuffix("9  stale"), "\(stale[2])")
        try Tool.expectVerifies(path)
    }

    /// A view whose map function is app code (made here with the library) is listed as `(code)`, and `sofa
    /// query` reads its index as it is, even when stale: the tool cannot run the map.
    @Test func viewWithMapInCode() throws {
        let dir = Tool.Directory()
        let path = try Tool.database(in: dir, Tool.tracks)
        do {
            let db = try Database(path: path)
            let view = db.view(named: "byTitle")
            view.setMap(version: "1") { doc, emit in
                if let title = doc["title"] { emit(title, doc["duration"]) }
            }
            try view.updateIndex()
            try db.close()
        }
        #expect(try Tool.run(["load", path, "-"], input: "{\"_id\":\"late\",\"title\":\"Zebra\"}\n").status == 0)
        let list = try Tool.run(["view", "list", path])
        #expect(list.status == 0, "\(list.error)")
        #expect(list.lines[2].split(separator: " ") == ["byTitle", "(code)", "-", "-", "-", "8", "9", "stale"])
        let object = try #require(try Tool.run(["view", "list", path, "--json"]).jsonLines().first)
        #expect(object["declarative"] as? Bool == false)
        #expect(object["keyPaths"] is NSNull)
        let rows = try Tool.run(["query", path, "byTitle", "--json", "--descending", "--limit", "1"])
        #expect(rows.status == 0, "\(rows.error)")
        let first = try #require(rows.jsonLines().first)
        #expect(first["key"] as? String == "So What", "the index as it was: no Zebra")
        #expect(first["value"] as? Int == 545)
        try Tool.expectVerifies(path)
    }

    @Test func missingDatabase() throws {
        let dir = Tool.Directory()
        let result = try Tool.run(["view", "list", dir.path + "/none.sofa"])
        #expect(result.status == 1)
        #expect(result.error.contains("notFound"))
        #expect(try Tool.run(["view", "list"]).status == 2)
    }
}
