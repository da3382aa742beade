import Foundation
import Testing

@testable import Sofa
@testable import SofaStorage

/// The per-level group aggregates of a view index (FORMAT.md §10.2.6): made by the first grouped query at a
/// level, kept exact by every update (changes, deletions, groups appearing and vanishing), kept across a
/// reopen, checked by verify, and absent from old (version 1) files until asked for.
@Suite struct GroupAggregateTests {
    static let reduces: [(String, Reduce?)] = [
        ("sum", .sum), ("stats", .stats), ("count", .count), ("none", nil),
        ("max", .custom { _, values, _ in .number(values.compactMap(\.doubleValue).max() ?? -1) }),
    ]

    /// Key `[g, a, t]`, value `v`.
    static let map: MapFunction = { doc, emit in
        emit([doc["g"] ?? nil, doc["a"] ?? nil, doc["t"] ?? nil], doc["v"])
    }

    static func document(_ i: Int, generation: Int) -> JSON {
        ["g": .string("g\(i % 7)"), "a": .number(Double((i / 7) % (13 + generation))), "t": .number(Double(i)),
         "v": .number(Double((i * 31 + generation) % 97))]
    }

    /// View `h` registered with ``map`` and `reduce` (map only when nil).
    static func registeredView(_ db: Database, reduce: Reduce?) -> View {
        let view = db.view(named: "h")
        if let reduce {
            view.setMapReduce(version: "1", map: map, reduce: reduce)
        } else {
            view.setMap(version: "1", map)
        }
        return view
    }

    /// Puts documents `range` of `generation` (IDs `d<i>`) in one batch.
    static func putDocuments(_ db: Database, _ range: Range<Int>, generation: Int = 0) throws {
        try db.inBatch { for i in range { _ = try db.put(document(i, generation: generation), id: "d\(i)") } }
    }

    /// View `h` (``map``, `reduce`) over `documents` documents of generation 0, indexed.
    static func indexedView(_ db: Database, reduce: Reduce, documents: Int = 200) throws -> View {
        let view = registeredView(db, reduce: reduce)
        try putDocuments(db, 0..<documents)
        try view.updateIndex()
        return view
    }

    /// The grouped rows computed naively from the view's map rows: consecutive rows whose keys' first `level`
    /// items collate equal form a group, shown with its first row's key.
    static func expected(_ view: View, level: Int, reduce: String, _ configure: (inout Query) -> Void = { _ in })
        throws -> [(key: JSON, value: JSON?)] {
        var descending = false
        var rows = Array(try run(view) { q in
            configure(&q)
            q.mapOnly = true
            q.limit = nil
            q.skip = 0
            q.postFilter = nil
            descending = q.descending
        })
        if descending { rows.reverse() }
        var groups: [(key: JSON, values: [Double])] = []
        for row in rows {
            let key: JSON = if case .array(let items) = row.key { .array(Array(items.prefix(level))) } else { row.key }
            let value = row.value?.doubleValue
            if let last = groups.last, JSON.collate(last.key, key) == 0 {
                if let value { groups[groups.count - 1].values.append(value) }
            } else {
                groups.append((key, value.map { [$0] } ?? []))
            }
        }
        return groups.map { g in
            let v = g.values
            let value: JSON? = switch reduce {
            case "sum": .number(v.reduce(0, +))
            case "count": .number(Double(v.count))
            case "stats": ["sum": .number(v.reduce(0, +)), "count": .number(Double(v.count)),
                           "min": .number(v.min()!), "max": .number(v.max()!),
                           "sumsqr": .number(v.reduce(0) { $0 + $1 * $1 })]
            case "max": .number(v.max() ?? -1)
            default: nil
            }
            return (g.key, value)
        }
    }

    static func expectGroups(_ view: View, level: Int, reduce: String, _ context: String,
                             _ configure: (inout Query) -> Void = { _ in }) throws {
        let before = ViewIndex.aggregateQueries.load(ordering: .relaxed)
        let got = try run(view) { q in
            configure(&q)
            q.groupLevel = level
        }
        #expect(ViewIndex.aggregateQueries.load(ordering: .relaxed) > before, "\(context): aggregate path not taken")
        var expected = try Self.expected(view, level: level, reduce: reduce, configure)
        var probe = view.createQuery()
        configure(&probe)
        if probe.descending { expected.reverse() }
        let start = min(probe.skip, expected.count)
        let end = probe.limit.map { min(expected.count, start + $0) } ?? expected.count
        expected = Array(expected[start..<end])
        #expect(got.map(\.key) == expected.map(\.key), "\(context): keys")
        #expect(got.map(\.value) == expected.map(\.value), "\(context): values")
    }

