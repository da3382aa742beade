import Foundation
import Synchronization
import Testing

@testable import Sofa

/// Live queries: first run, re-runs on change (coalesced), publication only of changed rows, the async
/// sequence, stop.
@Suite struct LiveQueryTests {
    final class Collected: Sendable {
        let results = Mutex<[QueryEnumerator]>([])
        var count: Int { results.withLock { $0.count } }
        var last: QueryEnumerator? { results.withLock { $0.last } }
    }

    static func wait(_ condition: () -> Bool) {
        for _ in 0..<500 where !condition() { usleep(10_000) }
    }

    @Test func rerunsWhenTheDatabaseChanges() throws {
        let dir = TemporaryDatabaseDirectory("sofa-views")
        let db = try Database(path: dir.database(), options: testOptions())
        try db.put(["type": "widget", "name": "a"], id: "w1")
        let view = db.view(named: "widgets")
        view.setMap(version: "1") { doc, emit in
            if doc["type"] == "widget" { emit(doc["name"] ?? nil, nil) }
        }
        var query = view.createQuery()
        query.limit = 100
        let live = query.asLiveQuery(updateInterval: 0.05)
        let collected = Collected()
        live.addChangeListener { rows in collected.results.withLock { $0.append(rows) } }
        live.start()
        #expect(try live.waitForRows().count == 1)
        Self.wait { collected.count >= 1 }
        #expect(collected.count == 1 && keys(collected.last!) == ["a"])

        // A burst of changes: coalesced into few runs; the final rows are complete.
        for i in 0..<20 { try db.put(["type": "widget", "name": .string("b\(i)")], id: "x\(i)") }
        Self.wait { collected.last?.count == 21 }
        #expect(collected.last?.count == 21 && live.rows?.count == 21)
        #expect(collected.count < 21, "\(collected.count) publications for 20 changes")

        // A change outside the query's rows re-runs but publishes nothing.
        let published = collected.count
        try db.put(["type": "other"], id: "o1")
        usleep(300_000)
        #expect(collected.count == published)

        live.stop()
        try db.put(["type": "widget", "name": "after stop"], id: "late")
        usleep(200_000)
        #expect(collected.count == published && live.rows?.count == 21)
        expectSound(view)
    }

    @Test func asyncSequenceOfResults() async throws {
        let dir = TemporaryDatabaseDirectory("sofa-views")
        let db = try Database(path: dir.database(), options: testOptions())
        let view = db.view(named: "n")
        view.setMapReduce(version: "1", map: { doc, emit in emit(doc["n"] ?? nil, doc["n"]) }, reduce: .sum)
        try db.put(["n": 1], id: "a")
        let live = view.createQuery().asLiveQuery(updateInterval: 0.01)
        live.start()
        var sums: [JSON?] = []
        for await rows in live.changes() {
            sums.append(rows.first?.value)
            if sums.count == 1 { try db.put(["n": 2], id: "b") }
            if sums.count == 2 { live.stop() }
        }
        #expect(sums == [1, 3])
        expectSound(view)
    }
}
