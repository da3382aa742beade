import Testing

@testable import Sofa

/// All-documents queries: every mode and option, against a small fixed database.
@Suite struct AllDocsQueryTests {
    /// IDs in byte order: "a", "b", "ba", "bb", "c", "cé", "c😀", "d" (deleted), "e" (conflicted).
    static func makeDatabase(_ dir: TemporaryDatabaseDirectory) throws -> Database {
        let db = try Database(path: dir.database(), options: testOptions())
        for id in ["c", "a", "bb", "ba", "b", "cé", "c😀"] { try db.put(["id": .string(id)], id: id) }
        let d = try db.put(["id": "d"], id: "d")
        try db.delete(id: "d", rev: d.revisionID)
        try db.put(["id": "e"], id: "e")
        try db.forceInsert(["id": "e2"], id: "e", revisionHistory: ["1-ffffffffffffffffffffffffffffffff"])
        return db
    }

    /// Runs the query, checking on the way that ``Query/forEachRow(_:)`` hands out the same rows, in order,
    /// for every query of this suite.
    func run(_ db: Database, _ configure: (inout Query) -> Void,
             sourceLocation: SourceLocation = #_sourceLocation) throws -> QueryEnumerator {
        var query = db.createAllDocumentsQuery()
        configure(&query)
        let result = try query.run()
        var streamed: [QueryRow] = []
        try query.forEachRow { streamed.append($0) }
        #expect(streamed == result.rows, "forEachRow and run() disagree", sourceLocation: sourceLocation)
        #expect(zip(streamed, result).allSatisfy { $0.document == $1.document }, sourceLocation: sourceLocation)
        return result
    }

    @Test func modes() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Self.makeDatabase(dir)
        let all = try run(db) { _ in }
        #expect(ids(all) == ["a", "b", "ba", "bb", "c", "cé", "c😀", "e"])
        #expect(all.totalRows == 8 && all.sequenceNumber == 11)
        #expect(all[0].key == "a" && all[0].sourceDocumentID == "a")
        let aRev = try #require(try db.document(id: "a")).revisionID
        #expect(all[0].value == ["rev": .string(aRev)] && all[0].sequenceNumber == 2)
        #expect(all[0].document?.userProperties == ["id": "a"])
        #expect(all[0].toJSON() == ["id": "a", "key": "a", "value": ["rev": .string(aRev)]])
        #expect(all.allSatisfy { $0.conflictingRevisions.isEmpty })

        let withDeleted = try run(db) { $0.allDocsMode = .includeDeleted }
        #expect(ids(withDeleted) == ["a", "b", "ba", "bb", "c", "cé", "c😀", "d", "e"])
        #expect(withDeleted.totalRows == 9)
        let d = withDeleted[7]
        #expect(d.value?["deleted"] == true && d.document?.isDeleted == true)

        let shown = try run(db) { $0.allDocsMode = .showConflicts }
        #expect(ids(shown) == ids(all))
        #expect(shown.last?.conflictingRevisions.count == 2)
        #expect(shown.last?.conflictingRevisions.first == "1-ffffffffffffffffffffffffffffffff", "winner first")
        let only = try run(db) { $0.allDocsMode = .onlyConflicts }
        #expect(ids(only) == ["e"] && only.totalRows == 1)
        #expect(only[0].toJSON()["conflicts"]?.arrayValue?.count == 2)

