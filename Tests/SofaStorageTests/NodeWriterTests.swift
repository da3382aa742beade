import Testing

@testable import SofaStorage

/// How batch modify splits entries into nodes: about equal runs, none oversized beyond one entry.
@Suite struct NodeWriterTests {
    @Test func evenRunsAreEvenAndBounded() {
        for seed in SeededGenerator.seeds(fixed: [3]) {
            var rng = SeededGenerator(seed: seed)
            for _ in 0..<300 {
                let nodeSize = [256, 1024, 4096, 8192].randomElement(using: &rng)!
                let largest = Int.random(in: 1...(nodeSize / 2), using: &rng)
                let sizes = (0..<Int.random(in: 1...5_000, using: &rng)).map { _ in
                    Int.random(in: 1...largest, using: &rng)
                }
                let runs = NodeWriter.evenRuns(sizes: sizes, nodeSize: nodeSize)
                let total = sizes.reduce(0, +)
                let context = "seed \(seed): \(sizes.count) items, node \(nodeSize), largest \(largest)"
                #expect(runs.count == max(1, (total + nodeSize - 1) / nodeSize), "\(context): run count")
                #expect(runs.first?.lowerBound == 0 && runs.last?.upperBound == sizes.count, "\(context): coverage")
                for (a, b) in zip(runs, runs.dropFirst()) { #expect(a.upperBound == b.lowerBound, "\(context): gap") }
                let share = total / runs.count
                for run in runs {
                    let size = sizes[run].reduce(0, +)
                    #expect(!run.isEmpty, "\(context): empty run")
                    #expect(size <= share + 2 * largest, "\(context): run of \(size) bytes, share \(share)")
                }
            }
        }
    }
}
