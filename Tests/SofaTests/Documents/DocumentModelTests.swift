import Testing

@testable import Sofa

/// Model-based randomized test (RELIABILITY.md R11): puts, updates with right and stale revisions, deletes,
/// force-inserted branches, batches (some throwing midway), reopening — compared with ``DocumentModel`` after
/// every commit: both trees through all-docs queries, counts, winners, conflicts, histories, bodies and the
/// changes feed; `verify()` at every reopen and at the end. Replay a failure with `SOFA_SEED=…`.
@Suite struct DocumentModelTests {
    struct Abort: Error {}

    /// IDs with one-, two-, three- and four-byte UTF-8 characters, so byte order differs from other orders.
    static let idSpace: [String] = (0..<120).map { i in
        ["d\(i)", "é\(i)", "z-\(i)", "雨\(i)", "😀\(i)", "D\(i)"][i % 6]
    }

    /// Commit log chains fold at this length here (the format allows 128), so that folds of every kind of
    /// pending change — updates, deletions, conflicts, documents changed again — happen often.
    static let logLengthLimit = 6

    @Test func randomOperationsAgainstModel() throws {
        for seed in SeededRandom.testSeeds {
            try run(seed: seed, operations: 2000)
        }
    }

    final class Runner {
        var random: SeededRandom
        var json: RandomJSON
        var model: DocumentModel
        var db: Database
        let path: String
        var operations = 0
        /// What the run exercised, so a test that stopped doing anything fails.
        var batches = 0, aborted = 0, reopens = 0, conflictsSeen = 0, prunedSeen = 0
        /// Reopens that read a commit log back, and commits that folded one into the trees (FORMAT.md §10.1.7).
        var reopenedLogs = 0, folds = 0

        init(seed: UInt64, path: String) throws {
            random = SeededRandom(seed: seed)
            json = RandomJSON(seed: seed ^ 0xA5A5)
            json.maximumDepth = 2
            model = DocumentModel(depth: 4)
            self.path = path
            db = try Database(path: path, options: testOptions(revisionTreeDepth: 4))
            db.documents.logLengthLimit = DocumentModelTests.logLengthLimit
        }

        var context: String { "\(random.replayHint), operation \(operations)" }

        func body() -> JSON {
            var members: JSONObject = ["n": .number(Double(Int.random(in: 0..<1000, using: &random)))]
            if Int.random(in: 0..<4, using: &random) == 0 { members["v"] = json.value() }
            if Int.random(in: 0..<40, using: &random) == 0 {
                members["big"] = .string(String(repeating: "x", count: Int.random(in: 1000...5000, using: &random)))
            }
            return .object(members)
        }

        func randomID() -> String { DocumentModelTests.idSpace.randomElement(using: &random)! }

        /// One random operation, applied to the database and, when it succeeds, to `model`.
        func step(_ model: inout DocumentModel) throws {
            operations += 1
            let id = randomID()
            let doc = model.docs[id]
            switch Int.random(in: 0..<100, using: &random) {
            case 0..<30:  // create, or update without a revision
                let live = doc.map { !model.liveLeaves($0).isEmpty } ?? false
                let body = body()
                if live {
                    expectSofaError(.conflict, context) { try db.put(body, id: id) }
                } else {
                    let made = try db.put(body, id: id)
                    var d = doc ?? DocumentModel.Doc()
                    let parent = doc.map { model.winner($0) }
                    let expectedGeneration = (parent.map(DocumentModel.generation) ?? 0) + 1
                    #expect(DocumentModel.generation(made.revisionID) == expectedGeneration, "\(context)")
                    d.revisions[made.revisionID] = .init(parent: parent, deleted: false, body: body)
                    model.store(id, d)
                }
            case 30..<55:  // update a live leaf (usually the winner)
                guard let doc, let leaf = model.liveLeaves(doc).randomElement(using: &random) else { return }
                let body = body()
                let made = try db.put(body, id: id, rev: leaf)
                var d = doc
                d.revisions[made.revisionID] = .init(parent: leaf, deleted: false, body: body)
                model.store(id, d)
            case 55..<65:  // stale revision
                guard let doc else { return }
                let stale = doc.revisions.keys.filter { !model.leaves(doc).contains($0) }.randomElement(using: &random)
                    ?? "1-0000"
                expectSofaError(.conflict, context) { try db.put(body(), id: id, rev: stale) }
                if !model.liveLeaves(doc).contains(stale) {
                    expectSofaError(.conflict, context) { try db.delete(id: id, rev: stale) }
                }
            case 65..<80:  // delete a live leaf
                guard let doc, let leaf = model.liveLeaves(doc).randomElement(using: &random) else { return }
                let made = try db.delete(id: id, rev: leaf)
                var d = doc
                d.revisions[made.revisionID] = .init(parent: leaf, deleted: true, body: [:])
                model.store(id, d)
            default:  // a replicated revision: a branch off any kept revision, or a new root
                let parent = doc?.revisions.keys.randomElement(using: &random)
                var history = parent.map { doc!.revisions.isEmpty ? [] : model.history(doc!, from: $0) } ?? []
                if Int.random(in: 0..<5, using: &random) == 0 { history = [] }
                let generation = (history.first.map(DocumentModel.generation) ?? 0) + 1
                let rev = "\(generation)-r\(UInt32.random(in: 0...UInt32.max, using: &random))"
                let deleted = Int.random(in: 0..<6, using: &random) == 0
                let body = deleted ? [:] : body()
                let inserted = try db.forceInsert(body, id: id, revisionHistory: [rev] + history, deleted: deleted)
                #expect(inserted, "\(context)")
                var d = doc ?? DocumentModel.Doc()
                d.revisions[rev] = .init(parent: history.first, deleted: deleted, body: body)
                model.store(id, d)
                if Int.random(in: 0..<4, using: &random) == 0 {
                    #expect(try db.forceInsert(body, id: id, revisionHistory: [rev] + history) == false, "\(context)")
                }
            }
        }
    }

