import Foundation
import Synchronization
import Testing

@testable import SofaStorage

/// R10 at the engine level: reader threads read trees while one writer commits; every reader's snapshot is
/// one whole commit. Run under TSan with `make tsan`.
///
/// The writer keeps an invariant per commit: the commit's metadata holds the tree's row count and the sum of
/// its values, so a reader that sees rows of one commit and metadata of another (a torn snapshot) notices.
@Suite struct ConcurrencyTests {
    /// Commits by the writer; `SOFA_CONCURRENCY_COMMITS` raises it for `make tsan`.
    static let commits = Int(ProcessInfo.processInfo.environment["SOFA_CONCURRENCY_COMMITS"] ?? "") ?? 150
    static let readers = 3

    /// What a commit promises: `count` rows whose values sum to `sum`.
    static func metadata(count: Int, sum: Int64) -> [UInt8] {
        int64Value(Int64(count)) + int64Value(sum)
    }

    @Test func readersSeeWholeCommitsWhileTheWriterCommits() throws {
        let dir = TemporaryDirectory()
        // A small cache makes readers and the writer evict and refill it concurrently.
        let file = try StorageFile(path: dir.file("f"),
                                   options: StorageOptions(durability: .none, nodeCacheBytes: 64 << 10))
        let configuration = BTreeConfiguration(nodeSize: 512, reducer: Int64SumReducer())
        try file.commit(roots: [nil], metadata: Self.metadata(count: 0, sum: 0))
        let progress = ReaderProgress()

        let readerThreads = (0..<Self.readers).map { reader in
            Thread {
                var lastCommit: UInt64 = 0
                while !progress.done.load(ordering: .acquiring) {
                    do {
                        let commit = file.latestCommit
                        if let problem = try Self.check(commit, of: file, configuration: configuration,
                                                        fullVerify: reader == 0, after: lastCommit) {
                            progress.fail("reader \(reader): \(problem)")
                            return
                        }
                        lastCommit = commit.commitNumber
                        progress.checked.add(1, ordering: .relaxed)
                    } catch {
                        progress.fail("reader \(reader): \(error)")
                        return
                    }
                }
            }
        }
        readerThreads.forEach { $0.start() }

        var random = SeededGenerator(seed: 1010)
        var model: [Int: Int64] = [:]
        var tree = BTree(file: file, commit: file.latestCommit, index: 0, configuration: configuration)
        for _ in 0..<Self.commits {
            // Puts and removes of random keys; the model gives the commit's count and sum.
            var actions: [Int: Int64?] = [:]
            for _ in 0..<Int.random(in: 1...40, using: &random) {
                let key = Int.random(in: 0..<2_000, using: &random)
                actions[key] = Int.random(in: 0..<4, using: &random) == 0 ? nil : Int64.random(in: 1...1_000,
                                                                                                  using: &random)
            }
            let sorted = actions.sorted { $0.key < $1.key }
            tree = try tree.modified(by: sorted.map { key, value in
                BTreeAction(key: numericKey(key), value: value.map(int64Value))
            })
            for (key, value) in sorted { model[key] = value }
            let sum = model.values.reduce(0, +)
            let header = try file.commit(roots: [tree.root], metadata: Self.metadata(count: model.count, sum: sum))
            tree = BTree(file: file, commit: header, index: 0, configuration: configuration)
        }
        // Let the readers finish at least one pass over the final commit.
        let before = progress.checked.load(ordering: .relaxed)
        while progress.checked.load(ordering: .relaxed) < before + Self.readers, progress.failureList.isEmpty {
            usleep(1_000)
        }
        progress.done.store(true, ordering: .releasing)
        while readerThreads.contains(where: { !$0.isFinished }) { usleep(1_000) }

        #expect(progress.failureList == [])
        #expect(progress.checked.load(ordering: .relaxed) > Self.readers)
        expectSound(tree, "final")
        #expect(tree.rowCount == UInt64(model.count))
    }

    /// Checks one snapshot against the metadata of its commit; a description of the first problem, or nil.
    static func check(_ commit: CommitHeader, of file: StorageFile, configuration: BTreeConfiguration,
                      fullVerify: Bool, after previous: UInt64) throws -> String? {
        if commit.commitNumber < previous { return "commit \(commit.commitNumber) after \(previous)" }
        guard commit.metadata.count == 16, commit.roots.count == 1 else { return nil }  // the file's first commit
        let count = Int64SumReducer.decode(Array(commit.metadata[0..<8]))!
        let sum = Int64SumReducer.decode(Array(commit.metadata[8..<16]))!
        let tree = BTree(file: file, commit: commit, index: 0, configuration: configuration)
        var rows: Int64 = 0, total: Int64 = 0
        var last: [UInt8]?
        try tree.forEach { key, value in
            let k = Array(key)
            if let last, compareArrays(last, k) >= 0 { return false }
            last = k
            rows += 1
            total += Int64SumReducer.decode(Array(value)) ?? 0
            return true
        }
        let stored = tree.reduction.flatMap(Int64SumReducer.decode) ?? 0
        if rows != count || total != sum || Int64(tree.rowCount) != count || stored != sum {
            return "commit \(commit.commitNumber): metadata says \(count) rows summing to \(sum); "
                + "read \(rows) rows summing to \(total), stored count \(tree.rowCount), stored sum \(stored)"
        }
        if fullVerify {
            let problems = tree.verify().problems
            if !problems.isEmpty { return "commit \(commit.commitNumber): \(problems)" }
        }
        return nil
    }
}

/// What reader threads share with the test: a stop flag, a count of snapshots checked, and the failures.
final class ReaderProgress: Sendable {
    let done = Atomic(false)
    let checked = Atomic(0)
    private let failures = Lock<[String]>([])

    func fail(_ message: String) { failures.withLock { $0.append(message) } }
    var failureList: [String] { failures.withLock { $0 } }
}
