import Foundation
import Testing

/// `sofa view create`: scalar and array keys, dotted paths into nested objects, value, reduce and type, the
/// index built at once, redefinition, and usage errors.
@Suite struct ViewCreateCommandTests {
    @Test func scalarArrayAndDottedKeys() throws {
        let dir = Tool.Directory()
        let path = try Tool.database(in: dir, Tool.tracks)
        let created = try Tool.run(["view", "create", path, "byAlbum", "--key", "album.title", "--value", "album.year",
                                    "--type", "track"])
        #expect(created.status == 0, "\(created.error)")
        #expect(created.output.hasPrefix("created view byAlbum: key album.title, value album.year, reduce -, " +
                                         "type track; indexed 8 rows to sequence 9"), "\(created.output)")
        let albums = try Tool.run(["query", path, "byAlbum", "--json", "--limit", "1"]).jsonLines()
        #expect(albums.first?["key"] as? String == "A Night at the Opera", "a dotted path reads the nested object")
        #expect(albums.first?["value"] as? Int == 1975)

        let json = try Tool.run(["view", "create", path, "byArtistYear", "--key", "artist,year", "--reduce", "_stats",
                                 "--value", "duration", "--json"])
        #expect(json.status == 0, "\(json.error)")
        let summary = try #require(json.jsonLines().first)
        #expect(summary["view"] as? String == "byArtistYear")
        #expect(summary["rows"] as? Int == 8, "the playlist has no artist")
        #expect(summary["lastSequenceIndexed"] as? Int == 9)
        let definition = try #require(summary["definition"] as? [String: Any])
        #expect(definition["keyPaths"] as? [String] == ["artist", "year"])
        #expect(definition["reduce"] as? String == "stats")
        let queen = try Tool.run(["query", path, "byArtistYear", "--group-level", "1", "--keys", "[[\"Queen\",1975]]",
                                  "--json"]).jsonLines()
        #expect(queen.count == 1)
        let stats = try #require(queen.first?["value"] as? [String: Any])
        #expect(stats["count"] as? Int == 2)
        #expect(stats["sum"] as? Int == 574)
        #expect(stats["max"] as? Int == 355)
        try Tool.expectVerifies(path)
    }

    @Test func typeFilterAndRedefinition() throws {
        let dir = Tool.Directory()
        let path = try Tool.database(in: dir, Tool.tracks)
        try Tool.createView(path, ["byGenre", "--key", "genre", "--reduce", "_count"])
        func count() throws -> Int? {
            try Tool.run(["query", path, "byGenre", "--keys", "[\"Jazz\"]", "--json"]).jsonLines().first?["value"]
                as? Int
        }
        #expect(try count() == 4, "three Jazz tracks and the Jazz playlist")
        // Redefined with a type: the index is rebuilt.
        try Tool.createView(path, ["byGenre", "--key", "genre", "--reduce", "_count", "--type", "track"])
        #expect(try count() == 3)
        let list = try Tool.run(["view", "list", path, "--json"]).jsonLines()
        #expect(list.count == 1)
        #expect(list.first?["documentType"] as? String == "track")
        try Tool.expectVerifies(path)
    }

    @Test func usageErrors() throws {
        let dir = Tool.Directory()
        let path = try Tool.database(in: dir, Tool.tracks)
        for arguments in [["v"], ["v", "--key", ""], ["v", "--key", "a,,b"], ["v", "--key", "a", "--reduce", "_max"],
                          ["v", "--key", "a", "--value", ""], ["--key", "a"]] {
            let result = try Tool.run(["view", "create", path] + arguments)
            #expect(result.status == 2, "\(arguments): \(result.error)")
        }
        let badName = try Tool.run(["view", "create", path, ".hidden", "--key", "a"])
        #expect(badName.status == 1)
        #expect(badName.error.hasPrefix("sofa: invalidArgument: invalid view name"), "\(badName.error)")
        let missing = try Tool.run(["view", "create", dir.path + "/none.sofa", "v", "--key", "a"])
        #expect(missing.status == 1)
        #expect(missing.error.contains("notFound"))
        #expect(try Tool.run(["view", "list", path, "--json"]).lines.isEmpty)
        try Tool.expectVerifies(path)
    }
}
