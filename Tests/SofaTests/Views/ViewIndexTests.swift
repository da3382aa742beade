import Foundation
import Testing

@testable import Sofa
@testable import SofaStorage

/// The index's life: incremental updates, version resets, failed updates, reduce rules, re-sorting under a
/// new collator, deletion.
@Suite struct ViewIndexTests {
    static func numbers(_ dir: TemporaryDatabaseDirectory, count: Int) throws -> Database {
        let db = try Database(path: dir.database(), options: testOptions())
        try db.inBatch { for i in 0..<count { try db.put(["n": .number(Double(i)), "type": "num"], id: "n\(i)") } }
        return db
    }

    static let byN: MapFunction = { doc, emit in emit(doc["n"] ?? nil, doc["n"]) }

    /// After k of N documents change, an update maps exactly those k.
    @Test func updatesMapOnlyChangedDocuments() throws {
        let dir = TemporaryDatabaseDirectory("sofa-views")
        let db = try Self.numbers(dir, count: 5000)
        let view = db.view(named: "byN")
        view.setMapReduce(version: "1", map: Self.byN, reduce: .sum)
        try view.updateIndex()
        #expect(view.shared.mapCalls.count.load(ordering: .relaxed) == 5000)
        #expect(view.totalRows == 5000 && !view.isStale)
        let before = view.shared.mapCalls.count.load(ordering: .relaxed)
        try db.inBatch {
            for i in stride(from: 0, to: 5000, by: 500) {
                let doc = try #require(try db.document(id: "n\(i)"))
                try db.put(["n": .number(Double(i) + 0.5), "type": "num"], id: doc.id, rev: doc.revisionID)
            }
            let gone = try #require(try db.document(id: "n1"))
            try db.delete(id: "n1", rev: gone.revisionID)
        }
        #expect(view.isStale)
        try view.updateIndex()
        #expect(view.shared.mapCalls.count.load(ordering: .relaxed) - before == 10)  // the deleted one is not mapped
        #expect(view.totalRows == 4999 && view.lastSequenceIndexed == db.lastSequence)
        let total = try run(view).first?.value?.doubleValue
        #expect(total == Double((0..<5000).reduce(0, +)) - 1 + 10 * 0.5)
        #expect(keys(try run(view) { $0.startKey = 500; $0.endKey = 501; $0.mapOnly = true }) == [500.5, 501])
        // Nothing changed: nothing mapped.
        let calls = view.shared.mapCalls.count.load(ordering: .relaxed)
        try view.updateIndex()
        #expect(view.shared.mapCalls.count.load(ordering: .relaxed) == calls)
        expectSound(view)
    }

