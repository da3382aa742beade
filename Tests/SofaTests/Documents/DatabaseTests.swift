import Foundation
import Testing

@testable import Sofa
@testable import SofaStorage

/// Puts, updates, deletes, batches, counts and reopening, and every kind of bad input.
@Suite struct DatabaseTests {
    @Test func createUpdateDeleteRecreate() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions())
        let created = try db.put(["title": "Qux", "duration": 235], id: "track-1")
        #expect(created.id == "track-1" && created.sequence == 1 && !created.isDeleted)
        #expect(created.revisionID.hasPrefix("1-") && created.revisionID.count == 34)
        #expect(created.properties == ["_id": "track-1", "_rev": .string(created.revisionID), "title": "Qux",
                                       "duration": 235])
        #expect(created.userProperties == ["title": "Qux", "duration": 235])
        #expect(try db.document(id: "track-1") == created)
        #expect(db.documentCount == 1 && db.lastSequence == 1)

        let updated = try db.put(["title": "Quux"], id: "track-1", rev: created.revisionID)
        #expect(updated.revisionID.hasPrefix("2-") && updated.sequence == 2)
        #expect(updated.revisionHistory == [updated.revisionID, created.revisionID])
        #expect(try db.document(id: "track-1")?.userProperties == ["title": "Quux"])

        let tombstone = try db.delete(id: "track-1", rev: updated.revisionID)
        #expect(tombstone.isDeleted && tombstone.revisionID.hasPrefix("3-"))
        #expect(try db.document(id: "track-1") == nil)
        let deleted = try #require(try db.document(id: "track-1", includeDeleted: true))
        #expect(deleted.isDeleted && deleted.properties["_deleted"] == true)
        #expect(db.documentCount == 0 && db.deletedDocumentCount == 1 && db.lastSequence == 3)

        let recreated = try db.put(["title": "Again"], id: "track-1")
        #expect(recreated.revisionID.hasPrefix("4-"), "recreating extends the tombstone")
        #expect(db.documentCount == 1 && db.deletedDocumentCount == 0)
        expectSound(db)
    }

    /// A flush of a few documents stores the nodes it writes uncompressed; a larger one compresses its nodes
    /// (FORMAT.md §10.1.1). A small commit writes no nodes at all (a log record, §10.1.7), so the few-document
    /// flush is the one a read inside a batch forces. Both read back alike, before and after reopening.
    @Test func smallFlushesWriteTheirPathsUncompressed() throws {
        let dir = TemporaryDatabaseDirectory()
        var db = try Database(path: dir.database(), options: testOptions())
        /// Whether the root of each document tree is stored LZ4-compressed (a compressed chunk reads into memory
        /// of its own, a raw one is a view of the mapping).
        func rootsCompressed() throws -> [Bool] {
            let snapshot = try db.readSnapshot()
            return try [snapshot.byID, snapshot.bySequence].map { tree in
                try snapshot.storage.readChunk(at: tree.root!.offset, kind: nil, limit: tree.limit).isOwned
            }
        }
        func body(_ i: Int) -> JSON {
            ["title": .string("Track \(i)"), "genre": "Jazz", "duration": .number(Double(i))]
        }
        try db.inBatch { for i in 0..<500 { try db.put(body(i), id: "doc-\(1000 + i)") } }
        #expect(try rootsCompressed() == [true, true])
        // A read inside the batch flushes its few documents into the trees: raw nodes.
        try db.inBatch {
            try db.put(body(500), id: "doc-1500")
            #expect(try db.changes(since: 500).count == 1)
        }
        #expect(try rootsCompressed() == [false, false])
        #expect(try db.readSnapshot().pending.isEmpty)
        try db.inBatch {
            for i in 501...(501 + WriteBatch.rawFlushLimit) { try db.put(body(i), id: "doc-\(1000 + i)") }
            #expect(try db.changes(since: 501).count == WriteBatch.rawFlushLimit + 1)
        }
        #expect(try rootsCompressed() == [true, true])
        expectSound(db)
        try db.close()
        db = try Database(path: dir.database(), options: testOptions())
        for i in 0...(501 + WriteBatch.rawFlushLimit) {
            #expect(try db.document(id: "doc-\(1000 + i)")?.userProperties == body(i))
        }
        #expect(db.documentCount == 502 + WriteBatch.rawFlushLimit)
        expectSound(db)
    }

    @Test func equalEditsMakeEqualRevisionsAcrossDatabases() throws {
        let dir = TemporaryDatabaseDirectory()
        let a = try Database(path: dir.database("a"), options: testOptions())
        let b = try Database(path: dir.database("b"), options: testOptions())
        let body: JSON = ["x": [1, 2, ["y": "é"]], "z": nil]
        let ra = try a.put(body, id: "doc"), rb = try b.put(body, id: "doc")
        #expect(ra.revisionID == rb.revisionID)
        let ua = try a.put(["x": 2], id: "doc", rev: ra.revisionID)
        let ub = try b.put(["x": 2], id: "doc", rev: rb.revisionID)
        #expect(ua.revisionID == ub.revisionID)
        #expect(try a.put(["x": 3], id: "other").revisionID != ra.revisionID)
    }

    @Test func specialPropertiesAndGeneratedIDs() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions())
        let generated = try db.put(["a": 1])
        #expect(generated.id.hasPrefix("-") && generated.id.count == 23)
        #expect(try db.put(["a": 1]).id != generated.id)
        let viaProperties = try db.put(["_id": "p", "a": 1])
        #expect(viaProperties.id == "p" && viaProperties.userProperties == ["a": 1])
        // A document read back and put again carries its own _id and _rev.
        var properties = try #require(try db.document(id: "p")).properties
        properties["a"] = 2
        let updated = try db.put(properties)
        #expect(updated.revisionID.hasPrefix("2-") && updated.userProperties == ["a": 2])
        var deletion = updated.properties
        deletion["_deleted"] = true
        let deleted = try db.put(deletion)
        // The special members are the document's own, not among its user properties.
        #expect(deleted.isDeleted && deleted.userProperties == ["a": 2])
        #expect(db.documentCount == 2)
        // Only the top level's names are special: a nested "_x" is the body's own.
        let nested = try db.put(["a": ["_x": 1], "b": [["_id": "q"]]], id: "nested")
        #expect(nested.userProperties == ["a": ["_x": 1], "b": [["_id": "q"]]])
        #expect(try db.document(id: "nested")?.userProperties == nested.userProperties)
        expectSound(db)
    }

    @Test func conflictsAndBadInputAreTypedErrorsAndLoseNothing() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions())
        let doc = try db.put(["v": 1], id: "a")
        let v2 = try db.put(["v": 2], id: "a", rev: doc.revisionID)
        expectSofaError(.conflict, "no rev") { try db.put(["v": 3], id: "a") }
        expectSofaError(.conflict, "stale rev") { try db.put(["v": 3], id: "a", rev: doc.revisionID) }
        expectSofaError(.conflict, "unknown rev") { try db.put(["v": 3], id: "a", rev: "2-abc") }
        expectSofaError(.conflict, "rev for a missing document") { try db.put(["v": 3], id: "b", rev: "1-abc") }
        expectSofaError(.invalidArgument, "malformed rev") { try db.put(["v": 3], id: "a", rev: "two") }
        expectSofaError(.conflict, "stale delete") { try db.delete(id: "a", rev: doc.revisionID) }
        expectSofaError(.notFound, "delete missing") { try db.delete(id: "zz", rev: "1-abc") }
        for bad: JSON in [nil, true, 3, "text", [1, 2]] {
            expectSofaError(.invalidArgument, "non-object \(bad)") { try db.put(bad, id: "n") }
        }
        expectSofaError(.invalidArgument, "reserved member") { try db.put(["_attachments": [:]], id: "n") }
        // A name longer than the serializer's staging buffer is told by its first byte all the same.
        let longReserved = "_" + String(repeating: "x", count: 2000)
        expectSofaError(.invalidArgument, "long reserved member") { try db.put([longReserved: 1, "a": 2], id: "n") }
        // Values are serialized first: a body with a reserved member and NaN reports the NaN.
        expectSofaError(.invalidValue, "NaN and a reserved member") {
            try db.put(["_x": 1, "n": .number(.nan)], id: "n")
        }
        expectSofaError(.invalidArgument, "_id disagrees") { try db.put(["_id": "x"], id: "y") }
        expectSofaError(.invalidValue, "NaN") { try db.put(["n": .number(.nan)], id: "n") }
        expectSofaError(.invalidArgument, "empty ID") { try db.put(["a": 1], id: "") }
        expectSofaError(.invalidArgument, "reserved ID") { try db.put(["a": 1], id: "_design/x") }
        expectSofaError(.invalidArgument, "long ID") { try db.put(["a": 1], id: String(repeating: "x", count: 1025)) }
        #expect(try db.put(["a": 1], id: String(repeating: "é", count: 512)).id.utf8.count == 1024)
        expectSofaError(.invalidArgument, "bad history") {
            try db.forceInsert(["a": 1], id: "f", revisionHistory: ["3-a", "1-b"])
        }
        expectSofaError(.invalidArgument, "empty history") {
            try db.forceInsert(["a": 1], id: "f", revisionHistory: [])
        }
        expectSofaError(.invalidArgument, "negative limit") { try db.changes(limit: -1) }
        // A body over 64 MiB, with and without a special member taken out of it.
        let huge = String(repeating: "x", count: DocumentFile.maximumBodySize)
        expectSofaError(.invalidArgument, "body over 64 MiB") { try db.put(["s": .string(huge)], id: "big") }
        expectSofaError(.invalidArgument, "stripped body over 64 MiB") {
            try db.put(["_id": "big", "s": .string(huge)])
        }
        #expect(try db.document(id: "a") == db.document(id: "a") && db.document(id: "a")?.revisionID == v2.revisionID)
        #expect(db.documentCount == 2 && db.lastSequence == 3, "failed writes assign no sequence")
        expectSound(db)
    }

    /// A put's ID bytes come from a buffer the file reuses (``DocumentFile/idBytes(_:)``): an array kept from one
    /// call is not overwritten by the next, and a batch of IDs out of order — whose overlay index keeps each ID's
    /// array — finds every one of them again when each is updated in the same batch.
    @Test func idBytesOfOnePutAreNotOverwrittenByTheNext() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions())
        // Under the write lock, as a put calls it (the buffer is the writer's).
        try db.inBatch {
            let first = db.documents.idBytes("first")
            let second = db.documents.idBytes("second-id")
            #expect(first == Array("first".utf8) && second == Array("second-id".utf8))
        }
        let ids = (0..<300).map { "doc-\(($0 * 7919) % 300)" }  // every ID once, out of order
        try db.inBatch {
            var created: [String: Document] = [:]
            for id in ids { created[id] = try db.put(["v": 1], id: id) }
            for id in ids { try db.put(["v": 2, "id": .string(id)], id: id, rev: created[id]!.revisionID) }
        }
        #expect(db.documentCount == 300)
        for id in ids { #expect(try db.document(id: id)?.userProperties == ["v": 2, "id": .string(id)]) }
        expectSound(db)
    }

    /// A new document's put is encoded straight from the serializer's buffer
    /// (``DocumentFile/saveFirst(_:revision:body:)``),
    /// which is on the stack up to ~1 KiB of body and an array past it, inline up to the inline limit and a value
    /// chunk past that. At every size around those edges, and with special members taken out, the revision ID is
    /// the one the general derivation gives the stored body, the document reads back equal to what the put
    /// returned, with one revision and no conflicts, and updating it works.
    @Test func aNewDocumentsPutMatchesTheGeneralPathAtEveryBodySize() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions())
        // `{"t":"…"}` is 8 bytes around the text.
        let sizes = [2, 9, 200] + Array(1_010...1_036) + [1_100, 5_000]
        var cases: [(id: String, properties: JSON, body: JSON)] = []
        for size in sizes {
            let body: JSON = size == 2 ? [:] : ["t": .string(String(repeating: "x", count: size - 8))]
            #expect(try body.serializedBytes().count == size)
            cases.append(("plain-\(size)", body, body))
            if case .object(var members) = body {
                members["_id"] = .string("special-\(size)")
                cases.append(("special-\(size)", .object(members), body))
            }
        }
        for batched in [false, true] {
            var returned: [String: Document] = [:]
            let prefix = batched ? "batch-" : "single-"
            let write = {
                for c in cases {
                    // The special member names the ID; the plain case passes it.
                    let id = prefix + c.id
                    var properties = c.properties
                    if case .object(var members) = properties, members["_id"] != nil {
                        members["_id"] = .string(id)
                        properties = .object(members)
                        returned[id] = try db.put(properties)
                    } else {
                        returned[id] = try db.put(properties, id: id)
                    }
                }
            }
            if batched { try db.inBatch(write) } else { try write() }
            for c in cases {
                let id = prefix + c.id
                let doc = try #require(returned[id])
                let stored = try c.body.serializedBytes()
                let expected = RevisionID.derived(parent: nil, deleted: false,
                                                  body: stored == Array("{}".utf8) ? [] : stored)
                #expect(doc.revisionID == expected.description, "\(id)")
                #expect(doc.userProperties == c.body && doc.conflictingRevisions.isEmpty, "\(id)")
                #expect(doc.revisionHistory == [doc.revisionID], "\(id)")
                #expect(try db.document(id: id) == doc, "\(id) reads back as the put returned it")
            }
            // An update of each: its parent is the revision the put stored.
            try db.inBatch {
                for c in cases {
                    let id = prefix + c.id
                    let updated = try db.put(["u": 1], id: id, rev: returned[id]!.revisionID)
                    #expect(updated.revisionHistory == [updated.revisionID, returned[id]!.revisionID], "\(id)")
                }
            }
        }
        #expect(db.documentCount == 2 * cases.count)
        expectSound(db)
    }

    @Test func readOnlyAndClosedDatabases() throws {
        let dir = TemporaryDatabaseDirectory()
        expectSofaError(.notFound, "missing read-only") {
            try Database(path: dir.database(), options: testOptions(readOnly: true))
        }
        #expect(!FileManager.default.fileExists(atPath: dir.database()), "read-only opening creates nothing")
        let writer = try Database(path: dir.database(), options: testOptions())
        let doc = try writer.put(["a": 1], id: "a")
        expectSofaError(.locked, "second writer") { try Database(path: dir.database(), options: testOptions()) }
        try writer.close()
        try writer.close()
        expectSofaError(.invalidArgument, "closed") { try writer.document(id: "a") }
        expectSofaError(.invalidArgument, "closed") { try writer.put(["a": 1], id: "b") }

        let reader = try Database(path: dir.database(), options: testOptions(readOnly: true))
        #expect(try reader.document(id: "a") == doc)
        expectSofaError(.readOnly, "put") { try reader.put(["a": 2], id: "a", rev: doc.revisionID) }
        expectSofaError(.readOnly, "delete") { try reader.delete(id: "a", rev: doc.revisionID) }
        expectSofaError(.readOnly, "batch") { try reader.inBatch {} }
        expectSofaError(.readOnly, "forceInsert") {
            try reader.forceInsert(["a": 1], id: "a", revisionHistory: ["1-x"])
        }
        #expect(reader.documentCount == 1)
        expectSound(reader)
    }

    @Test func batchIsOneCommitAndRollsBackOnError() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions())
        let kept = try db.put(["n": 0], id: "kept")
        try db.inBatch {
            for i in 0..<100 { try db.put(["n": .number(Double(i))], id: "d\(i)") }
            // Inside the batch this thread reads its own writes, and they can be updated again.
            let d5 = try #require(try db.document(id: "d5"))
            try db.put(["n": 500], id: "d5", rev: d5.revisionID)
            #expect(db.lastSequence == 102)
            #expect(try db.createAllDocumentsQuery().run().count == 101)
        }
        #expect(db.lastSequence == 102 && db.documentCount == 101)
        #expect(try db.changes(since: 1).count == 100, "each document once")
        struct Stop: Error {}
        #expect(throws: Stop.self) {
            try db.inBatch {
                try db.put(["n": 1], id: "kept", rev: kept.revisionID)
                for i in 0..<50 { try db.put(["n": 1], id: "new\(i)") }
                throw Stop()
            }
        }
        #expect(db.lastSequence == 102 && db.documentCount == 101)
        #expect(try db.document(id: "new0") == nil && db.document(id: "kept") == kept)
        try db.put(["n": 1], id: "after")
        #expect(db.lastSequence == 103)
        expectSound(db)
        try db.close()
        let reopened = try Database(path: dir.database(), options: testOptions())
        #expect(reopened.lastSequence == 103 && reopened.documentCount == 102)
        #expect(try reopened.document(id: "d5")?.userProperties == ["n": 500])
        expectSound(reopened)
    }

    @Test func largeBodiesAreStoredAsChunks() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions())
        let big: JSON = ["text": .string(String(repeating: "lorem ipsum ", count: 2000)), "n": 1]
        let doc = try db.put(big, id: "big")
        let updated = try db.put(["text": "small"], id: "big", rev: doc.revisionID)
        let again = try db.put(big, id: "big", rev: updated.revisionID)
        try db.close()
        let reopened = try Database(path: dir.database(), options: testOptions())
        #expect(try reopened.document(id: "big")?.userProperties == big)
        #expect(try reopened.document(id: "big")?.revisionID == again.revisionID)
        expectSound(reopened)
    }

    @Test func readersSeeCommittedSnapshotsWhileAWriterWrites() async throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions())
        try db.inBatch { for i in 0..<200 { try db.put(["n": 0], id: "d\(i)") } }
        // The writer bumps every document's "n" in one batch per round; a reader must never see a mix.
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for round in 1...20 {
                    try db.inBatch {
                        for i in 0..<200 {
                            let doc = try #require(try db.document(id: "d\(i)"))
                            try db.put(["n": .number(Double(round))], id: doc.id, rev: doc.revisionID)
                        }
                    }
                }
            }
            for _ in 0..<2 {
                group.addTask {
                    for _ in 0..<30 {
                        let rows = try db.createAllDocumentsQuery().run()
                        let values = Set(rows.compactMap { $0.document?.userProperties["n"] })
                        #expect(values.count == 1, "one commit's values, got \(values)")
                        #expect(rows.count == 200)
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(db.lastSequence == 200 * 21)
        expectSound(db)
    }
}
