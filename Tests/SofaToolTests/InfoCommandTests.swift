import Foundation
import Testing

/// `sofa info`: the table's shape and counts, the JSON lines' fields, and the exit codes.
@Suite struct InfoCommandTests {
    @Test func tableShowsCountsFileAndTrees() throws {
        let dir = Tool.Directory()
        let path = try Tool.database(in: dir, Tool.documents(500), batch: 100)
        let result = try Tool.run(["info", path])
        #expect(result.status == 0, "\(result.error)")
        let lines = result.lines
        #expect(lines.first == "Database \(path)")
        #expect(lines.contains("  documents      500"))
        #expect(lines.contains("  deleted        0"))
        #expect(lines.contains("  last sequence  500"))
        let header = try #require(lines.first { $0.hasPrefix("file") })
        #expect(header.split(separator: " ") == ["file", "size", "live", "bytes", "fragmentation", "commit"])
        let trees = try #require(lines.firstIndex { $0.hasPrefix("tree") })
        #expect(lines[trees].split(separator: " ", omittingEmptySubsequences: true) ==
                ["tree", "rows", "depth", "nodes", "leaves", "inner", "bytes", "avg", "fill", "compression"])
        #expect(lines[trees + 2].hasPrefix("docs/by-id"))
        #expect(lines[trees + 3].hasPrefix("docs/by-sequence"))
        #expect(lines[trees + 2].split(separator: " ", omittingEmptySubsequences: true)[1] == "500")
    }

    /// Small commits are log records (FORMAT.md §10.1.7): info counts them, and their bytes are live.
    @Test func theCommitLogIsReported() throws {
        let dir = Tool.Directory()
        let path = try Tool.database(in: dir, Tool.documents(30), batch: 10)
        let objects = try Tool.run(["info", path, "--json"]).jsonLines()
        let file = try #require(objects.first { $0["file"] as? String == "docs" })
        #expect(file["logRecords"] as? Int == 3 && file["pendingDocuments"] as? Int == 30)
        // Live: the records and the newest header; garbage: only the earlier commits' headers.
        let size = try #require(file["size"] as? Int), live = try #require(file["liveBytes"] as? Int)
        #expect(live > size * 2 / 3 && live < size, "\(live) of \(size)")
        let table = try Tool.run(["info", path])
        #expect(table.lines.contains("  commit log     3 records, 30 documents not yet in the trees"))
    }

    @Test func jsonLinesCarryEveryStatistic() throws {
        let dir = Tool.Directory()
        let path = try Tool.database(in: dir, Tool.documents(3000), batch: 1000)
        let result = try Tool.run(["info", path, "--json"])
        #expect(result.status == 0, "\(result.error)")
        let objects = result.jsonLines()
        #expect(objects.count == 4)
        let summary = try #require(objects.first)
        #expect(summary["documents"] as? Int == 3000)
        #expect(summary["deleted"] as? Int == 0)
        #expect(summary["lastSequence"] as? Int == 3000)
        #expect(summary["commit"] as? Int == 4)  // the empty first commit, then 3 batches
        let file = objects[1]
        let size = try #require(file["size"] as? Int), live = try #require(file["liveBytes"] as? Int)
        #expect(size == Tool.fileSize(path + "/docs"))
        #expect(live > 0 && live <= size)
        // Three batches rewrote the trees' right edges: some of the file is garbage.
        #expect((file["fragmentation"] as? Double ?? 0) > 0)
        #expect(file["logRecords"] as? Int == 0 && file["pendingDocuments"] as? Int == 0, "batches of 1,000 fold")
        for (object, name) in zip(objects[2...], ["by-id", "by-sequence"]) {
            #expect(object["tree"] as? String == name)
            #expect(object["rows"] as? Int == 3000)
            #expect((object["depth"] as? Int ?? 0) >= 2)
            let leaves = object["leafNodes"] as? Int ?? -1, inner = object["innerNodes"] as? Int ?? -1
            #expect(object["nodes"] as? Int == leaves + inner)
            #expect((object["averageFill"] as? Double ?? 0) > 0.3)
            #expect((object["compressionRatio"] as? Double ?? 0) > 1)
        }
        try Tool.expectVerifies(path)
    }

    @Test func viewsAreListedWithTheirFileAndTrees() throws {
        let dir = Tool.Directory()
        let path = try Tool.database(in: dir, Tool.tracks)
        try Tool.createView(path, ["byArtist", "--key", "artist", "--value", "duration", "--reduce", "_sum"])
        try Tool.createView(path, ["byYear", "--key", "year", "--type", "track"])
        // One more document: both views are behind it.
        #expect(try Tool.run(["load", path, "-"], input: "{\"_id\":\"late\",\"artist\":\"Zed\"}\n").status == 0)

        let table = try Tool.run(["info", path])
        #expect(table.status == 0, "\(table.error)")
        let lines = table.lines
        let views = try #require(lines.firstIndex { $0.hasPrefix("view ") })
        #expect(lines[views].split(separator: " ") == ["view", "rows", "indexed", "seq", "version", "reduce", "stale"])
        #expect(lines[views + 2].split(separator: " ", omittingEmptySubsequences: true) ==
                ["byArtist", "8", "9", "(declarative)", "_sum", "stale"])
        #expect(lines[views + 3].split(separator: " ", omittingEmptySubsequences: true) ==
                ["byYear", "8", "9", "(declarative)", "-", "stale"])
        let files = try #require(lines.firstIndex { $0.hasPrefix("file ") })
        #expect(lines[files + 2].hasPrefix("docs "))
        let byArtistFile = lines[files + 3].split(separator: " ", omittingEmptySubsequences: true)
        #expect(byArtistFile.first == "views/byArtist" && byArtistFile.count == 6)  // size, live, "N.N", "%", commit
        // Sizes count up to the newest commit; a small durable commit leaves up to 64 KiB of zeros after it
        // (FORMAT.md §6), which the file on disk includes.
        let onDisk = Tool.fileSize(path + "/views/byArtist")
        let shown = Int(byArtistFile[1].filter(\.isNumber)) ?? -1
        #expect(shown > 0 && shown <= onDisk && onDisk - shown <= 64 << 10, "\(shown) of \(onDisk) bytes")
        #expect(lines[files + 4].hasPrefix("views/byYear "))
        let trees = try #require(lines.firstIndex { $0.hasPrefix("tree ") })
        #expect(lines[(trees + 2)...].prefix(6).map { String($0.split(separator: " ")[0]) } ==
                ["docs/by-id", "docs/by-sequence", "views/byArtist/rows", "views/byArtist/back-index",
                 "views/byYear/rows", "views/byYear/back-index"])

        let objects = try Tool.run(["info", path, "--json"]).jsonLines()
        #expect(objects.count == 2 + 2 + 6)  // summary, docs file, two view objects, six trees
        #expect(objects[0]["views"] as? Int == 2)
        let view = objects[2]
        #expect(view["file"] as? String == "views/byArtist" && view["view"] as? String == "byArtist")
        #expect(view["rows"] as? Int == 8 && view["lastSequenceIndexed"] as? Int == 9)
        #expect((view["version"] as? String)?.hasPrefix("definition:") == true)
        #expect(view["reduce"] as? String == "_sum" && view["declarative"] as? Bool == true)
        #expect(view["stale"] as? Bool == true)
        #expect(view["size"] as? Int == shown)
        let live = try #require(view["liveBytes"] as? Int)
        #expect(live > 0 && live <= view["size"] as? Int ?? 0)
        #expect(view["fragmentation"] is Double || view["fragmentation"] is Int)
        #expect(objects[3]["reduce"] is NSNull)
        for (object, tree) in zip(objects[6...], ["rows", "back-index", "rows", "back-index"]) {
            #expect((object["file"] as? String)?.hasPrefix("views/") == true)
            #expect(object["tree"] as? String == tree)
            #expect(object["rows"] as? Int == 8)
            #expect(object["depth"] as? Int == 1 && object["nodes"] as? Int == 1)
            #expect((object["averageFill"] as? Double ?? 0) > 0)
            #expect(object["compressionRatio"] != nil && object["storedBytes"] != nil && object["rawBytes"] != nil)
        }
        try Tool.expectVerifies(path)
    }

    @Test func exitCodes() throws {
        let dir = Tool.Directory()
        let missing = try Tool.run(["info", dir.path + "/nothing.sofa"])
        #expect(missing.status == 1)
        #expect(missing.error.split(separator: "\n").count == 1)
        #expect(missing.error.contains("notFound"))
        let usage = try Tool.run(["info"])
        #expect(usage.status == 2)
        let flag = try Tool.run(["info", dir.path, "--no-such-flag"])
        #expect(flag.status == 2)
    }
}
