#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing

/// R6 in CI: a short libFuzzer run of every target of `Fuzz/` (30 s each) as part of the default suite, when
/// `CI=true` or `SOFA_FUZZ_SECONDS=N` is set (locally the suite stays quick; `make fuzz` runs longer). It builds
/// the fuzz package with `--sanitize=fuzzer -Xswiftc -sanitize=fuzzer,address` and runs `tools/fuzz.sh`, which
/// seeds each target from `Tests/Fixtures/fuzz/<target>/` and leaves any crasher there as `crash-*` (then
/// replayed by `FuzzFixtureReplayTests`). A toolchain without libFuzzer skips the run, saying so.
@Suite struct FuzzRunTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path
    /// Every fuzz target, from the `FuzzT` folders of `Fuzz/Sources/` (built as `fuzz-t`).
    static var targets: [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: root + "/Fuzz/Sources")) ?? []
        return names.filter { $0.hasPrefix("Fuzz") && $0.count > 4 }.map { $0.dropFirst(4).lowercased() }.sorted()
    }

    /// Seconds per target: `SOFA_FUZZ_SECONDS`, else 30 under CI, else nil (no run).
    static var seconds: Int? {
        let env = ProcessInfo.processInfo.environment
        if let text = env["SOFA_FUZZ_SECONDS"], let seconds = Int(text), seconds > 0 { return seconds }
        return env["CI"] == "true" ? 30 : nil
    }

    /// Runs `command` with bash in the repository root; its exit status and combined output.
    static func shell(_ command: String,
                      environment: [String: String] = [:]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["-c", command]
        process.currentDirectoryURL = URL(fileURLWithPath: root)
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: output, as: UTF8.self))
    }

    /// Why this toolchain cannot build a libFuzzer binary, or nil when it can: a one-function fuzzer is
    /// compiled and linked the way the targets are.
    static func libFuzzerUnavailable() throws -> String? {
        let dir = NSTemporaryDirectory() + "sofa-fuzzprobe-\(getpid())"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try """
        @_cdecl("LLVMFuzzerTestOneInput")
        public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt { 0 }
        """.write(toFile: dir + "/probe.swift", atomically: true, encoding: .utf8)
        let (status, output) = try shell("swiftc -parse-as-library -sanitize=fuzzer,address '\(dir)/probe.swift' " +
                                         "-o '\(dir)/probe' 2>&1")
        return status == 0 ? nil : "swiftc -sanitize=fuzzer,address fails: " + output.prefix(400)
    }

    @Test(.enabled(if: seconds != nil, "set CI=true or SOFA_FUZZ_SECONDS=N to fuzz each target for N seconds"))
    func everyFuzzTargetRunsWithoutACrash() throws {
        let seconds = try #require(Self.seconds)
        #expect(Self.targets.count >= 4, "Fuzz/Sources/fuzz-* lists \(Self.targets)")
        if let reason = try Self.libFuzzerUnavailable() {
            // In CI the fuzz run is part of the contract (RELIABILITY.md R6): a toolchain without libFuzzer fails.
            if ProcessInfo.processInfo.environment["CI"] == "true" {
                Issue.record("CI=true but this toolchain cannot build libFuzzer targets: \(reason)")
            } else {
                print("FuzzRunTests skipped: this toolchain has no libFuzzer (\(reason))")
            }
            return
        }
        let (status, output) = try Self.shell("bash tools/fuzz.sh " + Self.targets.joined(separator: " "),
                                              environment: ["FUZZ_SECONDS": String(seconds)])
        // fuzz.sh prints, per target, "== fuzz-T for Ns" then libFuzzer's final statistics.
        var executions: [String: Int] = [:]
        var current: String?
        for line in output.split(separator: "\n") {
            if line.hasPrefix("== fuzz-") { current = line.dropFirst(8).split(separator: " ").first.map(String.init) }
            if line.hasPrefix("stat::number_of_executed_units:"), let current,
               let n = Int(line.split(separator: ":").last!.trimmingCharacters(in: .whitespaces)) {
                executions[current] = n
            }
        }
        print("FuzzRunTests: \(seconds) s per target; executions: " +
              Self.targets.map { "fuzz-\($0) \(executions[$0].map(String.init) ?? "?")" }.joined(separator: ", "))
        let tail = String(output.suffix(3000))
        #expect(status == 0, """
            a fuzz target crashed or did not build; crashers are kept under Tests/Fixtures/fuzz/, logs in \
            .build-fuzz/:\n\(tail)
            """)
        for target in Self.targets {
            #expect((executions[target] ?? 0) > 0, "fuzz-\(target) ran no input")
        }
    }
}