        let bySequence = try run(db) { $0.allDocsMode = .bySequence }
        #expect(ids(bySequence) == ["c", "a", "bb", "ba", "b", "cé", "c😀", "e"])
        #expect(bySequence.map(\.key) == [1, 2, 3, 4, 5, 6, 7, 11])
        let recent = try run(db) {
            $0.allDocsMode = .bySequence
            $0.startKey = 6
            $0.descending = true
        }
        #expect(ids(recent) == ["cé", "b", "ba", "bb", "a", "c"])
        let exclusive = try run(db) {
            $0.allDocsMode = .bySequence
            $0.startKey = 2
            $0.endKey = 5
            $0.inclusiveStart = false
            $0.inclusiveEnd = false
        }
        #expect(exclusive.map(\.key) == [3, 4])
        #expect(try ids(run(db) { $0.allDocsMode = .bySequence; $0.keys = [7, 9, 1, 1000] }) == ["c😀", "c"])
        expectSofaError(.invalidArgument) { try run(db) { $0.allDocsMode = .bySequence; $0.startKey = "a" } }
        expectSofaError(.invalidArgument) { try run(db) { $0.allDocsMode = .bySequence; $0.startKey = 1.5 } }
        expectSound(db)
    }

    @Test func rangesInclusivityAndDescending() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Self.makeDatabase(dir)
        #expect(try ids(run(db) { $0.startKey = "b"; $0.endKey = "c" }) == ["b", "ba", "bb", "c"])
        #expect(try ids(run(db) { $0.startKey = "b"; $0.endKey = "c"; $0.inclusiveStart = false }) == ["ba", "bb", "c"])
        #expect(try ids(run(db) { $0.startKey = "b"; $0.endKey = "c"; $0.inclusiveEnd = false }) == ["b", "ba", "bb"])
        #expect(try ids(run(db) { $0.startKey = "bz" }) == ["c", "cé", "c😀", "e"])
        #expect(try ids(run(db) { $0.endKey = "b" }) == ["a", "b"])
        #expect(try ids(run(db) { $0.startKey = "c"; $0.endKey = "b" }).isEmpty)
        #expect(try ids(run(db) { $0.descending = true }) == ["e", "c😀", "cé", "c", "bb", "ba", "b", "a"])
        #expect(try ids(run(db) { $0.descending = true; $0.startKey = "c"; $0.endKey = "b" }) == ["c", "bb", "ba", "b"])
        #expect(try ids(run(db) {
            $0.descending = true; $0.startKey = "c"; $0.endKey = "b"; $0.inclusiveStart = false; $0.inclusiveEnd = false
        }) == ["bb", "ba"])
        #expect(try ids(run(db) { $0.startKey = "" }).count == 8)
        expectSofaError(.invalidArgument) { try run(db) { $0.startKey = 3 } }
        expectSofaError(.invalidArgument) { try run(db) { $0.skip = -1 } }
        expectSofaError(.invalidArgument) { try run(db) { $0.limit = -1 } }
    }

    @Test func prefixMatching() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Self.makeDatabase(dir)
        #expect(try ids(run(db) { $0.startKey = "b"; $0.endKey = "b"; $0.prefixMatchLevel = 1 }) == ["b", "ba", "bb"])
        // Characters beyond U+FFFF after the prefix match too.
        #expect(try ids(run(db) { $0.startKey = "c"; $0.endKey = "c"; $0.prefixMatchLevel = 1 })
                == ["c", "cé", "c😀"])
        #expect(try ids(run(db) {
            $0.startKey = "b"; $0.endKey = "b"; $0.prefixMatchLevel = 1; $0.inclusiveEnd = false
        }) == ["b", "ba", "bb"], "the extended end key is past every match")
        // Descending: the start key is the prefix.
        #expect(try ids(run(db) { $0.descending = true; $0.startKey = "b"; $0.prefixMatchLevel = 1 })
                == ["bb", "ba", "b", "a"])
        #expect(try ids(run(db) { $0.endKey = "b"; $0.prefixMatchLevel = 0 }) == ["a", "b"])
    }

    @Test func skipLimitKeysAndPostFilter() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Self.makeDatabase(dir)
        #expect(try ids(run(db) { $0.skip = 2; $0.limit = 3 }) == ["ba", "bb", "c"])
        #expect(try ids(run(db) { $0.skip = 2; $0.limit = 3; $0.descending = true }) == ["cé", "c", "bb"])
        #expect(try ids(run(db) { $0.limit = 0 }).isEmpty)
        #expect(try ids(run(db) { $0.skip = 100 }).isEmpty)
        #expect(try ids(run(db) { $0.allDocsMode = .includeDeleted; $0.skip = 6; $0.limit = 2 }) == ["c😀", "d"])
        // skip and limit count rows after the filter.
        let filtered = try run(db) {
            $0.postFilter = { $0.documentID!.count == 2 }
            $0.skip = 1
            $0.limit = 2
        }
        #expect(ids(filtered) == ["bb", "cé"])
        #expect(filtered.totalRows == 8, "totalRows ignores ranges, filters and limits")

        #expect(try ids(run(db) { $0.keys = ["c", "zz", "a", "d", "a"] }) == ["c", "a", "a"],
                "given order, missing skipped")
        #expect(try ids(run(db) { $0.keys = ["c", "a", "d"]; $0.allDocsMode = .includeDeleted }) == ["c", "a", "d"])
        #expect(try ids(run(db) { $0.keys = ["c", "a", "b"]; $0.descending = true }) == ["b", "a", "c"])
        #expect(try ids(run(db) { $0.keys = ["c", "a", "b"]; $0.skip = 1; $0.limit = 1 }) == ["a"])
        #expect(try ids(run(db) { $0.keys = ["a", "e"]; $0.allDocsMode = .onlyConflicts }) == ["e"])
        #expect(try ids(run(db) { $0.keys = ["a", "b"]; $0.startKey = "b" }) == ["a", "b"], "keys override ranges")
        expectSofaError(.invalidArgument) { try run(db) { $0.keys = [1] } }
    }

    @Test func resultsCompareAndGoStale() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Self.makeDatabase(dir)
        let first = try run(db) { _ in }
        #expect(!first.isStale)
        #expect(try run(db) { _ in } == first)
        try db.put(["id": "f"], id: "f")
        #expect(first.isStale)
        let second = try run(db) { _ in }
        #expect(second != first && second.sequenceNumber == 12)
        // A row's document comes from the snapshot the query read.
        try db.put(["id": "a2"], id: "a", rev: second[0].value!["rev"]!.stringValue!)
        #expect(second[0].document?.userProperties == ["id": "a"])
        #expect(try run(db) { _ in }[0].document?.userProperties == ["id": "a2"])
        #expect(try second[0].decode([String: String].self) == ["rev": second[0].value!["rev"]!.stringValue!])
    }

    /// forEachRow streams: an error thrown by the body stops the scan at that row and is rethrown; a limit
    /// stops it; inside a batch it sees the batch's writes; a kept row stays valid; a view query and a sorted
    /// query hand out the rows run() returns; bad arguments are rejected before any row.
    @Test func forEachRowStopsSeesBatchesAndFallsBack() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Self.makeDatabase(dir)
        struct Stop: Error {}
        var seen: [String] = []
        #expect(throws: Stop.self) {
            try db.createAllDocumentsQuery().forEachRow { row in
                seen.append(row.documentID!)
                if seen.count == 3 { throw Stop() }
            }
        }
        #expect(seen == ["a", "b", "ba"])

        var limited = db.createAllDocumentsQuery()
        limited.limit = 2
        var kept: [QueryRow] = []
        try limited.forEachRow { kept.append($0) }
        #expect(kept.map(\.documentID) == ["a", "b"])
        #expect(kept[1].document?.userProperties == ["id": "b"] && kept[1].sequenceNumber == 5)

        try db.inBatch {
            try db.put(["id": "aa"], id: "aa")
            var inside: [String] = []
            try db.createAllDocumentsQuery().forEachRow { inside.append($0.documentID!) }
            #expect(inside.prefix(3) == ["a", "aa", "b"])
        }

        var sorted = db.createAllDocumentsQuery()
        sorted.sortDescriptors = [QuerySortDescriptor("key", ascending: false)]
        var sortedRows: [QueryRow] = []
        try sorted.forEachRow { sortedRows.append($0) }
        let sortedResult = try sorted.run()
        #expect(sortedRows == sortedResult.rows && sortedRows.first?.documentID == "e")

        let view = db.view(named: "byID")
        view.setMap(version: "1") { doc, emit in emit(doc["id"] ?? nil, nil) }
        var viewRows: [QueryRow] = []
        try view.createQuery().forEachRow { viewRows.append($0) }
        let viewResult = try view.createQuery().run()
        #expect(!viewRows.isEmpty && viewRows == viewResult.rows)

        var negative = db.createAllDocumentsQuery()
        negative.skip = -1
        var called = false
        expectSofaError(.invalidArgument) { try negative.forEachRow { _ in called = true } }
        #expect(!called)
        expectSound(db)
    }

    /// All-documents rows hold their by-ID entry and decode the ID, key, value and document only when asked:
    /// every field must equal what the row built in full from the document would say, in every mode and on
    /// every path (range scan, by-sequence scan, keys), including a body stored as a value chunk.
    @Test func rowsDecodedOnDemandEqualRowsBuiltInFull() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Self.makeDatabase(dir)
        let long = String(repeating: "x", count: 2_000)  // over the inline limit: a value chunk
        try db.put(["id": "f", "long": .string(long)], id: "f")
        let configurations: [(String, (inout Query) -> Void)] = [
            ("allDocs", { _ in }),
            ("includeDeleted", { $0.allDocsMode = .includeDeleted }),
            ("showConflicts", { $0.allDocsMode = .showConflicts }),
            ("bySequence", { $0.allDocsMode = .bySequence }),
            ("descending range", { $0.startKey = "f"; $0.endKey = "b"; $0.descending = true }),
            ("keys", { $0.keys = ["f", "a", "d", "e"]; $0.allDocsMode = .includeDeleted }),
            ("bySequence keys", { $0.keys = [11, 1, 12]; $0.allDocsMode = .bySequence }),
        ]
        for (name, configure) in configurations {
            let result = try run(db, configure)
            #expect(!result.isEmpty, "\(name)")
            let bySequence = name.hasPrefix("bySequence")
            for row in result {
                let id = try #require(row.documentID, "\(name)")
                let document = try #require(try db.document(id: id, includeDeleted: true), "\(name) \(id)")
                var value: JSONObject = ["rev": .string(document.revisionID)]
                if document.isDeleted { value["deleted"] = true }
                let conflicts = row.conflictingRevisions.isEmpty
                    ? [] : [document.revisionID] + document.conflictingRevisions
                let full = QueryRow(key: bySequence ? .number(Double(document.sequence)) : .string(id),
                                    value: .json(.object(value)), documentID: id, sourceDocumentID: id,
                                    sequenceNumber: document.sequence, conflictingRevisions: conflicts, source: nil)
                #expect(row.key == full.key, "\(name) \(id)")
                #expect(row.value == full.value, "\(name) \(id)")
                #expect(row.sourceDocumentID == id && row.sequenceNumber == document.sequence, "\(name) \(id)")
                #expect(row.conflictingRevisions == conflicts, "\(name) \(id)")
                #expect(row.document == document, "\(name) \(id)")
                #expect(row.toJSON() == full.toJSON(), "\(name) \(id)")
            }
        }
        #expect(try run(db) { $0.keys = ["f"] }[0].document?["long"] == .string(long))
    }

    /// Across several leaves, with deleted and conflicted documents scattered through them: a scan hands its
    /// rows out a run of entries at a time, a conflict row ending a run, so every mode, skip, limit and post
    /// filter (landing inside runs, on conflict rows and across leaves) and both directions give the rows the
    /// model expects, streamed and run alike — from the trees alone, then with pending changes of single
    /// commits cutting the spans. With a filter, the filter and forEachRow's body see the rows alternately.
    @Test func spansOfEntriesAndConflictRowsAgreeWithTheModel() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions())
        var random = SeededRandom(seed: SeededRandom.testSeeds[0])
        var all: Set<String> = [], deleted: Set<String> = [], conflicted: Set<String> = []
        func write(_ n: Int) throws {
            let id = "doc-\(String(n, radix: 7))"
            let pad = String(repeating: "p", count: 40)
            let document = try db.put(["n": .number(Double(n)), "pad": .string(pad)], id: id)
            all.insert(id)
            switch Int.random(in: 0..<10, using: &random) {
            case 0:
                try db.delete(id: id, rev: document.revisionID)
                deleted.insert(id)
            case 1, 2:
                try db.forceInsert(["n": -1], id: id, revisionHistory: ["1-ffffffffffffffffffffffffffffffff"])
                conflicted.insert(id)
            default: break
            }
        }
        try db.inBatch { for n in 0..<1_500 { try write(n) } }
        #expect(try db.readSnapshot().byID.verify().statistics.leafNodes > 3)
        final class Log: @unchecked Sendable { var events: [String] = [] }
        for round in 0..<80 {
            if round == 40 {
                for n in 1_500..<1_540 { try write(n) }  // single commits: pending changes in the commit log
                #expect(try !db.readSnapshot().pending.isEmpty)
            }
            let mode = [AllDocsMode.allDocs, .includeDeleted, .showConflicts, .onlyConflicts][round % 4]
            let descending = Bool.random(using: &random)
            let skip = Int.random(in: 0..<400, using: &random)
            let limit = Bool.random(using: &random) ? Int.random(in: 0..<900, using: &random) : nil
            let filtered = round % 3 == 0
            let kept: @Sendable (String) -> Bool = { "0135".contains($0.last!) }
            var expected = all.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }.filter { id in
                switch mode {
                case .includeDeleted: true
                case .onlyConflicts: conflicted.contains(id) && !deleted.contains(id)
                default: !deleted.contains(id)
                }
            }.filter { !filtered || kept($0) }
            if descending { expected.reverse() }
            expected = Array(expected.dropFirst(skip).prefix(limit ?? .max))
            let context = "\(random.replayHint), round \(round): \(mode), descending \(descending), skip \(skip), "
                + "limit \(String(describing: limit)), filtered \(filtered)"
            let log = Log()
            let configure: (inout Query) -> Void = {
                $0.allDocsMode = mode
                $0.descending = descending
                $0.skip = skip
                $0.limit = limit
                if filtered {
                    $0.postFilter = { row in
                        log.events.append("filter " + row.documentID!)
                        return kept(row.documentID!)
                    }
                }
            }
            let result = try run(db, configure)
            #expect(result.rows.map(\.documentID) == expected, "\(context)")
            let showsConflicts = mode == .showConflicts || mode == .onlyConflicts
            for row in result.rows {
                let id = row.documentID!
                let document = try #require(try db.document(id: id, includeDeleted: true), "\(context): \(id)")
                let conflicts = showsConflicts && !document.conflictingRevisions.isEmpty
                    ? [document.revisionID] + document.conflictingRevisions : []
                #expect(row.conflictingRevisions == conflicts, "\(context): \(id)")
            }
            if filtered {
                var query = db.createAllDocumentsQuery()
                configure(&query)
                log.events = []
                try query.forEachRow { log.events.append("body " + $0.documentID!) }
                // Each row the body gets was the last one the filter saw.
                for (i, event) in log.events.enumerated() where event.hasPrefix("body ") {
                    #expect(i > 0 && log.events[i - 1] == "filter " + event.dropFirst(5), "\(context)")
                }
            }
        }
        #expect(try db.verify().isEmpty)
    }
}
