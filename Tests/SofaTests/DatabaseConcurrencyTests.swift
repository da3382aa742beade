import Foundation
import Synchronization
import Testing

@testable import Sofa
@testable import SofaStorage

/// R10 at the database level: reader threads run all-documents queries and `document(id:)` while a writer
/// commits batches; every query sees one whole commit. Run under TSan with `make tsan`.
///
/// Each batch the writer commits keeps two invariants: the counters `c0…c9` sum to `total.sum`, and there are
/// exactly `total.commit` documents `item-…` (one added per batch). A query that saw rows of two commits would
/// break one of them; single-document reads, which each see the newest commit, must at least never go back.
@Suite struct DatabaseConcurrencyTests {
    static let batches = Int(ProcessInfo.processInfo.environment["SOFA_CONCURRENCY_COMMITS"] ?? "") ?? 120
    static let counters = 10

    @Test func queriesSeeWholeCommitsWhileTheWriterCommits() throws {
        let dir = TemporaryDatabaseDirectory("sofa-concurrency")
        let db = try Database(path: dir.database(), options: DatabaseOptions(durability: .none,
                                                                               nodeCacheBytes: 64 << 10))
        try db.inBatch {
            for c in 0..<Self.counters { try db.put(["n": 0], id: "c\(c)") }
            try db.put(["sum": 0, "commit": 0], id: "total")
        }
        let progress = QueryProgress()
        let readers = (0..<3).map { reader in
            Thread {
                var lastCommit = -1.0, lastSequence: UInt64 = 0
                while !progress.done.load(ordering: .acquiring) {
                    do {
                        let problem = reader == 2
                            ? try Self.checkDocumentReads(db, lastCommit: &lastCommit)
                            : try Self.checkQuery(db, lastSequence: &lastSequence)
                        if let problem { progress.fail("reader \(reader): \(problem)"); return }
                        progress.checked.add(1, ordering: .relaxed)
                    } catch {
                        progress.fail("reader \(reader): \(error)")
                        return
                    }
                }
            }
        }
        readers.forEach { $0.start() }

        var random = SeededRandom(seed: 2020)
        var counts = [Int](repeating: 0, count: Self.counters)
        for batch in 1...Self.batches {
            try db.inBatch {
                var added = 0
                for c in (0..<Self.counters).shuffled(using: &random).prefix(Int.random(in: 1...4, using: &random)) {
                    let step = Int.random(in: 1...9, using: &random)
                    let current = try db.document(id: "c\(c)")!
                    try db.put(["n": .number(Double(counts[c] + step))], id: "c\(c)", rev: current.revisionID)
                    counts[c] += step
                    added += step
                }
                try db.put(["batch": .number(Double(batch))], id: "item-\(batch)")
                let total = try db.document(id: "total")!
                try db.put(["sum": .number(Double(counts.reduce(0, +))), "commit": .number(Double(batch))],
                           id: "total", rev: total.revisionID)
                #expect(added > 0)
            }
        }
        let before = progress.checked.load(ordering: .relaxed)
        while progress.checked.load(ordering: .relaxed) < before + 3, progress.failureList.isEmpty { usleep(1_000) }
        progress.done.store(true, ordering: .releasing)
        while readers.contains(where: { !$0.isFinished }) { usleep(1_000) }

        #expect(progress.failureList == [])
        #expect(progress.checked.load(ordering: .relaxed) > 3)
        #expect(db.documentCount == Self.counters + 1 + Self.batches)
        expectSound(db, "after the concurrent run")
        try db.close()
    }

    /// One all-documents query: its rows (and their documents, read from the query's snapshot) must satisfy
    /// both invariants of one commit. A description of the problem, or nil.
    static func checkQuery(_ db: Database, lastSequence: inout UInt64) throws -> String? {
        let result = try db.createAllDocumentsQuery().run()
        guard result.sequenceNumber >= lastSequence else {
            return "query at sequence \(result.sequenceNumber) after one at \(lastSequence)"
        }
        lastSequence = result.sequenceNumber
        var sum = 0.0, items = 0, total: JSON?
        for row in result {
            guard let id = row.documentID, let doc = row.document else { return "row without a document" }
            if id.hasPrefix("item-") { items += 1 }
            if id.hasPrefix("c"), case .number(let n)? = doc.properties["n"] { sum += n }
            if id == "total" { total = doc.properties }
        }
        guard let total, case .number(let stored)? = total["sum"], case .number(let commit)? = total["commit"] else {
            return "no total document in a query of \(result.count) rows"
        }
        if sum != stored || Double(items) != commit || result.totalRows != result.count {
            return "torn snapshot at sequence \(result.sequenceNumber): counters sum to \(sum), total says "
                + "\(stored); \(items) items for commit \(commit); totalRows \(result.totalRows) of \(result.count)"
        }
        return nil
    }

    /// Reads `total`, then each counter, then `total` again, each through `document(id:)` on the newest commit:
    /// as the writer only adds, the counters' sum lies between the two totals and commits never go back.
    static func checkDocumentReads(_ db: Database, lastCommit: inout Double) throws -> String? {
        func total() throws -> (sum: Double, commit: Double) {
            let doc = try db.document(id: "total")!
            guard case .number(let s)? = doc.properties["sum"], case .number(let c)? = doc.properties["commit"] else {
                throw SofaError(.corruption, "total has no sum or commit")
            }
            return (s, c)
        }
        let first = try total()
        var sum = 0.0
        for c in 0..<counters {
            guard case .number(let n)? = try db.document(id: "c\(c)")?.properties["n"] else { return "c\(c) missing" }
            sum += n
        }
        let second = try total()
        if first.commit < lastCommit || second.commit < first.commit {
            return "commits went back: \(lastCommit), \(first.commit), \(second.commit)"
        }
        if sum < first.sum || sum > second.sum {
            return "counters sum to \(sum), outside [\(first.sum), \(second.sum)]"
        }
        lastCommit = second.commit
        return nil
    }
}

/// What reader threads share with the test: a stop flag, a count of checks done, and the failures.
final class QueryProgress: Sendable {
    let done = Atomic(false)
    let checked = Atomic(0)
    private let failures = Lock<[String]>([])

    func fail(_ message: String) { failures.withLock { $0.append(message) } }
    var failureList: [String] { failures.withLock { $0 } }
}
