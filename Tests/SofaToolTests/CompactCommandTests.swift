import Foundation
import Sofa
import SofaTestSupport
import Testing

/// `sofa compact`: every document survives (dumps before and after are identical), a file with updates shrinks,
/// and a compaction killed mid-way leaves the original intact and no stray file after the next open.
@Suite struct CompactCommandTests {
    /// A database whose documents were each written three times, with some deleted.
    static func updatedDatabase(_ dir: Tool.Directory, count: Int) throws -> String {
        let path = try Tool.database(in: dir, Tool.documents(count), batch: 500)
        for round in 1...2 {
            let docs = try Tool.run(["dump", path, "--json"]).jsonLines()
            let updates = docs.map { doc in
                let id = doc["id"] as! String, rev = doc["rev"] as! String
                let deleted = round == 2 && id.hasSuffix("7") ? ",\"_deleted\":true" : ""
                return "{\"_id\":\"\(id)\",\"_rev\":\"\(rev)\",\"round\":\(round)\(deleted)}"
            }.joined(separator: "\n")
            let result = try Tool.run(["load", path, "-", "--batch", "500", "--durability", "none"], input: updates)
            #expect(result.status == 0, "\(result.error)")
        }
        return path
    }

    /// Whether `reported` (a size up to the newest commit's end) is `onDisk` less at most a zero tail, which is
    /// shorter than the preallocation step (1024 KiB) plus 4 KiB (FORMAT.md §11).
    static func isFileUpToItsTail(_ reported: Int?, _ onDisk: Int) -> Bool {
        guard let reported else { return false }
        return reported <= onDisk && onDisk - reported < (1024 + 4) << 10
    }

    @Test func compactKeepsEveryDocumentAndShrinksTheFile() throws {
        let dir = Tool.Directory()
        let path = try Self.updatedDatabase(dir, count: 2000)
        let dumpBefore = try Tool.run(["dump", path, "--json"]).output
        let changesBefore = try Tool.run(["dump", path, "--by-seq", "--json"]).output
        let sizeBefore = Tool.fileSize(path + "/docs")

        let result = try Tool.run(["compact", path, "--json"])
        #expect(result.status == 0, "\(result.error)")
        let summary = try #require(result.jsonLines().first)
        // Sizes count up to the newest commit's end: a zero tail after it (FORMAT.md §11) is not counted.
        #expect(Self.isFileUpToItsTail(summary["sizeBefore"] as? Int, sizeBefore))
        let sizeAfter = try #require(summary["sizeAfter"] as? Int)
        #expect(Self.isFileUpToItsTail(sizeAfter, Tool.fileSize(path + "/docs")))
        #expect(sizeAfter < sizeBefore / 2, "\(sizeBefore) → \(sizeAfter)")
        #expect(summary["documents"] as? Int == 2000)
        #expect(summary["lastSequence"] as? Int == 6000)

        #expect(try Tool.run(["dump", path, "--json"]).output == dumpBefore)
        #expect(try Tool.run(["dump", path, "--by-seq", "--json"]).output == changesBefore)
        let info = try Tool.run(["info", path, "--json"]).jsonLines()
        #expect(info[1]["fragmentation"] as? Double ?? 1 < 0.01)
        #expect(info[0]["deleted"] as? Int == 200)
        try Tool.expectVerifies(path)

        let table = try Tool.run(["compact", path])
        #expect(table.status == 0)
        #expect(table.lines[0].hasPrefix("compacted \(path)/docs: 2,000 documents"))
        #expect(table.lines[1].split(separator: " ") == ["file", "before", "after", "saved"])
    }