    @Test(arguments: reduces.map(\.0))
    func aggregatesStayExactAcrossUpdatesDeletesAndReopen(reduceName: String) throws {
        let reduce = Self.reduces.first { $0.0 == reduceName }!.1
        let dir = TemporaryDatabaseDirectory("sofa-groups")
        var db = try Database(path: dir.database(), options: testOptions())
        var view = Self.registeredView(db, reduce: reduce)
        try Self.putDocuments(db, 0..<600)
        for level in [1, 2] { try Self.expectGroups(view, level: level, reduce: reduceName, "first query \(level)") }
        #expect(try view.index()?.header.groupLevels == [1, 2])
        expectSound(view, "built")

        // Changes that move rows between groups, create groups ("a" values ≥ 13) and empty whole groups.
        try db.inBatch {
            for i in stride(from: 0, to: 600, by: 3) {
                let doc = try #require(try db.document(id: "d\(i)"))
                _ = try db.put(Self.document(i, generation: 4), id: doc.id, rev: doc.revisionID)
            }
            for i in 0..<600 where i % 7 == 3 || i % 11 == 5 {
                if let doc = try db.document(id: "d\(i)") { try db.delete(id: doc.id, rev: doc.revisionID) }
            }
            for i in 600..<640 { _ = try db.put(Self.document(i, generation: 4), id: "d\(i)") }
        }
        try view.updateIndex()
        #expect(try view.index()?.header.groupLevels == [1, 2])
        expectSound(view, "updated")
        for level in [1, 2] {
            try Self.expectGroups(view, level: level, reduce: reduceName, "after update \(level)")
            try Self.expectGroups(view, level: level, reduce: reduceName, "descending, skip \(level)") { q in
                q.descending = true
                q.skip = 3
                q.limit = 9
            }
            // Ranges that start and end inside groups: the edge groups are partial.
            try Self.expectGroups(view, level: level, reduce: reduceName, "partial edges \(level)") { q in
                q.startKey = ["g1", 2, 100]
                q.endKey = ["g5", 4]
                q.inclusiveEnd = false
            }
            try Self.expectGroups(view, level: level, reduce: reduceName, "one partial group \(level)") { q in
                q.startKey = ["g2", 3, 50]
                q.endKey = ["g2", 3, 400]
                q.descending = true
                swap(&q.startKey, &q.endKey)
            }
        }
        #expect(try Self.expected(view, level: 1, reduce: reduceName).contains { $0.key == ["g3"] })
        // Delete every row of group "g3": its aggregates disappear.
        try db.inBatch {
            for i in 0..<640 where i % 7 == 3 {
                if let doc = try db.document(id: "d\(i)") { try db.delete(id: doc.id, rev: doc.revisionID) }
            }
        }
        try view.updateIndex()
        #expect(try run(view) { $0.groupLevel = 1 }.contains { $0.key == ["g3"] } == false)
        expectSound(view, "group removed")

        try db.close()
        db = try Database(path: dir.database(), options: testOptions())
        view = Self.registeredView(db, reduce: reduce)
        #expect(try view.index()?.header.groupLevels == [1, 2])
        try Self.putDocuments(db, 700..<720, generation: 9)
        for level in [1, 2] { try Self.expectGroups(view, level: level, reduce: reduceName, "reopened \(level)") }
        expectSound(view, "reopened")
        expectSound(db)
    }

