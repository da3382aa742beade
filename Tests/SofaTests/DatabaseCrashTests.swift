#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing

import SofaTestSupport

@testable import Sofa
@testable import SofaStorage

/// Process crashes of the whole database (RELIABILITY.md R1): the `crash-worker` child runs
/// ``DatabaseCrashWorkload`` — single puts, batches, deletes, force-inserted conflicts and their resolution, view
/// index updates of a map/reduce and a declarative view, compaction — and is killed with SIGKILL at random
/// moments, again and again on the same database. After each kill the database reopens at the step r its
/// lastSequence names, with lastAck ≤ r ≤ lastBegin; every document equals the model after r steps; each view,
/// brought up to date, holds exactly the rows a naive map of the model gives, and reduces to the same totals;
/// `verify` is clean for the documents and both views; no compaction temporary is left.
///
/// `SOFA_CRASH_KILLS` sets the kills per seed (default 40; `make crash-test` runs thousands), `SOFA_SEED` the
/// seed. On a failure the database directory is kept, and its path is in the message with the seed and kill.
@Suite struct DatabaseCrashTests {
    @Test func killedDatabaseWriterRecoversDocumentsAndViews() throws {
        let worker = builtExecutable("crash-worker")
        try #require(FileManager.default.isExecutableFile(atPath: worker), "build the crash-worker first: \(worker)")
        let kills = Int(ProcessInfo.processInfo.environment["SOFA_CRASH_KILLS"] ?? "") ?? 40
        for seed in SeededRandom.testSeeds {
            try run(worker: worker, seed: seed, kills: kills)
        }
    }

    /// One row as the test compares it: key, document ID, value.
    struct Row: Equatable, CustomStringConvertible {
        let key: JSON
        let id: String
        let value: JSON?
        var description: String { "\(key) \(id) \(value.map { "\($0)" } ?? "-")" }
    }

    /// The rows a naive map of the model's live documents gives, in index order (keys are numbers or arrays of
    /// numbers, so collation order is numeric order; IDs are fixed-width ASCII).
    static func expectedRows(_ model: DatabaseCrashWorkload.Model, view: String) -> [Row] {
        var rows: [(sort: [Double], row: Row)] = []
        for (id, doc) in model.documents where !doc.deleted && doc.body["type"] == "item" {
            let (group, tag, n) = (doc.body["group"]!.doubleValue!, doc.body["tag"]!.doubleValue!,
                                   doc.body["n"]!.doubleValue!)
            if view == DatabaseCrashWorkload.mapViewName {
                rows.append(([group], Row(key: .number(group), id: id, value: .number(n))))
            } else {
                rows.append(([tag, n], Row(key: [.number(tag), .number(n)], id: id, value: nil)))
            }
        }
        return rows.sorted { a, b in
            a.sort != b.sort ? a.sort.lexicographicallyPrecedes(b.sort) : a.row.id < b.row.id
        }.map(\.row)
    }

    /// What is wrong with the reopened database compared with `model`, as messages (empty when nothing).
    static func problems(_ db: Database, model: DatabaseCrashWorkload.Model) throws -> [String] {
        var problems: [String] = []
        // Documents: winner body, deletion, the conflict leaf; nothing else present.
        var live = 0, deleted = 0
        for (id, expected) in model.documents.sorted(by: { $0.key < $1.key }) {
            guard let doc = try db.document(id: id, includeDeleted: true) else {
                problems.append("document \(id) is missing")
                continue
            }
            if expected.deleted {
                deleted += 1
                if !doc.isDeleted { problems.append("document \(id) should be deleted, is \(doc.userProperties)") }
            } else {
                live += 1
                if doc.isDeleted || doc.userProperties != expected.body {
                    problems.append("document \(id) is \(doc.isDeleted ? "deleted" : "\(doc.userProperties)"), " +
                                    "expected \(expected.body)")
                }
            }
            let conflicts = expected.conflictRevision.map { [$0] } ?? []
            if doc.conflictingRevisions != conflicts {
                problems.append("document \(id) has conflicts \(doc.conflictingRevisions), expected \(conflicts)")
            }
            if doc.revisionHistory.first.flatMap({ RevisionID($0)?.generation }) != UInt64(expected.generation) {
                problems.append("document \(id) is at \(doc.revisionID), expected generation \(expected.generation)")
            }
        }
        var all = db.createAllDocumentsQuery()
        all.allDocsMode = .includeDeleted
        let stored = try all.run().count
        if stored != model.documents.count || db.documentCount != live || db.deletedDocumentCount != deleted {
            problems.append("\(stored) documents (\(db.documentCount) live, \(db.deletedDocumentCount) deleted), " +
                            "expected \(model.documents.count) (\(live) live, \(deleted) deleted)")
        }
        // Views: brought up to date from whatever state the kill left them in, they equal a fresh map.
        for view in try DatabaseCrashWorkload.views(of: db) {
            try view.updateIndex()
            var query = view.createQuery()
            query.mapOnly = true
            let rows = try query.run().map { Row(key: $0.key, id: $0.documentID ?? "?", value: $0.value) }
            let expected = expectedRows(model, view: view.name)
            if rows != expected {
                let firstDifference = zip(rows, expected).first { $0 != $1 }.map { "\($0.0) vs \($0.1)" } ?? "-"
                problems.append("view \(view.name): \(rows.count) rows, expected \(expected.count); first " +
                                "difference \(firstDifference)")
            }
            if !expected.isEmpty {
                var reduced = view.createQuery()
                if view.name == DatabaseCrashWorkload.mapViewName {
                    let total = expected.reduce(0) { $0 + ($1.value?.doubleValue ?? 0) }
                    let got = try reduced.run().first?.value
                    if got != .number(total) {
                        problems.append("view \(view.name): sum \(String(describing: got)), expected \(total)")
                    }
                } else {
                    reduced.groupLevel = 1
                    let got = try reduced.run().map { "\($0.key)=\($0.value.map { "\($0)" } ?? "-")" }
                    var counts: [Double: Int] = [:]
                    for row in expected { counts[row.key[0]!.doubleValue!, default: 0] += 1 }
                    let want = counts.keys.sorted().map {
                        "\(JSON.array([.number($0)]))=\(JSON.number(Double(counts[$0]!)))"
                    }
                    if got != want { problems.append("view \(view.name): counts by tag \(got), expected \(want)") }
                }
            }
            problems += try view.verify().map { "view \(view.name) verify: \($0)" }
        }
        problems += try db.verify().map { "verify: \($0)" }
        if access(db.path + "/docs" + Database.compactionSuffix, F_OK) == 0 {
            problems.append("the compaction temporary file was left after a writable open")
        }
        // Views are compacted too: their temporary files (`views/.NAME.compact`, and its `.creating` stage) go.
        let views = (try? FileManager.default.contentsOfDirectory(atPath: db.path + "/views")) ?? []
        for name in views where name.hasPrefix(".") {
            problems.append("views/\(name) was left after a writable open")
        }
        return problems
    }

