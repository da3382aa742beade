import Testing

@testable import Sofa

/// The engine against ``ViewQueryModel`` on random documents and random queries combining every option,
/// with updates, deletions and a reopen in between. Seeds are printed; replay with `SOFA_SEED`.
@Suite struct ViewQueryDifferentialTests {
    static let items: [JSON] = [nil, false, 0, 1, 2.5, "a", "A", "b", "ba", "c", ["a"], ["a": 1]]

    static func randomKey(_ rng: inout SeededRandom) -> JSON {
        switch Int.random(in: 0..<10, using: &rng) {
        case 0...2: return items.randomElement(using: &rng)!
        default: return .array((0..<Int.random(in: 0...3, using: &rng)).map { _ in items.randomElement(using: &rng)! })
        }
    }

    static func randomDocument(_ rng: inout SeededRandom, ids: Int) -> JSON {
        var doc: JSON = ["k": randomKey(&rng), "k2": randomKey(&rng),
                         "v": .number(Double(Int.random(in: -5...100, using: &rng))),
                         "n": .number(Double(Int.random(in: 0...3, using: &rng)))]
        if Int.random(in: 0..<8, using: &rng) == 0 { doc["link"] = .string("d\(Int.random(in: 0..<ids, using: &rng))") }
        if Int.random(in: 0..<8, using: &rng) == 0 { doc["v"] = "not a number" }
        return doc
    }

    /// Emits 0–3 rows: the key, the second key, and a pair; values are numbers, absent, or a redirect.
    static let map: MapFunction = { doc, emit in
        let n = doc["n"]?.intValue ?? 0
        let value: JSON? = doc["link"].map { ["_id": $0] } ?? doc["v"]
        if n >= 1 { emit(doc["k"] ?? nil, value) }
        if n >= 2 { emit(doc["k2"] ?? nil, n == 3 ? nil : value) }
        if n >= 3 { emit([doc["k"] ?? nil, doc["k2"] ?? nil], doc["v"]) }
    }

    static func randomQuery(_ base: Query, _ rng: inout SeededRandom) -> Query {
        var q = base
        func maybe(_ p: Int) -> Bool { Int.random(in: 0..<100, using: &rng) < p }
        if maybe(15) {
            q.keys = (0..<Int.random(in: 0...4, using: &rng)).map { _ in randomKey(&rng) }
        } else {
            if maybe(60) { q.startKey = randomKey(&rng) }
            if maybe(60) { q.endKey = randomKey(&rng) }
            if maybe(20) { q.startKeyDocID = "d\(Int.random(in: 0..<300, using: &rng))" }
            if maybe(20) { q.endKeyDocID = "d\(Int.random(in: 0..<300, using: &rng))" }
            q.inclusiveStart = maybe(70)
            q.inclusiveEnd = maybe(70)
            if maybe(20) { q.prefixMatchLevel = Int.random(in: 1...3, using: &rng) }
        }
        q.descending = maybe(40)
        if maybe(30) { q.limit = Int.random(in: 0...20, using: &rng) }
        if maybe(30) { q.skip = Int.random(in: 0...20, using: &rng) }
        q.mapOnly = maybe(30)
        if maybe(50) { q.groupLevel = Int.random(in: 1...3, using: &rng) }
        if maybe(20) { q.postFilter = { row in (row.value?.doubleValue ?? 1).truncatingRemainder(dividingBy: 2) != 0 } }
        if maybe(15) {
            q.sortDescriptors = [QuerySortDescriptor("value", ascending: maybe(50)), QuerySortDescriptor("key")]
        }
        return q
    }