    /// verify() recomputes every aggregate: a wrong count, a wrong reduction, a missing group and an entry of
    /// a level the header does not list are each reported.
    @Test func verifyDetectsWrongAggregates() throws {
        let dir = TemporaryDatabaseDirectory("sofa-groups")
        let db = try Database(path: dir.database(), options: testOptions())
        let view = try Self.indexedView(db, reduce: .sum, documents: 300)
        _ = try run(view) { $0.groupLevel = 1 }
        expectSound(view)
        let index = try #require(try view.index())
        let good = try index.snapshot()
        let entries = try good.groups.rows()
        #expect(entries.count == 7)
        func tamper(_ actions: [BTreeAction]) throws -> [SofaError] {
            let writer = BTree(file: index.storage, root: good.groups.root, configuration: index.groupsConfiguration,
                               limit: StorageFile.unlimited)
            try index.commit(rows: good.rows, backIndex: good.backIndex, groups: try writer.modified(by: actions),
                             header: good.header)
            return try view.verify()
        }
        let (key, value) = entries[2]
        let aggregate = try value.withUnsafeBytes { try GroupAggregate($0) }
        let wrongCount = GroupAggregate.encode(rowCount: aggregate.rowCount + 1, reduction: Array(aggregate.reduction),
                                               packedKey: Array(aggregate.packedKey))
        #expect(try tamper([.put(key, wrongCount)]).contains { $0.message.contains("counts") })
        let wrongSum = GroupAggregate.encode(
            rowCount: aggregate.rowCount,
            reduction: withUnsafeBytes(of: (12345.0).bitPattern.littleEndian) { Array($0) },
            packedKey: Array(aggregate.packedKey))
        #expect(try tamper([.put(key, wrongSum)]).contains { $0.message.contains("reduction") })
        #expect(try tamper([.remove(key)]).contains { $0.message.contains("no aggregate") })
        var otherLevel = key
        otherLevel[0] = 3
        #expect(try tamper([.put(otherLevel, value)]).contains {
            $0.message.contains("levels the header does not list")
        })
        try index.commit(rows: good.rows, backIndex: good.backIndex, groups: good.groups, header: good.header)
        expectSound(view)
    }

    /// An index written before the groups tree existed (header version 1, two roots) opens, answers grouped
    /// queries, and gets its aggregates on the first one.
    @Test func versionOneIndexGetsAggregatesOnDemand() throws {
        let dir = TemporaryDatabaseDirectory("sofa-groups")
        var db = try Database(path: dir.database(), options: testOptions())
        var view = try Self.indexedView(db, reduce: .sum)
        let index = try #require(try view.index())
        let current = try index.snapshot()
        var v1 = current.header.encoded()
        v1[0] = 1
        v1.removeLast()  // the level count (0): version 1 ends after the definition
        try index.storage.commit(roots: [current.rows.root, current.backIndex.root], metadata: v1)
        try db.close()
        db = try Database(path: dir.database(), options: testOptions())
        view = Self.registeredView(db, reduce: .sum)
        #expect(try view.index()?.header.groupLevels == [])
        #expect(try view.index()?.storage.latestCommit.roots.count == 2)
        try Self.expectGroups(view, level: 2, reduce: "sum", "version 1 file")
        #expect(try view.index()?.header.groupLevels == [2])
        #expect(try view.index()?.storage.latestCommit.roots.count == 3)
        expectSound(view)
    }

    /// A read-only database answers grouped queries from the rows tree and writes nothing.
    @Test func readOnlyDatabaseDoesNotMaterialize() throws {
        let dir = TemporaryDatabaseDirectory("sofa-groups")
        var db = try Database(path: dir.database(), options: testOptions())
        var view = try Self.indexedView(db, reduce: .sum)
        try db.close()
        db = try Database(path: dir.database(), options: testOptions(readOnly: true))
        view = Self.registeredView(db, reduce: .sum)
        let got = try run(view) { $0.groupLevel = 1 }
        #expect(got.map(\.key) == (0..<7).map { JSON.array([.string("g\($0)")]) })
        #expect(try view.index()?.header.groupLevels == [])
    }

    /// A custom reduce not registered in this process cannot be computed: a grouped query then materializes
    /// nothing (no empty reductions stored), and once the reduce is registered the aggregates are exact.
    @Test func unregisteredCustomReduceDoesNotMaterialize() throws {
        let dir = TemporaryDatabaseDirectory("sofa-groups")
        var db = try Database(path: dir.database(), options: testOptions())
        let max = try #require(Self.reduces.first { $0.0 == "max" }?.1)
        var view = try Self.indexedView(db, reduce: max)
        try db.close()

        db = try Database(path: dir.database(), options: testOptions())
        let unregistered = try #require(db.existingView(named: "h"))
        var query = unregistered.createQuery()
        query.groupLevel = 1
        query.indexUpdateMode = .never
        _ = try? query.run()
        #expect(try unregistered.index()?.header.groupLevels == [])
        view = Self.registeredView(db, reduce: max)
        try Self.expectGroups(view, level: 1, reduce: "max", "registered")
        #expect(try view.index()?.header.groupLevels == [1])
        expectSound(view)
        try db.close()
    }

    /// At most ``ViewHeader/maxGroupLevels`` levels are materialized; others still answer from the rows.
    @Test func levelsAreCapped() throws {
        let dir = TemporaryDatabaseDirectory("sofa-groups")
        let db = try Database(path: dir.database(), options: testOptions())
        let view = try Self.indexedView(db, reduce: .count, documents: 100)
        for level in 1...6 { _ = try run(view) { $0.groupLevel = level } }
        #expect(try view.index()?.header.groupLevels == [1, 2, 3, 4])
        #expect(try run(view) { $0.groupLevel = 6 }.count == 100)
        expectSound(view)
    }

    /// FORMAT.md §10.2.1 says what the header code writes: its version, the level limit and the example's bytes.
    @Test func headerBytesMatchTheFormatDocument() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("FORMAT.md"), encoding: .utf8)
        var header = ViewHeader()
        header.lastSequence = 7
        header.collatorVersion = [0x99, 0x78, 0x00, 0x00]
        header.mapVersion = "1"
        header.reduceKind = 2
        header.groupLevels = [2]
        let bytes = header.encoded()
        #expect(bytes == [0x02, 0x07, 0x04, 0x99, 0x78, 0x00, 0x00, 0x01, 0x31, 0x02, 0x00, 0x01, 0x02])
        let hex = bytes.map { String(format: "%02x", $0) }.joined(separator: " ")
        #expect(text.contains("`\(hex)` (version string \"1\")"))
        #expect(text.contains("u8      format version: \(ViewHeader.formatVersion) (1 is still read)"))
        #expect(text.contains("count of materialized group levels (at most \(ViewHeader.maxGroupLevels))"))
        #expect(text.contains("#### 10.2.6 Groups tree (root 2)"))
    }
}
