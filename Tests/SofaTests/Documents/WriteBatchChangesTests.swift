import Testing

@testable import Sofa
@testable import SofaStorage

/// The overlay's byte-buffer layout (``WriteBatch/Changes``) against a model: an array of (ID, state) in
/// first-write order, as the overlay held them before. Appends and replacements in random order; after each, every
/// accessor agrees with the model, and emptying keeps the storage.
@Suite struct WriteBatchChangesTests {
    static func state(_ random: inout SeededRandom, sequence: UInt64) -> WriteBatch.Pending {
        let body = (0..<Int(random.next() % 300)).map { _ in UInt8(ascii: "a") + UInt8(random.next() % 26) }
        let id = RevisionID.derived(parent: nil, deleted: false, body: body)
        let tree = RevisionTree(first: id, deleted: random.next() % 5 == 0, body: body.isEmpty ? .empty : .inline(body))
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
                changes.replace(at: i, with: state)
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
                let other = model[Int(random.next() % UInt64(model.count))].id
                #expect(changes.compareID(at: i, to: other).signum() == compareArrays(model[i].id, other).signum())
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

        let capacity = changes.bytes.capacity
        changes.removeAll(keepingCapacity: true)
        #expect(changes.isEmpty && changes.bytes.capacity == capacity)
    }
}
