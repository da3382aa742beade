import Testing

@testable import Sofa
@testable import SofaStorage

/// The overlay's byte-buffer layout (``WriteBatch/Changes``) against a model: an array of (ID, state) in
/// first-write order, as the overlay held them before. Appends and replacements in random order; after each, every
/// accessor agrees with the model, and emptying keeps the storage.
@Suite struct WriteBatchChangesTests {
    /// A random state: a body of 0–299 bytes, one to four revisions.
    static func state(_ random: inout SeededRandom, sequence: UInt64) -> WriteBatch.Pending {
        func body() -> [UInt8] {
            (0..<Int(random.next() % 300)).map { _ in UInt8(ascii: "a") + UInt8(random.next() % 26) }
        }
        let first = body()
        var id = RevisionID.derived(parent: nil, deleted: false, body: first)
        func stored(_ body: [UInt8]) -> StoredBody { body.isEmpty ? .empty : .inline(body) }
        var tree = RevisionTree(first: id, deleted: random.next() % 5 == 0, body: stored(first))
        for _ in 0..<Int(random.next() % 4) {
            let next = body()
            let child = RevisionID.derived(parent: id, deleted: false, body: next)
            tree.addChild(of: tree.index(of: id)!, id: child, deleted: false, body: stored(next))
            id = child
        }
        tree.prune(depth: 20)  // in stored order, winner first, as `save` leaves it
        let stored: UInt64? = random.next() % 3 == 0 ? nil : random.next() % 1000
        return WriteBatch.Pending(record: DocumentRecord(sequence: sequence, tree: tree), storedSequence: stored,
                                  storedFlags: stored == nil ? 0 : UInt8(random.next() % 4))
    }

    @Test func agreesWithTheModel() throws {
        var random = SeededRandom(seed: 13)
        var changes = WriteBatch.Changes()
        var model: [(id: [UInt8], state: WriteBatch.Pending)] = []
        var sequence: UInt64 = 0
        for step in 0..<600 {
            sequence += 1
            let state = Self.state(&random, sequence: sequence)
            if !model.isEmpty && random.next() % 4 == 0 {
                let i = Int(random.next() % UInt64(model.count))
                let before = changes.bytes.count
                let fits = state.record.encodedSize <= model[i].state.record.encodedSize
                let grown = changes.replace(at: i, with: state)
                #expect(grown == (fits ? 0 : state.record.encodedSize) && changes.bytes.count == before + grown,
                        "a record that fits is written in place; one that does not is appended")
                model[i].state = state
            } else {
                let id = Array("doc-\(random.next() % 100_000)-\(step)".utf8)
                changes.append(id, state)
                model.append((id, state))
            }
            if step % 50 != 49 { continue }

            #expect(changes.count == model.count)
            for i in model.indices {
                #expect(changes.id(at: i) == model[i].id)
                let decoded = try changes.state(at: i, path: "test")
                #expect(decoded.record == model[i].state.record)
                #expect(decoded.storedSequence == model[i].state.storedSequence)
                #expect(decoded.storedFlags == model[i].state.storedFlags)
                let j = Int(random.next() % UInt64(model.count))
                let order = compareArrays(model[i].id, model[j].id).signum()
                #expect(changes.compareID(at: i, to: model[j].id).signum() == order)
                #expect(changes.compareIDs(i, j).signum() == order)
                #expect(changes.withID(at: i) { Array($0) } == model[i].id)
            }
            var visited = 0
            changes.forEach { i, id, record, entry in
                #expect(i == visited && Array(id) == model[i].id)
                #expect(Array(record) == model[i].state.record.encoded())
                #expect(entry.sequence == model[i].state.record.sequence)
                visited += 1
            }
            #expect(visited == model.count)
            let sorted = changes.sortedByID()
            #expect(sorted.map { model[$0].id } == model.map(\.id).sorted { compareArrays($0, $1) < 0 })
            var inOrder: [[UInt8]] = []
            changes.forEach(in: sorted) { _, id, _, _ in inOrder.append(Array(id)) }
            #expect(inOrder == sorted.map { model[$0].id })
        }

        let capacity = changes.capacityBytes
        changes.removeAll(keepingCapacity: true)
        #expect(changes.isEmpty && changes.capacityBytes == capacity)
    }

    static func bufferAddress(_ changes: WriteBatch.Changes) -> UnsafeRawPointer? {
        changes.bytes.withUnsafeBytes { $0.baseAddress.map { UnsafeRawPointer($0) } }
    }

    /// The overlay's buffers go from chunk to chunk and from batch to batch without being copied: the next
    /// batch's overlay starts in the storage the last one left, at the same address.
    @Test func buffersPassFromBatchToBatch() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions())
        var n = 0
        var address: UnsafeRawPointer?
        for round in 0..<3 {
            try db.inBatch {
                let batch = try #require(db.documents.batch)
                if round > 0 { #expect(Self.bufferAddress(batch.changes) == address, "round \(round): storage reused") }
                for _ in 0..<(3 * WriteBatch.pipelineChunk + 10) {
                    try db.put(["n": .number(Double(n))], id: "doc-\(100_000 + n)")
                    n += 1
                }
                #expect(batch.chunksHandedOff == 3)
            }
            address = Self.bufferAddress(db.documents.spareChanges)
            #expect(address != nil && db.documents.spareChanges.isEmpty)
            // A small batch in between takes the storage and gives it back.
            try db.inBatch {
                #expect(Self.bufferAddress(try #require(db.documents.batch).changes) == address)
                try db.put(["n": -1], id: "a-extra-\(round)")  // below the bulk IDs: the next batch still appends
            }
            #expect(Self.bufferAddress(db.documents.spareChanges) == address)
        }
        #expect(db.documentCount == n + 3)
        expectSound(db)
    }

    /// A document updated again and again inside one batch is rewritten in place once its revision tree stops
    /// growing (pruned to its depth): the overlay does not grow with the updates.
    @Test func repeatedUpdatesInOneBatchStayInPlace() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions(revisionTreeDepth: 20))
        try db.inBatch {
            var document = try db.put(["n": 0, "text": "same size"], id: "doc")
            for i in 1...2_000 {
                document = try db.put(["n": .number(Double(i % 10)), "text": "same size"], id: "doc",
                                      rev: document.revisionID)
            }
            let changes = try #require(db.documents.batch).changes
            #expect(changes.count == 1)
            #expect(changes.bytes.count < 64 << 10, "\(changes.bytes.count) bytes for one document")
        }
        #expect(try db.document(id: "doc")?.revisionID.hasPrefix("2001-") == true)
        expectSound(db)
    }
}
