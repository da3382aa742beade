import Foundation
import Testing

/// `sofa query`: every query flag against declarative views over a few tracks, all-documents modes, the JSON
/// lines' shape, staleness, and usage errors.
@Suite struct QueryCommandTests {
    /// A database of ``Tool/tracks`` with `byHierarchy` (genre, artist, album title, title → duration, `_sum`,
    /// tracks only) and `byYear` (year, `_count`).
    private func tracksDatabase(_ dir: Tool.Directory) throws -> String {
        let path = try Tool.database(in: dir, Tool.tracks)
        try Tool.createView(path, ["byHierarchy", "--key", "genre,artist,album.title,title", "--value", "duration",
                                   "--reduce", "_sum", "--type", "track"])
        try Tool.createView(path, ["byYear", "--key", "year", "--reduce", "_count"])
        return path
    }

    /// Runs `sofa query --json …` and returns its lines, expecting success.
    private func query(_ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) throws
        -> [[String: Any]] {
        let result = try Tool.run(["query"] + arguments + ["--json"])
        #expect(result.status == 0, "\(arguments): \(result.error)", sourceLocation: sourceLocation)
        return result.jsonLines(sourceLocation: sourceLocation)
    }

    private func ids(_ rows: [[String: Any]]) -> [String?] { rows.map { $0["id"] as? String } }