    /// A change to what a view does not key on rewrites the rows, not the back-index (FORMAT.md §10.2.5); the
    /// rows tree and the back-index are written uncompressed (§10.2).
    @Test func sameKeysLeaveTheBackIndexAlone() throws {
        let dir = TemporaryDatabaseDirectory("sofa-views")
        let db = try Database(path: dir.database(), options: testOptions())
        try db.inBatch {
            for i in 0..<3000 { try db.put(["n": .number(Double(i)), "v": .number(1)], id: "doc-\(i)") }
        }
        let view = db.view(named: "byN")
        view.setMapReduce(version: "1", map: { doc, emit in emit(doc["n"] ?? nil, doc["v"]) }, reduce: .sum)
        try view.updateIndex()
        let index = try #require(try view.index())
        let built = try index.snapshot()
        try db.inBatch {
            for i in stride(from: 0, to: 3000, by: 7) {
                let doc = try #require(try db.document(id: "doc-\(i)"))
                try db.put(["n": .number(Double(i)), "v": .number(2)], id: doc.id, rev: doc.revisionID)
            }
        }
        try view.updateIndex()
        let valuesChanged = try index.snapshot()
        #expect(valuesChanged.backIndex.root?.offset == built.backIndex.root?.offset)
        #expect(valuesChanged.rows.root?.offset != built.rows.root?.offset)
        #expect(try run(view).first?.value?.doubleValue == 3000 + Double((0..<3000).count { $0 % 7 == 0 }))
        // A key that moves rewrites both trees.
        let moved = try #require(try db.document(id: "doc-1"))
        try db.put(["n": .number(-1), "v": .number(1)], id: moved.id, rev: moved.revisionID)
        try view.updateIndex()
        #expect(try index.snapshot().backIndex.root?.offset != valuesChanged.backIndex.root?.offset)
        #expect(keys(try run(view) { $0.limit = 2; $0.mapOnly = true }) == [-1, 0])
        let report = try #require(try view.fileReport())
        #expect(report.rows.storedBytes == report.rows.rawBytes
                + UInt64(FileFormat.chunkPrefixSize * (report.rows.leafNodes + report.rows.innerNodes)))
        #expect(report.backIndex.storedBytes == report.backIndex.rawBytes
                + UInt64(FileFormat.chunkPrefixSize * (report.backIndex.leafNodes + report.backIndex.innerNodes)))
        expectSound(view)
    }

    /// An update too large for one pass (``ViewIndex/passBudget`` lowered) applies its changes in several, each
    /// touching enough rows leaves to prepare them on every core; the index and its group aggregates then equal
    /// an index built from scratch over the same documents.
    @Test func largeUpdateInSeveralPassesEqualsARebuild() throws {
        let dir = TemporaryDatabaseDirectory("sofa-views")
        let db = try Database(path: dir.database(), options: testOptions())
        var rng = SeededRandom(seed: 11)
        try db.inBatch {
            for i in 0..<20_000 {
                try db.put(["g": .string("g\(i % 37)"), "k": .number(Double(i)), "v": .number(Double(i % 100))],
                           id: "doc\(i)")
            }
        }
        let map: MapFunction = { doc, emit in
            emit([doc["g"] ?? nil, doc["k"] ?? nil], doc["v"])
            if case .number(let v)? = doc["v"], v < 10 { emit("small", doc["k"]) }
        }
        let updated = db.view(named: "updated")
        updated.setMapReduce(version: "1", map: map, reduce: .sum)
        try updated.updateIndex()
        _ = try run(updated) { $0.groupLevel = 1 }  // materializes level 1, kept up to date by the update
        // A third of the documents change: values only, keys moved, emits added or dropped, deletions.
        try db.inBatch {
            for i in stride(from: 0, to: 20_000, by: 3) {
                let doc = try #require(try db.document(id: "doc\(i)"))
                switch Int.random(in: 0..<4, using: &rng) {
                case 0: try db.delete(id: doc.id, rev: doc.revisionID)
                case 1: try db.put(["g": .string("h\(i % 5)"), "k": .number(Double(-i)), "v": 5], id: doc.id,
                                   rev: doc.revisionID)
                default: try db.put(["g": .string("g\(i % 37)"), "k": .number(Double(i)),
                                     "v": .number(Double(Int.random(in: 0..<100, using: &rng)))],
                                    id: doc.id, rev: doc.revisionID)
                }
            }
        }
        let passes = ViewIndex.updatePasses.load(ordering: .relaxed)
        let saved = ViewIndex.passBudget.exchange(64 << 10, ordering: .relaxed)
        defer { ViewIndex.passBudget.store(saved, ordering: .relaxed) }
        try updated.updateIndex()
        #expect(ViewIndex.updatePasses.load(ordering: .relaxed) - passes >= 3)
        let rebuilt = db.view(named: "rebuilt")
        rebuilt.setMapReduce(version: "1", map: map, reduce: .sum)
        try rebuilt.updateIndex()
        let a = try run(updated) { $0.mapOnly = true }, b = try run(rebuilt) { $0.mapOnly = true }
        #expect(a.count == b.count && a == b)
        #expect(try run(updated) { $0.groupLevel = 1 } == run(rebuilt) { $0.groupLevel = 1 })
        #expect(try updated.index()?.header.groupLevels == [1])
        #expect(try run(updated) { $0.startKey = ["g3"]; $0.endKey = ["g9", [:]] }
                == run(rebuilt) { $0.startKey = ["g3"]; $0.endKey = ["g9", [:]] })
        expectSound(updated)
        expectSound(rebuilt)
    }

    /// `BTreeActionBuffer.sortedUnique` orders by the keys' first 8 bytes, then whole keys: the same order as
    /// `memcmp` on keys shorter than 8 bytes, sharing long prefixes, or prefixes of one another, and of several
    /// actions for one key the last wins.
    @Test func sortedUniqueMatchesAByteOrderSort() {
        var rng = SeededRandom(seed: 5)
        var actions: [BTreeAction] = []
        let prefixes: [[UInt8]] = [[], [1, 2, 3, 4, 5, 6, 7, 8, 9], [0, 0, 0, 0], [9]]
        for i in 0..<3000 {
            var key = prefixes[Int.random(in: 0..<prefixes.count, using: &rng)]
            for _ in 0..<Int.random(in: 0...6, using: &rng) { key.append(UInt8.random(in: 0...2, using: &rng)) }
            let value = (0..<Int.random(in: 0...40, using: &rng)).map { UInt8(truncatingIfNeeded: i &+ $0) }
            let action: BTreeAction = Bool.random(using: &rng) ? .put(key, value) : .remove(key)
            actions.append(action)
        }
        var expected: [BTreeAction] = []
        for i in actions.indices.sorted(by: { a, b in
            let c = compareArrays(actions[a].key, actions[b].key)
            return c != 0 ? c < 0 : a < b
        }) {
            if expected.last?.key == actions[i].key {
                expected[expected.count - 1] = actions[i]
            } else {
                expected.append(actions[i])
            }
        }
        var buffer = BTreeActionBuffer()
        for action in actions {
            action.key.withUnsafeBytes { key in
                if let value = action.value {
                    value.withUnsafeBytes { buffer.put(key, $0) }
                } else {
                    buffer.remove(key)
                }
            }
        }
        var got: [BTreeAction] = []
        buffer.forEach(in: buffer.sortedUnique()) { key, value in
            got.append(BTreeAction(key: Array(key), value: value.map { Array($0) }))
        }
        #expect(got.map(\.key) == expected.map(\.key))
        #expect(got.map(\.value) == expected.map(\.value))
    }

    /// A new version string resets the index; the same one keeps it across reopening.
    @Test func versionChangeResetsTheIndex() throws {
        let dir = TemporaryDatabaseDirectory("sofa-views")
        var db = try Self.numbers(dir, count: 100)
        var view = db.view(named: "v")
        view.setMap(version: "1", Self.byN)
        #expect(try run(view).count == 100)
        try db.close()
        db = try Database(path: dir.database(), options: testOptions())
        view = db.view(named: "v")
        view.setMap(version: "1") { _, emit in emit("unused", nil) }
        #expect(try run(view).count == 100 && view.shared.mapCalls.count.load(ordering: .relaxed) == 0)
        view.setMap(version: "2") { doc, emit in emit("x", doc["n"]) }
        let rows = try run(view)
        #expect(rows.count == 100 && rows.allSatisfy { $0.key == "x" })
        #expect(view.shared.mapCalls.count.load(ordering: .relaxed) == 100)
        // Adding a reduce under the same version is a different index too.
        view.setMapReduce(version: "2", map: { doc, emit in emit("x", doc["n"]) }, reduce: .count)
        #expect(try run(view).first?.value == 100)
        expectSound(view)
    }

    /// `documentType` limits mapping to one type.
    @Test func documentTypeFilter() throws {
        let dir = TemporaryDatabaseDirectory("sofa-views")
        let db = try Self.numbers(dir, count: 10)
        try db.put(["n": 99, "type": "other"], id: "x")
        let view = db.view(named: "typed")
        view.documentType = "num"
        view.setMap(version: "1", Self.byN)
        #expect(try run(view).count == 10 && view.shared.mapCalls.count.load(ordering: .relaxed) == 10)
        expectSound(view)
    }

    /// NaN keys or values fail the update naming the document; nothing of it becomes visible.
    @Test func unencodableEmitFailsTheWholeUpdate() throws {
        let dir = TemporaryDatabaseDirectory("sofa-views")
        let db = try Self.numbers(dir, count: 50)
        let view = db.view(named: "nan")
        view.setMap(version: "1") { doc, emit in
            let n = doc["n"]?.doubleValue ?? 0
            emit(n == 1000 ? .number(.nan) : .number(n), n == 1001 ? .number(.infinity) : nil)
        }
        try view.updateIndex()
        let good = view.lastSequenceIndexed
        for (id, n) in [("bad-key", 1000.0), ("bad-value", 1001.0)] {
            try db.put(["n": .number(n)], id: id)
            do {
                try view.updateIndex()
                Issue.record("update with \(id) should fail")
            } catch let error as SofaError {
                #expect(error.code == .invalidValue && error.message.contains(id), "\(error)")
            }
            #expect(view.lastSequenceIndexed == good && view.totalRows == 50)
            try db.delete(id: id, rev: try #require(try db.document(id: id)).revisionID)
        }
        try view.updateIndex()
        #expect(view.totalRows == 50 && !view.isStale)
        expectSound(view)
    }

    /// A failed update leaves no mapping running: when a batch fails (a key that cannot be indexed), the next
    /// batch, already mapping on other threads, is waited for before `updateIndex()` throws.
    @Test func failedUpdateLeavesNoMappingRunning() throws {
        let dir = TemporaryDatabaseDirectory("sofa-views")
        let db = try Self.numbers(dir, count: ViewIndex.batchSize + 2000)
        let view = db.view(named: "slow")
        view.setMap(version: "1") { doc, emit in
            let n = doc["n"]?.doubleValue ?? 0
            // IDs "n0"… are mapped in byte order: the last 2,000 (the second batch) are mostly n ≥ 8192, slow.
            if n >= Double(ViewIndex.batchSize) { usleep(300) }
            emit(n == 0 ? .number(.nan) : .number(n), nil)  // the first batch fails
        }
        #expect(throws: SofaError.self) { try view.updateIndex() }
        let calls = view.shared.mapCalls.count.load(ordering: .relaxed)
        usleep(200_000)
        #expect(view.shared.mapCalls.count.load(ordering: .relaxed) == calls,
                "a batch went on mapping after updateIndex() threw")
        #expect(view.totalRows == 0)
    }

    /// A custom reduce that collects its input instead of summarizing it is refused (CouchDB's reduce_limit).
    @Test func reduceThatDoesNotShrinkFails() throws {
        let dir = TemporaryDatabaseDirectory("sofa-views")
        let db = try Self.numbers(dir, count: 2000)
        let view = db.view(named: "grow")
        view.setMapReduce(version: "1", map: Self.byN, reduce: .custom { _, values, _ in .array(values) })
        #expect(throws: SofaError.self) { try view.updateIndex() }
        do { try view.updateIndex() } catch let error as SofaError { #expect(error.code == .reduceOverflow) }
        #expect(view.totalRows == 0)
        // A summarizing one is fine.
        view.setMapReduce(version: "2", map: Self.byN, reduce: .custom { _, values, _ in
            .number(values.compactMap(\.doubleValue).max() ?? 0)
        })
        #expect(try run(view).first?.value == 1999)
        expectSound(view)
    }

    /// A custom reduce that throws on one leaf of a large update (its leaves reduced on every core) fails the
    /// whole update with its error and leaves the previous commit as it was; the next update, once the document
    /// is fixed, equals a rebuild.
    @Test func reduceErrorOnAWorkerFailsTheWholeUpdate() throws {
        struct Poisoned: Error {}
        let dir = TemporaryDatabaseDirectory("sofa-views")
        // ~200 rows leaves, every one touched by the update: more than BTree.parallelLeafThreshold.
        let db = try Self.numbers(dir, count: 20_000)
        let reduce = Reduce.custom { _, values, _ in
            if values.contains(.number(-1)) { throw Poisoned() }
            return .number(values.compactMap(\.doubleValue).reduce(0, +))
        }
        let view = db.view(named: "sum")
        view.setMapReduce(version: "1", map: Self.byN, reduce: reduce)
        try view.updateIndex()
        let before = try run(view) { $0.mapOnly = true }
        let sequence = view.lastSequenceIndexed
        try db.inBatch {
            for i in stride(from: 0, to: 20_000, by: 4) {
                let doc = try #require(try db.document(id: "n\(i)"))
                try db.put(["n": .number(i == 4000 ? -1 : Double(i) + 0.5), "type": "num"], id: doc.id,
                           rev: doc.revisionID)
            }
        }
        do {
            try view.updateIndex()
            Issue.record("the update should fail")
        } catch let error as SofaError {
            #expect(error.code == .reduceFailed, "\(error)")
        }
        #expect(view.lastSequenceIndexed == sequence)
        #expect(try run(view) { $0.mapOnly = true; $0.indexUpdateMode = .never } == before)
        let doc = try #require(try db.document(id: "n4000"))
        try db.put(["n": 4000.5, "type": "num"], id: doc.id, rev: doc.revisionID)
        try view.updateIndex()
        let rebuilt = db.view(named: "rebuilt")
        rebuilt.setMapReduce(version: "1", map: Self.byN, reduce: reduce)
        #expect(try run(view) { $0.mapOnly = true } == run(rebuilt) { $0.mapOnly = true })
        #expect(try run(view).first?.value == run(rebuilt).first?.value)
        expectSound(view)
    }

    /// stats, count and sum over ranges and groups; View.totalValues.
    @Test func builtInReduces() throws {
        let dir = TemporaryDatabaseDirectory("sofa-views")
        let db = try Self.numbers(dir, count: 1000)
        let stats = db.view(named: "stats")
        stats.setMapReduce(version: "1", map: { doc, emit in emit(doc["n"] ?? nil, doc["n"]) }, reduce: .stats)
        let all = try #require(try run(stats).first?.value)
        #expect(all == ["sum": 499_500, "count": 1000, "min": 0, "max": 999, "sumsqr": 332_833_500])
        let range = try #require(try run(stats) { $0.startKey = 10; $0.endKey = 12 }.first?.value)
        #expect(range == ["sum": 33, "count": 3, "min": 10, "max": 12, "sumsqr": 365])
        #expect(try run(stats) { $0.startKey = 5000 }.isEmpty)  // no rows: no reduced row
        #expect(View.totalValues([1, 2.5, "x", nil, [1]]) == 3.5)
        expectSound(stats)
    }

    /// An index written under another ICU collator version is re-sorted from its stored keys on open.
    @Test func otherCollatorVersionIsResorted() throws {
        let dir = TemporaryDatabaseDirectory("sofa-views")
        var db = try Database(path: dir.database(), options: testOptions())
        let words = ["b", "A", "a", "aa", "B", "~", "1", "é", "e"]
        for (i, w) in words.enumerated() { try db.put(["w": .string(w)], id: "w\(i)") }
        var view = db.view(named: "words")
        view.setMapReduce(version: "1", map: { doc, emit in emit(doc["w"] ?? nil, 1) }, reduce: .count)
        let expected = keys(try run(view) { $0.mapOnly = true })
        #expect(expected == ["~", "1", "a", "A", "aa", "b", "B", "e", "é"])
        // Rewrite the index as another ICU would have: other key bytes (here: the doc ID), a fake version.
        let index = try #require(try view.index())
        let old = try index.snapshot()
        let rows = TreeBuilder(file: index.storage, configuration: index.rowsConfiguration)
        var fakeRows: [([UInt8], [UInt8])] = [], back: [([UInt8], [UInt8])] = []
        try old.rows.forEach { key, value in
            let row = try RowValue(value)
            let id = try RowKey.documentID(key, keyLength: row.keyLength)
            let fake: [UInt8] = [0x40] + id.reversed() + [0x01, 0x01, 0x00]
            fakeRows.append((RowKey.make(key: fake, id: id, index: 0),
                             RowValue.encode(keyLength: fake.count, sequence: row.sequence, key: row.key,
                                             value: row.value)))
            back.append((id, BackIndexEntry.encode([fake])))
            return true
        }
        for (k, v) in fakeRows.sorted(by: { compareArrays($0.0, $1.0) < 0 }) { try rows.add(key: k, value: v) }
        let backBuilder = TreeBuilder(file: index.storage, configuration: index.backConfiguration)
        for (k, v) in back.sorted(by: { compareArrays($0.0, $1.0) < 0 }) { try backBuilder.add(key: k, value: v) }
        var header = old.header
        header.collatorVersion = [0xFA, 0xCE, 0, 1]
        try index.commit(rows: try rows.finish(), backIndex: try backBuilder.finish(), header: header)
        try db.close()
        #expect(keys(try { () throws -> QueryEnumerator in
            // Read-only opening does not re-sort: the stale order shows the fake keys were in effect.
            let ro = try Database(path: dir.database(), options: testOptions(readOnly: true))
            defer { try? ro.close() }
            return try run(ro.view(named: "words")) { $0.mapOnly = true }
        }()) != expected)
        db = try Database(path: dir.database(), options: testOptions())
        view = db.view(named: "words")
        view.setMapReduce(version: "1", map: { doc, emit in emit(doc["w"] ?? nil, 1) }, reduce: .count)
        #expect(keys(try run(view) { $0.mapOnly = true; $0.indexUpdateMode = .never }) == expected)
        #expect(try view.index()?.header.collatorVersion == CollationKey.collatorVersion)
        #expect(try run(view).first?.value == .number(Double(words.count)))
        expectSound(view)
    }

    /// deleteIndex rebuilds on the next query; delete removes the view; update modes.
    @Test func deletionAndUpdateModes() throws {
        let dir = TemporaryDatabaseDirectory("sofa-views")
        let db = try Self.numbers(dir, count: 20)
        let view = db.view(named: "d")
        view.setMap(version: "1", Self.byN)
        #expect(try run(view).count == 20)
        try db.put(["n": 100], id: "new")
        let stale = try run(view) { $0.indexUpdateMode = .never }
        #expect(stale.count == 20 && stale.isStale && view.isStale)
        let after = try run(view) { $0.indexUpdateMode = .after }
        #expect(after.count == 20)
        for _ in 0..<200 where view.isStale { usleep(10_000) }
        #expect(!view.isStale)
        #expect(try run(view) { $0.indexUpdateMode = .never }.count == 21)
        try view.deleteIndex()
        #expect(view.lastSequenceIndexed == 0 && view.totalRows == 0)
        #expect(try run(view).count == 21)
        expectSound(view)
        #expect(try db.viewNames == ["d"] && db.existingView(named: "d") != nil)
        try view.delete()
        #expect(try db.viewNames.isEmpty && db.existingView(named: "d") == nil)
    }
}

