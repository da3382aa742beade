import Synchronization
import Testing

@testable import Sofa

/// The changes feed, change listeners and the change stream.
@Suite struct ChangesTests {
    @Test func feedListsEachDocumentOnceAtItsLatestSequence() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions())
        let a = try db.put(["n": 1], id: "a")
        try db.put(["n": 1], id: "b")
        let a2 = try db.put(["n": 2], id: "a", rev: a.revisionID)
        let c = try db.put(["n": 1], id: "c")
        try db.delete(id: "c", rev: c.revisionID)
        let all = try db.changes()
        #expect(all.map(\.documentID) == ["b", "a", "c"])
        #expect(all.map(\.sequence) == [2, 3, 5])
        #expect(all[1].revisionID == a2.revisionID && !all[1].isDeleted && all[2].isDeleted)
        #expect(try db.changes(since: 2).map(\.documentID) == ["a", "c"])
        #expect(try db.changes(since: 2, limit: 1).map(\.documentID) == ["a"])
        #expect(try db.changes(since: 5).isEmpty && db.changes(since: .max).isEmpty)
        #expect(try db.changes(limit: 0).isEmpty)
        #expect(all[2].description == "5 c \(all[2].revisionID) deleted")
    }

    @Test func listenersHearEveryCommitInOrder() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions())
        let heard = Mutex<[(UInt64, UInt64, [String])]>([])
        let token = db.addChangeListener { batch in
            let ids = (try? batch.changes().map(\.documentID)) ?? ["error"]
            heard.withLock { $0.append((batch.firstSequence, batch.lastSequence, ids)) }
        }
        try db.put(["n": 1], id: "a")
        try db.inBatch {
            try db.put(["n": 1], id: "b")
            try db.put(["n": 1], id: "c")
        }
        try db.inBatch {}  // changes nothing: no notification
        let snapshot = heard.withLock { $0 }
        #expect(snapshot.map(\.0) == [1, 2] && snapshot.map(\.1) == [1, 3])
        #expect(snapshot.map(\.2) == [["a"], ["b", "c"]])
        db.removeChangeListener(token)
        try db.put(["n": 1], id: "d")
        #expect(heard.withLock { $0.count } == 2)
    }

    @Test func aListenerMayWriteAndItsCommitIsReportedAfter() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions())
        let order = Mutex<[UInt64]>([])
        db.addChangeListener { batch in
            order.withLock { $0.append(batch.lastSequence) }
            if batch.lastSequence == 1 { _ = try? db.put(["echo": true], id: "echo") }
        }
        try db.put(["n": 1], id: "a")
        #expect(order.withLock { $0 } == [1, 2])
        #expect(try db.document(id: "echo") != nil)
    }

    @Test func streamDeliversBatchesAndEndsOnClose() async throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions())
        let stream = db.changeBatches()
        let consumer = Task {
            var sequences: [UInt64] = []
            for await batch in stream { sequences.append(batch.lastSequence) }
            return sequences
        }
        try db.put(["n": 1], id: "a")
        try db.inBatch { for i in 0..<5 { try db.put(["n": 1], id: "b\(i)") } }
        try db.close()
        #expect(await consumer.value == [1, 6])
    }

    /// Commits with nobody listening are delivered to nobody later: a listener and a stream added afterwards
    /// each get exactly one batch for the next commit, starting at its first sequence; a listener added inside
    /// another listener's callback gets the batch of the commit after.
    @Test func listenersAddedAfterUnheardCommitsGetOnlyTheNextCommit() async throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions())
        try db.put(["n": 1], id: "a")
        try db.inBatch { for i in 0..<3 { try db.put(["n": 1], id: "b\(i)") } }
        let heard = Mutex<[UInt64]>([])
        let heardByNested = Mutex<[UInt64]>([])
        let nestedAdded = Mutex(false)
        db.addChangeListener { batch in
            heard.withLock { $0.append(batch.firstSequence) }
            let isFirst = nestedAdded.withLock { added in
                defer { added = true }
                return !added
            }
            if isFirst { db.addChangeListener { b in heardByNested.withLock { $0.append(b.firstSequence) } } }
        }
        let stream = db.changeBatches()
        let consumer = Task {
            var firsts: [UInt64] = []
            for await batch in stream { firsts.append(batch.firstSequence) }
            return firsts
        }
        try db.inBatch {
            try db.put(["n": 2], id: "c")
            try db.put(["n": 2], id: "d")
        }
        #expect(heard.withLock { $0 } == [5])
        #expect(heardByNested.withLock { $0 }.isEmpty, "a listener added during a delivery got that batch")
        try db.put(["n": 3], id: "e")
        #expect(heard.withLock { $0 } == [5, 7])
        #expect(heardByNested.withLock { $0 } == [7])
        expectSound(db)
        try db.close()
        #expect(await consumer.value == [5, 7])
    }

    /// The notifier drops a batch queued while nobody listens, rather than keeping it for whoever registers
    /// next: a listener added after it and drained gets nothing, then exactly the next batch.
    @Test func notifierDropsABatchQueuedWithNobodyListening() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions())
        let captured = Mutex<[ChangeBatch]>([])
        db.addChangeListener { batch in captured.withLock { $0.append(batch) } }
        try db.put(["n": 1], id: "a")
        try db.put(["n": 1], id: "b")
        let batches = captured.withLock { $0 }
        try #require(batches.count == 2)

        let notifier = ChangeNotifier()
        notifier.enqueue(batches[0])
        let received = Mutex<[UInt64]>([])
        _ = notifier.addListener { batch in received.withLock { $0.append(batch.firstSequence) } }
        notifier.drain()
        #expect(received.withLock { $0 }.isEmpty, "a batch queued with nobody listening was delivered later")
        notifier.enqueue(batches[1])
        notifier.drain()
        #expect(received.withLock { $0 } == [2])
        expectSound(db)
        try db.close()
    }
}