    @Test(arguments: SeededRandom.testSeeds)
    func randomQueriesMatchTheModel(seed: UInt64) throws {
        print("ViewQueryDifferentialTests seed \(seed)")
        var rng = SeededRandom(seed: seed)
        let dir = TemporaryDatabaseDirectory("sofa-views")
        var db = try Database(path: dir.database(), options: testOptions())
        let reduces: [(String, Reduce?, ViewQueryModel.ModelReduce)] = [
            ("plain", nil, .none), ("sum", .sum, .sum), ("count", .count, .count),
            ("custom", .custom { _, values, _ in .number(View.totalValues(values)) }, .sum),
        ]
        func register(_ db: Database) -> [(View, ViewQueryModel.ModelReduce)] {
            reduces.map { name, reduce, model in
                let view = db.view(named: name)
                if let reduce { view.setMapReduce(version: "1", map: Self.map, reduce: reduce) }
                else { view.setMap(version: "1", Self.map) }
                return (view, model)
            }
        }
        var views = register(db)
        var documents: [String: (properties: JSON, sequence: UInt64)] = [:]
        let idCount = 300
        var compared = 0, reducedRows = 0, emptyResults = 0, fromAggregates = 0
        for round in 0..<6 {
            // Writes: a batch of creations, updates and deletions.
            try db.inBatch {
                for _ in 0..<(round == 0 ? 250 : 40) {
                    let id = "d\(Int.random(in: 0..<idCount, using: &rng))"
                    let current = try db.document(id: id)
                    if current != nil && Int.random(in: 0..<4, using: &rng) == 0 {
                        try db.delete(id: id, rev: current!.revisionID)
                        documents[id] = nil
                    } else {
                        let doc = try db.put(Self.randomDocument(&rng, ids: idCount), id: id, rev: current?.revisionID)
                        documents[id] = (doc.properties, doc.sequence)
                    }
                }
            }
            if round == 3 {
                try db.close()
                db = try Database(path: dir.database(), options: testOptions())
                views = register(db)
            }
            for (view, modelReduce) in views {
                let model = ViewQueryModel(documents: documents, map: Self.map, reduce: modelReduce)
                for i in 0..<40 {
                    let q = Self.randomQuery(view.createQuery(), &rng)
                    let aggregateQueries = ViewIndex.aggregateQueries.load(ordering: .relaxed)
                    let got = try q.run()
                    // Grouped queries without `keys` are answered from the group aggregates (FORMAT.md §10.2.6);
                    // a limit of 0 (without sorting) reads nothing at all.
                    if q.groupLevel > 0 && q.keys == nil && !q.mapOnly && (q.limit != 0 || !q.sortDescriptors.isEmpty) {
                        #expect(try view.index()?.header.groupLevels.contains(UInt8(q.groupLevel)) == true)
                        #expect(ViewIndex.aggregateQueries.load(ordering: .relaxed) > aggregateQueries)
                        fromAggregates += 1
                    }
                    var expected = model.run(q)
                    if !q.sortDescriptors.isEmpty || q.postFilter != nil {
                        let rows = expected.map { e in
                            QueryRow(key: e.key, value: .json(e.value), documentID: e.id, sourceDocumentID: e.source,
                                     sequenceNumber: e.sequence, source: nil)
                        }
                        var filtered = q.postFilter.map { f in rows.filter(f) } ?? rows
                        filtered = Query.sorted(filtered, by: q.sortDescriptors)
                        expected = filtered.map {
                            ($0.key, $0.value, $0.documentID, $0.sourceDocumentID, $0.sequenceNumber)
                        }
                    }
                    let start = min(q.skip, expected.count)
                    let end = q.limit.map { min(expected.count, start + $0) } ?? expected.count
                    let page = Array(expected[start..<end])
                    let context = "\(rng.replayHint) round \(round) view \(view.name) query \(i)"
                    #expect(got.count == page.count, "\(context): \(got.count) rows, model \(page.count)")
                    compared += got.count
                    reducedRows += got.filter { $0.documentID == nil }.count
                    if got.isEmpty { emptyResults += 1 }
                    for (g, e) in zip(got, page) {
                        let same = g.key == e.key && g.value == e.value && g.documentID == e.id
                            && g.sourceDocumentID == e.source && g.sequenceNumber == e.sequence
                        #expect(same, "\(context): \(g.toJSON()) vs model \(e)")
                        if !same { return }
                    }
                    if got.count != page.count { return }
                }
                #expect(view.totalRows == model.rows().count)
                expectSound(view, rng.replayHint)
            }
        }
        print("compared \(compared) rows (\(reducedRows) reduced), \(emptyResults) empty results, "
              + "\(fromAggregates) queries from group aggregates")
        // The random queries must exercise something: many rows, many reduced rows, not mostly empty results.
        #expect(compared > 5000 && reducedRows > 500 && emptyResults < 6 * 4 * 40 / 2, "\(rng.replayHint)")
        #expect(fromAggregates > 100, "\(rng.replayHint)")
        expectSound(db)
    }
}
