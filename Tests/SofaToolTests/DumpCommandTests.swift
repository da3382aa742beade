import Foundation
import Testing

/// `sofa dump`: documents, changes, tree nodes and commit headers, as tables and as JSON lines.
@Suite struct DumpCommandTests {
    static let lines = """
        {"_id":"b","n":2}
        {"_id":"a","n":1,"tags":["x","y"]}
        {"_id":"c","nested":{"k":null}}

        """

    @Test func documentsByIDAsTableAndJSON() throws {
        let dir = Tool.Directory()
        let path = try Tool.database(in: dir, Self.lines)
        let table = try Tool.run(["dump", path])
        #expect(table.status == 0, "\(table.error)")
        #expect(table.lines.count == 5)
        #expect(table.lines[0].split(separator: " ") == ["id", "rev", "seq", "state", "body"])
        #expect(table.lines[2].hasPrefix("a   1-"))
        #expect(table.lines[2].hasSuffix("  2         {\"n\":1,\"tags\":[\"x\",\"y\"]}"))
        #expect(table.lines[3].hasPrefix("b   1-"))
        #expect(table.lines[4].hasSuffix("{\"nested\":{\"k\":null}}"))

        let json = try Tool.run(["dump", path, "--json"])
        let objects = json.jsonLines()
        #expect(objects.map { $0["id"] as? String } == ["a", "b", "c"])
        #expect(objects.map { $0["seq"] as? Int } == [2, 1, 3])
        #expect(objects.allSatisfy {
            ($0["rev"] as? String)?.hasPrefix("1-") == true && $0["deleted"] as? Bool == false
        })
        #expect((objects[0]["body"] as? [String: Any])?["tags"] as? [String] == ["x", "y"])

        let limited = try Tool.run(["dump", path, "--json", "--limit", "2"])
        #expect(limited.jsonLines().count == 2)
    }

    @Test func changesBySequence() throws {
        let dir = Tool.Directory()
        let path = try Tool.database(in: dir, Self.lines)
        let table = try Tool.run(["dump", path, "--by-seq"])
        #expect(table.status == 0)
        #expect(table.lines[0].split(separator: " ") == ["seq", "id", "rev", "state"])
        #expect(table.lines[2...].map { $0.split(separator: " ")[1] } == ["b", "a", "c"])
        let objects = try Tool.run(["dump", path, "--by-seq", "--json"]).jsonLines()
        #expect(objects.map { $0["seq"] as? Int } == [1, 2, 3])
        #expect(objects.map { $0["id"] as? String } == ["b", "a", "c"])
    }

    @Test func treeNodesCoverEveryRow() throws {
        let dir = Tool.Directory()
        let path = try Tool.database(in: dir, Tool.documents(2000))
        for flags in [[String](), ["--by-seq"]] {
            let objects = try Tool.run(["dump", path, "--tree", "--json"] + flags).jsonLines()
            let leaves = objects.filter { $0["kind"] as? String == "leaf" }
            #expect(leaves.reduce(0) { $0 + ($1["entries"] as? Int ?? 0) } == 2000, "\(flags)")
            #expect(objects.first?["level"] as? Int == 1)
            #expect(objects.first?["kind"] as? String == "inner")
            #expect(objects.allSatisfy { ($0["bytes"] as? Int ?? 0) > 16 && ($0["offset"] as? Int ?? 0) > 0 })
            let keys = leaves.map { ($0["firstKey"] as? String ?? "", $0["lastKey"] as? String ?? "") }
            if flags.isEmpty {
                #expect(keys.first?.0 == "doc00000" && keys.last?.1 == "doc01999")
            } else {
                #expect(keys.first?.0 == "1" && keys.last?.1 == "2000")
            }
        }
        let table = try Tool.run(["dump", path, "--tree"])
        #expect(table.lines[0].hasPrefix("docs/by-id: "))
        #expect(table.lines[1].split(separator: " ") ==
                ["offset", "kind", "level", "entries", "bytes", "raw", "first", "key", "last", "key"])
    }

    /// Small commits are log records (FORMAT.md §10.1.7): `--tree` lists them after the by-ID tree's nodes.
    @Test func treeListsTheCommitLog() throws {
        let dir = Tool.Directory()
        let path = try Tool.database(in: dir, Tool.documents(30), batch: 10)
        let objects = try Tool.run(["dump", path, "--tree", "--json"]).jsonLines()
        let log = objects.filter { $0["log"] != nil }
        #expect(objects.filter { $0["kind"] as? String == "leaf" }.isEmpty, "three commits of 10: no tree nodes")
        #expect(log.map { $0["entries"] as? Int } == [10, 10, 10])
        #expect(log.map { $0["firstKey"] as? String } == ["doc00020", "doc00010", "doc00000"])
        #expect(log[0]["previous"] as? Int == log[1]["offset"] as? Int && log[2]["previous"] as? Int == 0)
        let table = try Tool.run(["dump", path, "--tree"])
        #expect(table.lines.contains("docs/log: 3 records of changes not yet in the trees, newest first"))
        let bySequence = try Tool.run(["dump", path, "--tree", "--by-seq", "--json"]).jsonLines()
        #expect(bySequence.allSatisfy { $0["log"] == nil })
    }

    @Test func headersWalkTheCommitChain() throws {
        let dir = Tool.Directory()
        let path = try Tool.database(in: dir, Tool.documents(30), batch: 10)
        let objects = try Tool.run(["dump", path, "--headers", "--json"]).jsonLines()
        #expect(objects.map { $0["commit"] as? Int } == [4, 3, 2, 1])
        #expect(objects.map { $0["lastSequence"] as? Int } == [30, 20, 10, 0])
        for (newer, older) in zip(objects, objects.dropFirst()) {
            #expect(newer["previous"] as? Int == older["offset"] as? Int)
        }
        #expect(objects.last?["previous"] as? Int == 0)
        #expect(objects.first?["end"] as? Int == Tool.fileSize(path + "/docs"))
        let table = try Tool.run(["dump", path, "--headers", "--limit", "2"])
        #expect(table.status == 0)
        #expect(table.lines.count == 4)
        #expect(table.lines[0].split(separator: " ") ==
                ["commit", "offset", "previous", "end", "time", "(UTC)", "last", "seq", "by-id", "rows", "by-seq",
                 "rows"])
    }

    @Test func badUsageExitsWith2() throws {
        let dir = Tool.Directory()
        let path = try Tool.database(in: dir, Self.lines)
        let both = try Tool.run(["dump", path, "--headers", "--tree"])
        #expect(both.status == 2)
        #expect(both.error.contains("--headers cannot be combined"))
        #expect(try Tool.run(["dump", path, "--limit", "-1"]).status == 2)
        #expect(try Tool.run(["dump"]).status == 2)
    }

    @Test func viewRowsNodesAndHeaders() throws {
        let dir = Tool.Directory()
        let path = try Tool.database(in: dir, Tool.tracks)
        try Tool.createView(path, ["byArtist", "--key", "artist", "--value", "duration", "--reduce", "_count"])
        let table = try Tool.run(["dump", path, "--view", "byArtist"])
        #expect(table.status == 0, "\(table.error)")
        #expect(table.lines[0].split(separator: " ") == ["key", "value", "id"])
        #expect(table.lines.count == 2 + 8)
        #expect(table.lines[2].split(separator: " ", omittingEmptySubsequences: true) == ["\"ABBA\"", "231", "track8"])

        let rows = try Tool.run(["dump", path, "--view", "byArtist", "--json"]).jsonLines()
        #expect(rows.map { $0["key"] as? String } == ["ABBA", "John Coltrane", "Led Zeppelin", "Led Zeppelin",
                                                      "Miles Davis", "Miles Davis", "Queen", "Queen"])
        #expect(rows.map { $0["id"] as? String }.prefix(2) == ["track8", "track3"])
        #expect(rows.first?["value"] as? Int == 231)
        #expect(try Tool.run(["dump", path, "--view", "byArtist", "--json", "--limit", "3"]).jsonLines().count == 3)

        let nodes = try Tool.run(["dump", path, "--view", "byArtist", "--tree", "--json"]).jsonLines()
        #expect(nodes.count == 1)
        #expect(nodes.first?["file"] as? String == "views/byArtist" && nodes.first?["tree"] as? String == "rows")
        #expect(nodes.first?["kind"] as? String == "leaf" && nodes.first?["entries"] as? Int == 8)
        let nodeTable = try Tool.run(["dump", path, "--view", "byArtist", "--tree"])
        #expect(nodeTable.lines.first == "views/byArtist/rows: 1 nodes, parents before children")

        let headers = try Tool.run(["dump", path, "--view", "byArtist", "--headers", "--json"]).jsonLines()
        #expect(headers.first?["lastSequence"] as? Int == 9)
        #expect(headers.map { $0["commit"] as? Int } == [3, 2, 1])
        let headerTable = try Tool.run(["dump", path, "--view", "byArtist", "--headers"])
        #expect(headerTable.lines[0].split(separator: " ", omittingEmptySubsequences: true).suffix(4) ==
                ["seq", "rows", "back-index", "rows"])

        let missing = try Tool.run(["dump", path, "--view", "nope"])
        #expect(missing.status == 1 && missing.error.hasPrefix("sofa: notFound: no view \"nope\""))
        let usage = try Tool.run(["dump", path, "--view", "byArtist", "--by-seq"])
        #expect(usage.status == 2)
        #expect(usage.error.contains("--view cannot be combined with --by-seq"))
    }
}