    @Test func killedCompactionLeavesTheOriginalIntact() throws {
        let dir = Tool.Directory()
        let path = try Self.updatedDatabase(dir, count: 20000)
        let dumpBefore = try Tool.run(["dump", path, "--json"]).output
        var killedMidway = 0
        let delays: [UInt32] = [2_000, 10_000, 30_000, 60_000, 120_000, 400_000, 1_500_000]
        for delay in delays {
            let original = try Data(contentsOf: URL(fileURLWithPath: path + "/docs"))
            let killed = try runAndKill(executable: Tool.sofa, arguments: ["compact", path], delay: delay).killed
            let current = try Data(contentsOf: URL(fileURLWithPath: path + "/docs"))
            if killed {
                // Killed: either before the rename (the original, byte for byte) or after (a complete new file).
                if current == original { killedMidway += 1 }
            }
            // The next writable open (load of nothing) removes any temporary file.
            #expect(try Tool.run(["load", path, "-"], input: "").status == 0)
            #expect(!FileManager.default.fileExists(atPath: path + "/docs.compact"), "delay \(delay)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: path) == ["docs"])
            #expect(try Tool.run(["dump", path, "--json"]).output == dumpBefore, "delay \(delay)")
            try Tool.expectVerifies(path)
        }
        print("compactions killed before their rename: \(killedMidway) of \(delays.count)")
        #expect(killedMidway > 0, "no kill landed mid-way; the test proved nothing")
    }

    /// A database of `count` documents loaded once and updated twice, with the declarative view `byName`
    /// (sum of `n`) brought up to date after each round, so its index file holds replaced nodes.
    static func updatedDatabaseWithView(_ dir: Tool.Directory, count: Int) throws -> String {
        let path = try Tool.database(in: dir, Tool.documents(count), batch: 500)
        try Tool.createView(path, ["byName", "--key", "name,n", "--value", "n", "--reduce", "_sum"])
        for round in 1...2 {
            let docs = try Tool.run(["dump", path, "--json"]).jsonLines()
            let updates = docs.map { doc in
                let id = doc["id"] as! String, rev = doc["rev"] as! String
                let n = (doc["body"] as? [String: Any])?["n"] as? Int ?? 0
                return "{\"_id\":\"\(id)\",\"_rev\":\"\(rev)\",\"name\":\"name \((n + round) % 37)\",\"n\":\(n)}"
            }.joined(separator: "\n")
            let result = try Tool.run(["load", path, "-", "--batch", "500", "--durability", "none"], input: updates)
            #expect(result.status == 0, "\(result.error)")
            // The query brings the view up to date (one more commit in its file).
            #expect(try Tool.run(["query", path, "byName", "--limit", "1"]).status == 0)
        }
        return path
    }

    @Test func compactViewKeepsEveryRowAndShrinksItsFile() throws {
        let dir = Tool.Directory()
        let path = try Self.updatedDatabaseWithView(dir, count: 3000)
        let file = path + "/views/byName"
        let rowsBefore = try Tool.run(["dump", path, "--view", "byName", "--json"]).output
        let groupsBefore = try Tool.run(["query", path, "byName", "--group-level", "1", "--json"]).output
        let docsBefore = Tool.fileSize(path + "/docs")
        let sizeBefore = Tool.fileSize(file)

        let result = try Tool.run(["compact", path, "--view", "byName", "--json"])
        #expect(result.status == 0, "\(result.error)")
        let lines = result.jsonLines()
        #expect(lines.count == 1)
        let summary = try #require(lines.first)
        #expect(summary["file"] as? String == "views/byName" && summary["view"] as? String == "byName")
        #expect(Self.isFileUpToItsTail(summary["sizeBefore"] as? Int, sizeBefore))
        let sizeAfter = try #require(summary["sizeAfter"] as? Int)
        #expect(Self.isFileUpToItsTail(sizeAfter, Tool.fileSize(file)))
        #expect(sizeAfter < sizeBefore / 2, "\(sizeBefore) → \(sizeAfter)")
        #expect(summary["rows"] as? Int == 3000 && summary["lastSequenceIndexed"] as? Int == 9000)
        #expect(Tool.fileSize(path + "/docs") == docsBefore, "--view leaves the document file alone")

        #expect(try Tool.run(["dump", path, "--view", "byName", "--json"]).output == rowsBefore)
        #expect(try Tool.run(["query", path, "byName", "--group-level", "1", "--json"]).output == groupsBefore)
        let info = try Tool.run(["info", path, "--json"]).jsonLines()
        let view = try #require(info.first { $0["view"] as? String == "byName" })
        #expect(view["fragmentation"] as? Double ?? 1 < 0.01)
        #expect(try FileManager.default.contentsOfDirectory(atPath: path + "/views") == ["byName"])
        try Tool.expectVerifies(path)

        let table = try Tool.run(["compact", path, "--view", "byName"])
        #expect(table.status == 0)
        #expect(table.lines[0].hasPrefix("compacted \(file): 3,000 rows, last sequence indexed 9000"))
        #expect(table.lines[3].hasPrefix("views/byName "))
        #expect(try Tool.run(["compact", path, "--view", "nope"]).error.hasPrefix("sofa: notFound: no view \"nope\""))
    }

