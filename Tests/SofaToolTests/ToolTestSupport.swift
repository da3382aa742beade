import Foundation
import Testing

import SofaTestSupport

/// Runs the built `sofa` executable and makes databases for the verb tests.
enum Tool {
    struct Result {
        var status: Int32
        var output: String
        var error: String
        /// False when the child died of a signal (a crash).
        var exited = true
        /// Standard output's non-empty lines.
        var lines: [String] { output.split(separator: "\n").map(String.init) }
        /// Standard output's lines parsed as JSON objects (a line that does not parse fails the test).
        func jsonLines(sourceLocation: SourceLocation = #_sourceLocation) -> [[String: Any]] {
            lines.compactMap { line in
                let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
                #expect(object != nil, "not a JSON object: \(line)", sourceLocation: sourceLocation)
                return object
            }
        }
    }

    /// The `sofa` executable next to this test binary (SwiftPM builds it because this target depends on it).
    static let sofa = builtExecutable("sofa")

    /// Runs `sofa arguments…`, feeding `input` on standard input when given.
    static func run(_ arguments: [String], input: String? = nil) throws -> Result {
        try runProgram(sofa, arguments, input: input)
    }

    /// Runs `program arguments…`, feeding `input` on standard input when given.
    static func runProgram(_ program: String, _ arguments: [String], input: String? = nil) throws -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        let inPipe = Pipe()
        if input != nil { process.standardInput = inPipe }
        try process.run()
        if let input {
            inPipe.fileHandleForWriting.write(Data(input.utf8))
            try inPipe.fileHandleForWriting.close()
        }
        // Read both pipes concurrently so a large output cannot block the child.
        nonisolated(unsafe) var errorData = Data()
        let reader = Thread { errorData = err.fileHandleForReading.readDataToEndOfFile() }
        reader.start()
        let outputData = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        while !reader.isFinished { usleep(1000) }
        return Result(status: process.terminationStatus, output: String(decoding: outputData, as: UTF8.self),
                      error: String(decoding: errorData, as: UTF8.self), exited: process.terminationReason == .exit)
    }

    /// A temporary directory removed when the value goes away.
    final class Directory {
        let path: String
        init() {
            path = NSTemporaryDirectory() + "sofa-tool-\(UUID().uuidString.prefix(8))"
            try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        }
        deinit { try? FileManager.default.removeItem(atPath: path) }
    }

    /// `count` JSON lines `{"_id":"docNNNN","n":i,"name":"…"}`.
    static func documents(_ count: Int, from start: Int = 0) -> String {
        (start..<(start + count)).map { i in
            "{\"_id\":\"doc\(String(format: "%05d", i))\",\"n\":\(i),\"name\":\"name \(i % 37)\"}"
        }.joined(separator: "\n") + "\n"
    }

    /// A database at `dir/name.sofa` loaded with `lines` by `sofa load` (checked to succeed).
    static func database(in dir: Directory, _ lines: String, batch: Int = 1000, name: String = "test",
                         sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let path = dir.path + "/\(name).sofa"
        let result = try run(["load", path, "-", "--batch", String(batch), "--durability", "none"], input: lines)
        #expect(result.status == 0, "load failed: \(result.error)", sourceLocation: sourceLocation)
        try expectVerifies(path, sourceLocation: sourceLocation)
        return path
    }

    /// Eight tracks (`track1`…`track8`: type, genre, artist, album with title and year, title, duration,
    /// year) and one playlist, as JSON lines.
    static let tracks: String = {
        let rows: [(String, String, String, Int, String, Int)] = [
            ("Jazz", "Miles Davis", "Kind of Blue", 1959, "So What", 545),
            ("Jazz", "Miles Davis", "Kind of Blue", 1959, "Blue in Green", 337),
            ("Jazz", "John Coltrane", "Giant Steps", 1960, "Naima", 261),
            ("Rock", "Queen", "A Night at the Opera", 1975, "Bohemian Rhapsody", 355),
            ("Rock", "Queen", "A Night at the Opera", 1975, "Love of My Life", 219),
            ("Rock", "Led Zeppelin", "IV", 1971, "Black Dog", 296),
            ("Rock", "Led Zeppelin", "IV", 1971, "Rock and Roll", 220),
            ("Pop", "ABBA", "Arrival", 1976, "Dancing Queen", 231),
        ]
        let tracks = rows.enumerated().map { n, t in
            "{\"_id\":\"track\(n + 1)\",\"type\":\"track\",\"genre\":\"\(t.0)\",\"artist\":\"\(t.1)\"," +
                "\"album\":{\"title\":\"\(t.2)\",\"year\":\(t.3)},\"title\":\"\(t.4)\"," +
                "\"duration\":\(t.5),\"year\":\(t.3)}"
        }
        return (tracks + ["{\"_id\":\"playlist1\",\"type\":\"playlist\",\"genre\":\"Jazz\"}"])
            .joined(separator: "\n") + "\n"
    }()

    /// Runs `sofa view create PATH arguments…` and expects it to succeed.
    static func createView(_ path: String, _ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation)
        throws {
        let result = try run(["view", "create", path] + arguments)
        #expect(result.status == 0, "view create: \(result.error)", sourceLocation: sourceLocation)
    }

    /// Expects `sofa verify` to find nothing.
    static func expectVerifies(_ path: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let result = try run(["verify", path])
        #expect(result.status == 0, "verify: \(result.output) \(result.error)", sourceLocation: sourceLocation)
        #expect(result.output.contains("verify: no problems found"), sourceLocation: sourceLocation)
    }

    /// `1234567` as "1,234,567", as the tool prints counts.
    static func grouped(_ n: Int) -> String {
        let digits = String(n)
        return digits.enumerated().map { i, c in
            (i > 0 && (digits.count - i) % 3 == 0 ? "," : "") + String(c)
        }.joined()
    }

    static func fileSize(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.intValue ?? -1
    }
}
