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