    @Test func compactWithoutViewCompactsEveryFile() throws {
        let dir = Tool.Directory()
        let path = try Self.updatedDatabaseWithView(dir, count: 1000)
        try Tool.createView(path, ["byN", "--key", "n"])
        let rowsBefore = try Tool.run(["dump", path, "--view", "byName", "--json"]).output
        let result = try Tool.run(["compact", path, "--json"])
        #expect(result.status == 0, "\(result.error)")
        let files = result.jsonLines()
        #expect(files.map { $0["file"] as? String } == ["docs", "views/byN", "views/byName"])
        #expect(files.allSatisfy { ($0["sizeAfter"] as? Int ?? .max) <= ($0["sizeBefore"] as? Int ?? 0) })
        #expect(files[2]["rows"] as? Int == 1000)
        #expect(try Tool.run(["dump", path, "--view", "byName", "--json"]).output == rowsBefore)
        let table = try Tool.run(["compact", path])
        #expect(table.lines[0].contains("; 2 view index files  ["), "\(table.lines)")
        #expect(table.lines.count == 6)  // summary, header, rule, three files
        try Tool.expectVerifies(path)
    }

    @Test func viewWithACustomReduceIsSkippedAndSaidSo() throws {
        let dir = Tool.Directory()
        let path = dir.path + "/custom.sofa"
        // An app's view with a custom reduce: the tool cannot recompute its reductions.
        try makeCustomReduceDatabase(at: path)
        let size = Tool.fileSize(path + "/views/custom")
        let json = try Tool.run(["compact", path, "--json"])
        #expect(json.status == 0, "\(json.error)")
        let lines = json.jsonLines()
        #expect(lines.map { $0["file"] as? String } == ["docs", "views/custom"])
        #expect((lines.last?["skipped"] as? String)?.contains("custom reduce") == true)
        let table = try Tool.run(["compact", path])
        #expect(table.lines.last?.hasPrefix("skipped views/custom: ") == true, "\(table.lines)")
        #expect(Tool.fileSize(path + "/views/custom") == size)
        let direct = try Tool.run(["compact", path, "--view", "custom"])
        #expect(direct.status == 1
                && direct.error.hasPrefix("sofa: invalidArgument: view \"custom\" stores reductions"))
    }

    @Test func killedViewCompactionLeavesTheIndexIntact() throws {
        let dir = Tool.Directory()
        let path = try Self.updatedDatabaseWithView(dir, count: 20000)
        let file = path + "/views/byName"
        let rowsBefore = try Tool.run(["dump", path, "--view", "byName", "--json"]).output
        var killedMidway = 0
        let delays: [UInt32] = [2_000, 10_000, 30_000, 60_000, 120_000, 400_000, 1_500_000]
        for delay in delays {
            let original = try Data(contentsOf: URL(fileURLWithPath: file))
            let killed = try runAndKill(executable: Tool.sofa, arguments: ["compact", path, "--view", "byName"],
                                        delay: delay).killed
            let current = try Data(contentsOf: URL(fileURLWithPath: file))
            if killed && current == original { killedMidway += 1 }
            // The next writable open (load of nothing) removes any temporary file.
            #expect(try Tool.run(["load", path, "-"], input: "").status == 0)
            #expect(try FileManager.default.contentsOfDirectory(atPath: path + "/views") == ["byName"],
                    "delay \(delay)")
            #expect(try Tool.run(["dump", path, "--view", "byName", "--json"]).output == rowsBefore, "delay \(delay)")
            try Tool.expectVerifies(path)
        }
        print("view compactions killed before their rename: \(killedMidway) of \(delays.count)")
        #expect(killedMidway > 0, "no kill landed mid-way; the test proved nothing")
    }

    @Test func errorsAndUsage() throws {
        let dir = Tool.Directory()
        let missing = try Tool.run(["compact", dir.path + "/none.sofa"])
        #expect(missing.status == 1)
        #expect(missing.error.hasPrefix("sofa: notFound"))
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/none.sofa"))
        #expect(try Tool.run(["compact"]).status == 2)
    }
}