    func run(worker: String, seed: UInt64, kills: Int) throws {
        let dir = TemporaryDatabaseDirectory("sofa-dbcrash")
        let path = dir.database("crash")
        var random = SeededRandom(seed: seed)
        var model = DatabaseCrashWorkload.Model(seed: seed)
        var killedIn: [DatabaseCrashWorkload.Kind: Int] = [:]
        for kill in 1...kills {
            // Long enough for the worker to open the database and run some steps; sometimes it dies opening.
            let run = try runAndKill(executable: worker, arguments: ["database", path, String(seed)],
                                     delay: UInt32.random(in: 5_000...120_000, using: &random))
            let log = CrashWorkerLog(output: run.output)
            // A worker killed before its first step has begun and acknowledged nothing past the last recovery.
            let (lastBegin, lastAck) = (log.lastBegin ?? model.steps, log.lastAck ?? model.steps)
            guard FileManager.default.fileExists(atPath: path + "/docs") else { continue }  // killed creating it

            var problems: [String] = []
            var context = "seed \(seed) kill \(kill): begin \(lastBegin) ack \(lastAck)"
            do {
                // A throw here is a failure like any other: it is reported with the kept database.
                let db = try Database(path: path, options: testOptions())
                defer { try? db.close() }
                let reached = model.advance(toSequence: db.lastSequence)
                let recovered = model.steps
                context += " recovered \(recovered) (lastSequence \(db.lastSequence))"
                if !reached {
                    problems.append("lastSequence \(db.lastSequence) ends no step of the workload")
                } else if recovered < lastAck || recovered > lastBegin {
                    problems.append("recovered step outside [lastAck, lastBegin]")
                }
                if reached { problems += try Self.problems(db, model: model) }
                // The step the kill interrupted: its commit had landed (an index update or compaction after it
                // was cut), or not.
                if lastBegin > lastAck, reached {
                    let kind = lastBegin == recovered ? model.lastKind
                        : lastBegin == recovered + 1 ? model.nextStep().kind : nil
                    if let kind { killedIn[kind, default: 0] += 1 }
                }
            } catch {
                problems.append("reopening or reading threw \(error)")
            }
            if !problems.isEmpty {
                let kept = NSTemporaryDirectory() + "sofa-dbcrash-seed\(seed)-kill\(kill)"
                try? FileManager.default.removeItem(atPath: kept)
                try? FileManager.default.copyItem(atPath: path, toPath: kept)
                for problem in problems.prefix(20) {
                    Issue.record("\(context): \(problem); database kept at \(kept); replay with SOFA_SEED=\(seed)")
                }
                return
            }
        }
        let summary = DatabaseCrashWorkload.Kind.allCases.map { "\($0.rawValue) \(killedIn[$0, default: 0])" }
        print("DatabaseCrashTests seed \(seed): \(kills) kills, \(model.steps) steps recovered; killed inside a " +
              "step of kind: \(summary.joined(separator: ", "))")
        #expect(killedIn.values.reduce(0, +) > 0,
                "seed \(seed): no kill landed inside a step; the test did not test much")
    }
}
