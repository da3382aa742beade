import Foundation
import Testing

/// `sofa demo` — the README's main-job command — runs to the end on a small library and prints every
/// section with sound results.
@Suite struct DemoCommandTests {
    @Test func demoRunsAndReportsSoundResults() throws {
        let dir = NSTemporaryDirectory() + "sofa-demo-\(UUID().uuidString.prefix(8)).sofa"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let result = try Tool.run(["demo", dir, "--docs", "3000"])
        #expect(result.status == 0, "stderr: \(result.error)")
        for expected in ["1. Generated 3,000 track documents", "2. Stored them", "3. Indexed three views: 9,000 rows",
                         "groupLevel 1 on byHierarchy", "groupLevel 2", "groupLevel 3", "descending byYear",
                         "stats reduce per year", "prefixMatchLevel 1", "a scan agrees: yes",
                         "Verified the document file and every index: clean",
                         "Collation: null < true < 2 < 10 < \"~\" < \"1\" < \"a\" < \"A\""] {
            #expect(result.output.contains(expected), "missing \(expected) in:\n\(result.output)")
        }
        for file in ["docs", "views/byHierarchy", "views/byYear", "views/byArtist"] {
            #expect(FileManager.default.fileExists(atPath: dir + "/" + file), "\(file) missing")
        }
    }

    @Test func badUsageExitsWithStatus2() throws {
        let result = try Tool.run(["demo", "--docs", "0"])
        #expect(result.status == 2)
        #expect(result.error.contains("--docs must be positive"))
    }
}
