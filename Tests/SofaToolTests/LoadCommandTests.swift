import Foundation
import Testing

/// `sofa load`: JSON lines in, committed in batches; a bad line stops the load with its number and keeps
/// everything before it.
@Suite struct LoadCommandTests {
    @Test func loadsFileAndStandardInput() throws {
        let dir = Tool.Directory()
        let file = dir.path + "/in.jsonl"
        try (Tool.documents(250) + "\n   \n{\"no\":\"id\"}").write(toFile: file, atomically: true, encoding: .utf8)
        let path = dir.path + "/db.sofa"
        let result = try Tool.run(["load", path, file, "--batch", "100", "--durability", "none"])
        #expect(result.status == 0, "\(result.error)")
        #expect(result.output.hasPrefix("loaded 251 documents in "))
        #expect(result.output.contains("batches of 100, durability none"))
        // 251 documents in batches of 100: three commits after the empty first one.
        let headers = try Tool.run(["dump", path, "--headers", "--json"]).jsonLines()
        #expect(headers.map { $0["lastSequence"] as? Int } == [251, 200, 100, 0])
        let docs = try Tool.run(["dump", path, "--json"]).jsonLines()
        #expect(docs.count == 251)
        let doc42 = docs.first { $0["id"] as? String == "doc00042" }
        #expect((doc42?["body"] as? [String: Any])?["n"] as? Int == 42)
        #expect(docs.contains { ($0["body"] as? [String: Any])?["no"] as? String == "id" })

        // Standard input, JSON summary, updates with _rev.
        let rev = try #require(docs.first { $0["id"] as? String == "doc00001" }?["rev"] as? String)
        let update = try Tool.run(["load", path, "-", "--json"],
                                  input: "{\"_id\":\"doc00001\",\"_rev\":\"\(rev)\",\"n\":-1}\n{\"_id\":\"new\"}\n")
        #expect(update.status == 0, "\(update.error)")
        let summary = try #require(update.jsonLines().first)
        #expect(summary["loaded"] as? Int == 2)
        #expect(summary["durability"] as? String == "full")
        let after = try Tool.run(["dump", path, "--json"]).jsonLines()
        #expect(after.count == 252)  // one update, one new document
        #expect(after.first { $0["id"] as? String == "doc00001" }?["rev"] as? String != rev)
        try Tool.expectVerifies(path)
    }

    @Test func badLineStopsWithItsNumberAndKeepsEarlierDocuments() throws {
        for (bad, code) in [("{\"_id\":\"x\", oops}", "invalidJSON"), ("[1,2]", "invalidArgument"),
                            ("{\"_id\":\"doc00003\"}", "conflict"), ("{\"_private\":1}", "invalidArgument"),
                            ("{\"_id\":7}", "invalidArgument"), ("{\"_id\":\"_reserved\"}", "invalidArgument")] {
            let dir = Tool.Directory()
            let path = dir.path + "/db.sofa"
            let input = Tool.documents(57) + bad + "\n" + Tool.documents(10, from: 100)
            let result = try Tool.run(["load", path, "-", "--batch", "20", "--durability", "none"], input: input)
            #expect(result.status == 1, "\(bad)")
            #expect(result.error.split(separator: "\n").count == 1, "one error line: \(result.error)")
            #expect(result.error.hasPrefix("sofa: \(code): line 58: "), "\(bad): \(result.error)")
            #expect(result.error.contains("the 57 documents before line 58 are loaded"), "\(result.error)")
            let docs = try Tool.run(["dump", path, "--json"]).jsonLines()
            #expect(docs.map { $0["id"] as? String } == (0..<57).map { String(format: "doc%05d", $0) }, "\(bad)")
            try Tool.expectVerifies(path)
        }
    }

    @Test func progressIsShownOnATerminalOnly() throws {
        let dir = Tool.Directory()
        let file = dir.path + "/in.jsonl"
        try Tool.documents(5000).write(toFile: file, atomically: true, encoding: .utf8)
        // `script` runs the tool on a pseudo-terminal and copies what it writes there to standard output.
        let command = "\(Tool.sofa) load \(dir.path)/tty.sofa \(file) --batch 1000 --durability none"
        let terminal = try Tool.runProgram("/usr/bin/script", ["-qfec", command, "/dev/null"])
        #expect(terminal.status == 0, "\(terminal.output) \(terminal.error)")
        #expect(terminal.output.contains("\rload: "), "\(terminal.output.debugDescription)")
        #expect(terminal.output.contains("/s"))
        #expect(terminal.output.contains("\r\u{1B}[K"), "the progress line is erased at the end")
        #expect(terminal.output.contains("loaded 5,000 documents"))

        let piped = try Tool.run(["load", dir.path + "/piped.sofa", file, "--durability", "none"])
        #expect(piped.status == 0 && piped.error.isEmpty, "no progress into a pipe: \(piped.error.debugDescription)")
    }

    @Test func badUsageAndMissingInput() throws {
        let dir = Tool.Directory()
        let path = dir.path + "/db.sofa"
        #expect(try Tool.run(["load", path, "-", "--batch", "0"], input: "").status == 2)
        #expect(try Tool.run(["load", path, "-", "--durability", "sometimes"], input: "").status == 2)
        #expect(try Tool.run(["load", path]).status == 2)
        let missing = try Tool.run(["load", path, dir.path + "/none.jsonl"])
        #expect(missing.status == 1)
        #expect(missing.error.hasPrefix("sofa: notFound: cannot open input"))
        #expect(!FileManager.default.fileExists(atPath: path), "nothing is created when the input is missing")
    }
}
