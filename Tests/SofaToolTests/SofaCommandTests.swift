import Foundation
import Testing

/// What every verb shares (`SofaCommand`): exit status 0 on success, 1 on a failure, 2 on bad usage, each error
/// one line on standard error; `--json` prints only JSON objects, one per line.
@Suite struct SofaCommandTests {
    /// Expects `result` to have failed with `status` and exactly one error line starting with `sofa: `.
    static func expectOneErrorLine(_ result: Tool.Result, _ status: Int32, _ context: String,
                                   sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(result.exited && result.status == status, "\(context): \(result.status) \(result.error)",
                sourceLocation: sourceLocation)
        let lines = result.error.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == 2 && lines[1].isEmpty, "\(context): one line: \(result.error.debugDescription)",
                sourceLocation: sourceLocation)
        #expect(result.error.hasPrefix("sofa: "), "\(context): \(result.error)", sourceLocation: sourceLocation)
    }

    @Test func badUsageExitsWith2AndOneErrorLine() throws {
        let dir = Tool.Directory()
        let db = dir.path + "/db.sofa"
        let cases: [[String]] = [
            [], ["frob"], ["view"], ["info"], ["info", db, "--bogus"], ["dump", db, "--headers", "--tree"],
            ["dump", db, "--view", "v", "--by-seq"], ["dump", db, "--limit", "-1"], ["verify"], ["load", db],
            ["load", db, "-", "--batch", "0"], ["compact"], ["compact", db, "--view"], ["query", db],
            ["query", db, "v", "--stale", "maybe"], ["query", db, "v", "--start-key", "{"],
            ["view", "create", db, "v"], ["view", "create", db, "v", "--key", ""], ["view", "list"],
            ["view", "drop", db], ["demo", "--docs", "0"], ["demo", dir.path + "/x"],
        ]
        for arguments in cases {
            let result = try Tool.run(arguments, input: "")
            Self.expectOneErrorLine(result, 2, arguments.joined(separator: " "))
            #expect(result.output.isEmpty, "\(arguments): nothing on standard output")
        }
        #expect(!FileManager.default.fileExists(atPath: db), "bad usage creates nothing")
        let missing = try Tool.run(["info"])
        #expect(missing.error == "sofa: Missing expected argument '<database>' (see 'sofa info --help')\n")
    }

    @Test func failuresExitWith1AndOneErrorLine() throws {
        let dir = Tool.Directory()
        let path = try Tool.database(in: dir, Tool.tracks)
        let none = dir.path + "/none.sofa"
        let cases: [[String]] = [
            ["info", none], ["dump", none], ["verify", none], ["compact", none], ["query", none, "v"],
            ["view", "list", none], ["view", "drop", path, "nope"], ["query", path, "nope"],
            ["dump", path, "--view", "nope"], ["compact", path, "--view", "nope"],
            ["load", path, dir.path + "/none.jsonl"],
        ]
        for arguments in cases {
            for json in [false, true] {
                let result = try Tool.run(arguments + (json ? ["--json"] : []))
                Self.expectOneErrorLine(result, 1, arguments.joined(separator: " "))
            }
        }
    }

    @Test func everyVerbPrintsJSONLines() throws {
        let dir = Tool.Directory()
        let path = dir.path + "/db.sofa"
        var runs: [(verb: String, result: Tool.Result)] = []
        func run(_ arguments: [String], input: String? = nil) throws {
            runs.append((arguments.prefix(2).joined(separator: " "),
                         try Tool.run(arguments + ["--json"], input: input)))
        }
        try run(["load", path, "-"], input: Tool.tracks)
        try run(["view", "create", path, "byArtist", "--key", "artist", "--reduce", "_count"])
        try run(["view", "create", path, "spare", "--key", "title"])
        try run(["view", "list", path])
        try run(["info", path])
        try run(["dump", path])
        try run(["dump", path, "--by-seq"])
        try run(["dump", path, "--tree"])
        try run(["dump", path, "--headers"])
        try run(["dump", path, "--view", "byArtist"])
        try run(["query", path, "byArtist", "--group-level", "1"])
        try run(["query", path, "--all-docs"])
        try run(["verify", path])
        try run(["compact", path])
        try run(["compact", path, "--view", "byArtist"])
        try run(["view", "drop", path, "spare"])
        try run(["demo", dir.path + "/demo.sofa", "--docs", "500"])
        for (verb, result) in runs {
            #expect(result.status == 0, "\(verb): \(result.error)")
            #expect(!result.lines.isEmpty, "\(verb) printed nothing")
            #expect(result.jsonLines().count == result.lines.count, "\(verb): every line is a JSON object")
        }
        let demo = try #require(runs.last?.result.jsonLines())
        #expect(demo.first?["tracks"] as? Int == 500)
        #expect(demo.filter { $0["query"] != nil }.count == 7)
        #expect(demo.last?["problems"] as? Int == 0)
    }
}