/// Conflicts, failing reduce functions and read-only databases.
@Suite struct ViewEdgeTests {
    /// Views index the winning revision; when the winner changes, so do the rows.
    @Test func indexesTheWinningRevision() throws {
        let dir = TemporaryDatabaseDirectory("sofa-views")
        let db = try Database(path: dir.database(), options: testOptions())
        let mine = try db.put(["title": "Mine"], id: "t")
        let view = db.view(named: "titles")
        view.setMap(version: "1") { doc, emit in emit(doc["title"] ?? nil, doc["_rev"]) }
        #expect(keys(try run(view)) == ["Mine"])
        // A conflicting replicated branch with a higher generation wins.
        try db.forceInsert(["title": "Theirs"], id: "t", revisionHistory: ["2-bb", "1-aa"])
        let theirs = try run(view)
        #expect(keys(theirs) == ["Theirs"] && theirs[0].value == "2-bb")
        // Deleting the winner makes the other leaf win again.
        try db.delete(id: "t", rev: "2-bb")
        let again = try run(view)
        #expect(keys(again) == ["Mine"] && again[0].value == .string(mine.revisionID))
        expectSound(view)
    }

    @Test func reduceFunctionThatThrows() throws {
        struct Oops: Error {}
        let dir = TemporaryDatabaseDirectory("sofa-views")
        let db = try Database(path: dir.database(), options: testOptions())
        try db.put(["n": 1], id: "a")
        let view = db.view(named: "throws")
        view.setMapReduce(version: "1", map: { doc, emit in emit(doc["n"] ?? nil, nil) },
                          reduce: .custom { _, _, _ in throw Oops() })
        expectSofaError(.reduceFailed) { try view.updateIndex() }
        #expect(view.totalRows == 0 && view.lastSequenceIndexed == 0)
        // Map-only queries of the same view still need the index; the next version fixes the reduce.
        view.setMapReduce(version: "2", map: { doc, emit in emit(doc["n"] ?? nil, nil) }, reduce: .count)
        #expect(try run(view).first?.value == 1)
        expectSound(view)
    }

