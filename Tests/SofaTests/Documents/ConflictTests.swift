import Testing

@testable import Sofa

/// Replication-style inserts, conflicting branches, CouchDB's winner rules, resolution and pruning.
@Suite struct ConflictTests {
    @Test func forceInsertBuildsBranchesAndPicksCouchDBsWinner() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions())
        #expect(try db.forceInsert(["v": "a"], id: "doc", revisionHistory: ["2-aa", "1-root"]))
        #expect(try db.forceInsert(["v": "a"], id: "doc", revisionHistory: ["2-aa", "1-root"]) == false, "no-op")
        #expect(try db.forceInsert(["v": "b"], id: "doc", revisionHistory: ["2-bb", "1-root"]))
        var doc = try #require(try db.document(id: "doc"))
        #expect(doc.revisionID == "2-bb", "same generation: higher revision ID wins")
        #expect(doc.conflictingRevisions == ["2-aa"])
        #expect(doc.revisionHistory == ["2-bb", "1-root"])
        #expect(try db.document(id: "doc", rev: "2-aa")?.userProperties == ["v": "a"])
        #expect(try db.document(id: "doc", rev: "1-root") == nil, "non-leaf revisions keep no body")

        // A longer branch wins over a higher ID.
        #expect(try db.forceInsert(["v": "a3"], id: "doc", revisionHistory: ["3-00", "2-aa", "1-root"]))
        doc = try #require(try db.document(id: "doc"))
        #expect(doc.revisionID == "3-00" && doc.conflictingRevisions == ["2-bb"])

        // A deleted leaf loses to any live one, however long.
        #expect(try db.forceInsert([:], id: "doc", revisionHistory: ["5-zz", "4-zz", "3-00"], deleted: true))
        doc = try #require(try db.document(id: "doc"))
        #expect(doc.revisionID == "2-bb" && doc.conflictingRevisions.isEmpty && !doc.isDeleted)
        #expect(db.documentCount == 1)

        // A new live sibling conflicts again; resolving is deleting the losing live leaf.
        #expect(try db.forceInsert(["v": "c"], id: "doc", revisionHistory: ["2-cc", "1-root"]))
        doc = try #require(try db.document(id: "doc"))
        #expect(doc.revisionID == "2-cc" && doc.conflictingRevisions == ["2-bb"])
        try db.delete(id: "doc", rev: "2-bb")
        doc = try #require(try db.document(id: "doc"))
        #expect(doc.revisionID == "2-cc" && doc.conflictingRevisions.isEmpty)
        // Updating the winner works; updating a non-leaf does not.
        let next = try db.put(["v": "d"], id: "doc", rev: "2-cc")
        #expect(next.revisionID.hasPrefix("3-"))
        expectSofaError(.conflict) { try db.put(["v": "e"], id: "doc", rev: "1-root") }
        expectSound(db)
    }

    @Test func editingALosingBranchKeepsTheConflict() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions())
        let base = try db.put(["v": 0], id: "d")
        let mine = try db.put(["v": 1], id: "d", rev: base.revisionID)
        try db.forceInsert(["v": 2], id: "d", revisionHistory: ["2-ffffffffffffffffffffffffffffffff", base.revisionID])
        var doc = try #require(try db.document(id: "d"))
        #expect(doc.revisionID == "2-ffffffffffffffffffffffffffffffff" && doc.conflictingRevisions == [mine.revisionID])
        // Extending my losing branch makes it longer, so it wins; the other leaf is now the conflict.
        let extended = try db.put(["v": 3], id: "d", rev: mine.revisionID)
        doc = try #require(try db.document(id: "d"))
        #expect(doc.revisionID == extended.revisionID)
        #expect(extended.conflictingRevisions == ["2-ffffffffffffffffffffffffffffffff"])
        #expect(try db.changes().map(\.isConflicted) == [true])
        expectSound(db)
    }

    @Test func unrelatedHistoryMakesASecondRoot() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions())
        try db.put(["v": 0], id: "d")
        try db.forceInsert(["v": 9], id: "d", revisionHistory: ["3-x", "2-x", "1-x"])
        let doc = try #require(try db.document(id: "d"))
        #expect(doc.revisionID == "3-x" && doc.revisionHistory == ["3-x", "2-x", "1-x"])
        #expect(doc.conflictingRevisions.count == 1)
        expectSound(db)
    }

    @Test func revisionTreesArePrunedToTheConfiguredDepth() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions(revisionTreeDepth: 5))
        var doc = try db.put(["n": 0], id: "d")
        var all = [doc.revisionID]
        for n in 1..<12 {
            doc = try db.put(["n": .number(Double(n))], id: "d", rev: doc.revisionID)
            all.insert(doc.revisionID, at: 0)
        }
        #expect(doc.revisionHistory == Array(all.prefix(5)))
        try db.close()
        let reopened = try Database(path: dir.database(), options: testOptions(revisionTreeDepth: 5))
        #expect(try reopened.document(id: "d")?.revisionHistory == Array(all.prefix(5)))
        // A replicated sibling of the newest revision (its parent is still kept) is a conflict.
        try reopened.forceInsert(["n": 99], id: "d", revisionHistory: ["12-b", all[1]])
        let merged = try #require(try reopened.document(id: "d"))
        #expect(merged.conflictingRevisions.count == 1)
        expectSound(reopened)

        let defaults = try Database(path: dir.database("deep"), options: testOptions())
        var d = try defaults.put(["n": 0], id: "d")
        for n in 1..<30 { d = try defaults.put(["n": .number(Double(n))], id: "d", rev: d.revisionID) }
        #expect(d.revisionHistory.count == 20, "default depth")
    }
}