    func run(seed: UInt64, operations: Int) throws {
        let dir = TemporaryDatabaseDirectory()
        let r = try Runner(seed: seed, path: dir.database())
        var pendingLength = 0
        while r.operations < operations {
            switch Int.random(in: 0..<100, using: &r.random) {
            case 0..<70:
                try r.step(&r.model)
            case 70..<95:  // a batch; one in four throws midway and must leave no trace
                let aborts = Int.random(in: 0..<4, using: &r.random) == 0
                var working = r.model
                let count = Int.random(in: 1...25, using: &r.random)
                do {
                    try r.db.inBatch {
                        for i in 0..<count {
                            if aborts && i == count / 2 { throw Abort() }
                            try r.step(&working)
                        }
                    }
                    #expect(!aborts, "\(r.context)")
                    r.model = working
                    r.batches += 1
                } catch is Abort {
                    #expect(aborts, "\(r.context)")
                    r.aborted += 1
                }
            default:
                expectSound(r.db, r.context)
                if try !r.db.readSnapshot().pending.isEmpty { r.reopenedLogs += 1 }
                try r.db.close()
                r.reopens += 1
                r.db = try Database(path: r.path, options: testOptions(revisionTreeDepth: 4))
                r.db.documents.logLengthLimit = Self.logLengthLimit
            }
            let pendingBefore = pendingLength
            pendingLength = try r.db.readSnapshot().pending.length
            if pendingBefore > 0 && pendingLength == 0 { r.folds += 1 }
            try check(r.db, against: r.model, r.context)
            r.conflictsSeen += r.model.docs.values.filter { r.model.liveLeaves($0).count > 1 }.isEmpty ? 0 : 1
            r.prunedSeen += r.model.docs.values.contains { $0.revisions.values.contains { $0.parent == nil } &&
                DocumentModel.generation(r.model.winner($0)) > 4 } ? 1 : 0
        }
        expectSound(r.db, r.context)
        #expect(r.batches > 50 && r.aborted > 10 && r.reopens > 10, "\(r.context)")
        #expect(r.reopenedLogs > 5 && r.folds > 20, "\(r.context): \(r.reopenedLogs) logs reopened, \(r.folds) folds")
        #expect(r.conflictsSeen > 100 && r.prunedSeen > 100 && r.model.docs.count > 80, "\(r.context)")
    }

    func check(_ db: Database, against model: DocumentModel, _ context: String) throws {
        #expect(db.lastSequence == model.lastSequence, "\(context): lastSequence")
        #expect(db.documentCount == model.liveCount, "\(context): documentCount")
        #expect(db.deletedDocumentCount == model.docs.count - model.liveCount, "\(context): deleted count")

        var query = db.createAllDocumentsQuery()
        query.allDocsMode = .includeDeleted
        let rows = try query.run()
        #expect(ids(rows) == model.sortedIDs, "\(context): by-ID order")
        query.allDocsMode = .showConflicts
        let conflicts = try query.run()
        let conflictsByID = Dictionary(uniqueKeysWithValues: conflicts.map {
            ($0.documentID!, $0.conflictingRevisions)
        })
        for row in rows {
            guard let doc = model.docs[row.documentID!] else { continue }
            let winner = model.winner(doc)
            let deleted = doc.revisions[winner]!.deleted
            #expect(row.value?["rev"]?.stringValue == winner, "\(context): winner of \(row.documentID!)")
            #expect((row.value?["deleted"] == true) == deleted, "\(context): deleted flag")
            #expect(row.sequenceNumber == doc.sequence, "\(context): sequence of \(row.documentID!)")
            let live = model.liveLeaves(doc)
            if !deleted {
                #expect(conflictsByID[row.documentID!] == (live.count > 1 ? live : []), "\(context): conflicts")
            }
        }
        let changes = try db.changes()
        let expected = model.docs.sorted { $0.value.sequence < $1.value.sequence }
        #expect(changes.map(\.documentID) == expected.map(\.key), "\(context): changes order")
        #expect(changes.map(\.sequence) == expected.map(\.value.sequence), "\(context): changes sequences")

        // Full documents for a sample that moves with the sequence (all of them every time would be slow).
        let salt = Int(model.lastSequence % 10)
        for (i, id) in model.sortedIDs.enumerated() where (i + salt) % 10 == 0 {
            let doc = model.docs[id]!
            let got = try #require(try db.document(id: id, includeDeleted: true), "\(context): \(id)")
            let winner = model.winner(doc)
            #expect(got.revisionID == winner && got.isDeleted == doc.revisions[winner]!.deleted, "\(context): \(id)")
            #expect(got.userProperties == doc.revisions[winner]!.body, "\(context): body of \(id)")
            #expect(got.revisionHistory == model.history(doc, from: winner), "\(context): history of \(id)")
            #expect(got.conflictingRevisions == model.liveLeaves(doc).filter { $0 != winner }, "\(context): \(id)")
            for leaf in model.leaves(doc) where leaf != winner {
                #expect(try db.document(id: id, rev: leaf)?.userProperties == doc.revisions[leaf]!.body,
                        "\(context): leaf \(leaf) of \(id)")
            }
        }
    }
}