    @Test func readOnlyDatabase() throws {
        let dir = TemporaryDatabaseDirectory("sofa-views")
        var db = try Database(path: dir.database(), options: testOptions())
        try db.put(["n": 1], id: "a")
        let written = db.view(named: "n")
        written.setMap(version: "1") { doc, emit in emit(doc["n"] ?? nil, nil) }
        try written.updateIndex()
        try db.put(["n": 2], id: "b")
        try db.close()
        db = try Database(path: dir.database(), options: testOptions(readOnly: true))
        let view = db.view(named: "n")
        view.setMap(version: "1") { doc, emit in emit(doc["n"] ?? nil, nil) }
        // The index answers as it was; it cannot be brought up to date.
        #expect(keys(try run(view)) == [1] && view.isStale)
        expectSofaError(.readOnly) { try view.updateIndex() }
        #expect(try run(db.view(named: "missing")).isEmpty)
        #expect(try db.viewNames == ["n"])
    }
}

/// Re-registering a view without its reduce drops the stored reductions: queries return map rows.
@Suite struct ViewReRegistrationTests {
    @Test func droppingTheReduce() throws {
        let dir = TemporaryDatabaseDirectory("sofa-views")
        var db = try Database(path: dir.database(), options: testOptions())
        try db.put(["n": 1], id: "a")
        try db.put(["n": 2], id: "b")
        var view = db.view(named: "r")
        view.setMapReduce(version: "1", map: { doc, emit in emit(doc["n"] ?? nil, doc["n"]) }, reduce: .sum)
        #expect(try run(view).first?.value == 3)
        try db.close()
        db = try Database(path: dir.database(), options: testOptions())
        // Opened by name only, the stored built-in reduce still answers.
        #expect(try run(db.view(named: "r")) { $0.indexUpdateMode = .never }.first?.value == 3)
        view = db.view(named: "r")
        view.setMap(version: "1") { doc, emit in emit(doc["n"] ?? nil, doc["n"]) }
        let rows = try run(view)
        #expect(keys(rows) == [1, 2] && rows.map(\.value) == [1, 2])
        expectSound(view)
    }
}