    @Test func reduceAndGroupLevels() throws {
        let dir = Tool.Directory()
        let path = try tracksDatabase(dir)
        let total = try query([path, "byHierarchy"])
        #expect(total.count == 1)
        #expect(total.first?["value"] as? Int == 2464)
        #expect(total.first?["id"] == nil, "reduced rows have no id")
        let genres = try query([path, "byHierarchy", "--group-level", "1"])
        #expect(genres.map { $0["key"] as? [String] } == [["Jazz"], ["Pop"], ["Rock"]])
        #expect(genres.map { $0["value"] as? Int } == [1143, 231, 1090])
        let artists = try query([path, "byHierarchy", "--group-level", "2"])
        #expect(artists.map { $0["key"] as? [String] } ==
                [["Jazz", "John Coltrane"], ["Jazz", "Miles Davis"], ["Pop", "ABBA"], ["Rock", "Led Zeppelin"],
                 ["Rock", "Queen"]])
        #expect(artists.map { $0["value"] as? Int } == [261, 882, 231, 516, 574])
        let years = try query([path, "byYear", "--group-level", "1", "--keys", "[1959,1976]"])
        #expect(years.map { $0["key"] as? Int } == [1959, 1976])
        #expect(years.map { $0["value"] as? Int } == [2, 1])
        // The table: header, rule, rows, the count.
        let table = try Tool.run(["query", path, "byHierarchy", "--group-level", "1"])
        #expect(table.status == 0)
        #expect(table.lines.first?.split(separator: " ") == ["key", "value"])
        #expect(table.lines.contains("[\"Jazz\"]  1143"))
        #expect(table.lines.last == "3 rows (index rows 8, sequence 9)")
        try Tool.expectVerifies(path)
    }

    @Test func rangesPrefixMatchAndDocIDs() throws {
        let dir = Tool.Directory()
        let path = try tracksDatabase(dir)
        let rock = try query([path, "byHierarchy", "--map-only", "--start-key", "[\"Rock\"]", "--end-key", "[\"Rock\"]",
                              "--prefix-match-level", "1"])
        #expect(ids(rock) == ["track6", "track7", "track4", "track5"])
        #expect(rock.first?["value"] as? Int == 296)
        #expect((rock.first?["key"] as? [String])?.last == "Black Dog")
        let range = try query([path, "byYear", "--map-only", "--start-key", "1960", "--end-key", "1975",
                               "--inclusive-end", "false"])
        #expect(ids(range) == ["track3", "track6", "track7"])
        let exclusive = try query([path, "byYear", "--map-only", "--start-key", "1959", "--end-key", "1960",
                                   "--inclusive-start", "false"])
        #expect(ids(exclusive) == ["track3"])
        let byDoc = try query([path, "byYear", "--map-only", "--start-key", "1959", "--start-key-doc-id", "track2",
                               "--end-key", "1971", "--end-key-doc-id", "track6"])
        #expect(ids(byDoc) == ["track2", "track3", "track6"])
        try Tool.expectVerifies(path)
    }

    @Test func descendingLimitSkipKeysAndDocs() throws {
        let dir = Tool.Directory()
        let path = try tracksDatabase(dir)
        let page = try query([path, "byYear", "--map-only", "--descending", "--skip", "1", "--limit", "3"])
        #expect(page.map { $0["key"] as? Int } == [1975, 1975, 1971])
        #expect(ids(page) == ["track5", "track4", "track7"])
        #expect(page.allSatisfy { $0.keys.sorted() == ["id", "key", "value"] })
        #expect(page.first?["value"] is NSNull)
        let keyed = try query([path, "byYear", "--map-only", "--keys", "[1976,1959]"])
        #expect(ids(keyed) == ["track1", "track2", "track8"])
        let docs = try query([path, "byYear", "--map-only", "--keys", "[1960]", "--include-docs"])
        let doc = try #require(docs.first?["doc"] as? [String: Any])
        #expect(doc["_id"] as? String == "track3")
        #expect(doc["title"] as? String == "Naima")
        #expect((doc["album"] as? [String: Any])?["title"] as? String == "Giant Steps")
        try Tool.expectVerifies(path)
    }

    @Test func allDocumentsModes() throws {
        let dir = Tool.Directory()
        let path = try tracksDatabase(dir)
        let all = try query([path, "--all-docs"])
        #expect(ids(all) == ["playlist1"] + (1...8).map { "track\($0)" })
        let rev = try #require((all[1]["value"] as? [String: Any])?["rev"] as? String)
        let tombstone = "{\"_id\":\"track1\",\"_rev\":\"\(rev)\",\"_deleted\":true}\n"
        let delete = try Tool.run(["load", path, "-"], input: tombstone)
        #expect(delete.status == 0, "\(delete.error)")
        #expect(ids(try query([path, "--all-docs", "--limit", "2"])) == ["playlist1", "track2"])
        let deleted = try query([path, "--all-docs", "--all-docs-mode", "include-deleted", "--limit", "2"])
        #expect(ids(deleted) == ["playlist1", "track1"])
        #expect((deleted[1]["value"] as? [String: Any])?["deleted"] as? Bool == true)
        let bySequence = try query([path, "--all-docs", "--all-docs-mode", "by-sequence", "--start-key", "8"])
        #expect(bySequence.map { $0["key"] as? Int } == [8, 9])
        #expect(ids(bySequence) == ["track8", "playlist1"])
        #expect(try query([path, "--all-docs", "--all-docs-mode", "only-conflicts"]).isEmpty)
        let prefixed = try query([path, "--all-docs", "--start-key", "\"track\"", "--end-key", "\"track\"",
                                  "--prefix-match-level", "1", "--descending", "--include-docs"])
        #expect(ids(prefixed) == (2...8).reversed().map { "track\($0)" })
        #expect((prefixed.first?["doc"] as? [String: Any])?["title"] as? String == "Dancing Queen")
        // The deletion reaches the view at the next default query.
        #expect(try query([path, "byYear"]).first?["value"] as? Int == 7)
        try Tool.expectVerifies(path)
    }

    @Test func staleModes() throws {
        let dir = Tool.Directory()
        let path = try tracksDatabase(dir)
        let more = "{\"_id\":\"track9\",\"type\":\"track\",\"genre\":\"Pop\",\"artist\":\"ABBA\"," +
            "\"album\":{\"title\":\"Arrival\"},\"title\":\"Tiger\",\"year\":1976,\"duration\":200}\n"
        #expect(try Tool.run(["load", path, "-"], input: more).status == 0)
        let index = path + "/views/byYear"
        let size = Tool.fileSize(index)
        // ok: the index as it is, read-only: nothing written.
        #expect(try query([path, "byYear", "--stale", "ok"]).first?["value"] as? Int == 8)
        #expect(Tool.fileSize(index) == size)
        // update-after: the old answer, then the update.
        #expect(try query([path, "byYear", "--stale", "update-after"]).first?["value"] as? Int == 8)
        #expect(try query([path, "byYear", "--stale", "ok"]).first?["value"] as? Int == 9)
        // Default: updated first.
        let pop = try query([path, "byHierarchy", "--group-level", "1", "--start-key", "[\"Pop\"]",
                             "--end-key", "[\"Pop\"]", "--prefix-match-level", "1"])
        #expect(pop.first?["value"] as? Int == 431)
        try Tool.expectVerifies(path)
    }

    @Test func usageErrorsAndMissingViews() throws {
        let dir = Tool.Directory()
        let path = try tracksDatabase(dir)
        let badKey = try Tool.run(["query", path, "byYear", "--start-key", "{oops"])
        #expect(badKey.status == 2)
        #expect(badKey.error.contains("--start-key"), "\(badKey.error)")
        for arguments in [["byYear", "--end-key", "nope"], ["byYear", "--keys", "1959"], ["byYear", "--keys", "[1,"],
                          ["byYear", "--limit", "-1"], ["byYear", "--stale", "sometimes"], ["byYear", "--all-docs"],
                          ["--all-docs", "--group-level", "1"], ["byYear", "--all-docs-mode", "by-sequence"], [],
                          ["byYear", "--inclusive-end", "maybe"]] {
            let result = try Tool.run(["query", path] + arguments)
            #expect(result.status == 2, "\(arguments): \(result.error)")
        }
        let keys = try Tool.run(["query", path, "byYear", "--keys", "{\"a\":1}"])
        #expect(keys.error.contains("--keys"))
        let missing = try Tool.run(["query", path, "noSuchView"])
        #expect(missing.status == 1)
        #expect(missing.error == "sofa: notFound: no view \"noSuchView\" (\(path))\n")
        let noDatabase = try Tool.run(["query", dir.path + "/none.sofa", "byYear"])
        #expect(noDatabase.status == 1)
        try Tool.expectVerifies(path)
    }
}
