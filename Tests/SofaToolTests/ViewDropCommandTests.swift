import Foundation
import Testing

/// `sofa view drop`: the index file goes, `view list` no longer shows the view, the others keep working;
/// dropping a missing view fails with `notFound`.
@Suite struct ViewDropCommandTests {
    @Test func dropRemovesTheViewOnly() throws {
        let dir = Tool.Directory()
        let path = try Tool.database(in: dir, Tool.tracks)
        try Tool.createView(path, ["byGenre", "--key", "genre", "--reduce", "_count"])
        try Tool.createView(path, ["byYear", "--key", "year"])
        let dropped = try Tool.run(["view", "drop", path, "byGenre"])
        #expect(dropped.status == 0, "\(dropped.error)")
        #expect(dropped.output == "dropped view byGenre (9 rows)\n")
        #expect(!FileManager.default.fileExists(atPath: path + "/views/byGenre"))
        let list = try Tool.run(["view", "list", path, "--json"]).jsonLines()
        #expect(list.map { $0["view"] as? String } == ["byYear"])
        #expect(try Tool.run(["query", path, "byGenre"]).status == 1)
        #expect(try Tool.run(["query", path, "byYear", "--json"]).jsonLines().count == 8)

        let json = try Tool.run(["view", "drop", path, "byYear", "--json"])
        #expect(json.status == 0, "\(json.error)")
        let summary = try #require(json.jsonLines().first)
        #expect(summary["dropped"] as? String == "byYear")
        #expect(summary["rows"] as? Int == 8)
        #expect(try Tool.run(["view", "list", path]).lines.last == "0 views, database last sequence 9")
        // The name can be defined again.
        try Tool.createView(path, ["byYear", "--key", "year", "--reduce", "_count"])
        #expect(try Tool.run(["query", path, "byYear", "--json"]).jsonLines().first?["value"] as? Int == 8)
        try Tool.expectVerifies(path)
    }

    @Test func missingViewAndUsage() throws {
        let dir = Tool.Directory()
        let path = try Tool.database(in: dir, Tool.tracks)
        let missing = try Tool.run(["view", "drop", path, "nothing"])
        #expect(missing.status == 1)
        #expect(missing.error == "sofa: notFound: no view \"nothing\" (\(path))\n")
        #expect(try Tool.run(["view", "drop", path]).status == 2)
        try Tool.expectVerifies(path)
    }
}
