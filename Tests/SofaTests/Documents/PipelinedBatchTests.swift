#if canImport(Glibc)
import Glibc
#endif
import Testing

@testable import Sofa
@testable import SofaStorage

/// The pipelined batch (``WriteBatch/handOff()``): a batch of ascending new IDs hands chunks of its overlay to
/// the flush thread while the writer goes on. Reads inside the batch see every write, wherever its chunk is; a
/// storage error on the flush thread poisons the batch; a rollback keeps nothing; the commit is one commit.
@Suite struct PipelinedBatchTests {
    static func id(_ i: Int) -> String { "doc-\(100_000 + i)" }

    /// A body of about `size` bytes that LZ4 barely shrinks.
    static func body(_ i: Int, size: Int = 150, random: inout SeededRandom) -> JSON {
        let letters = (0..<size).map { _ in UInt8(ascii: "a") + UInt8(random.next() % 26) }
        return ["n": .number(Double(i)), "text": .string(String(decoding: letters, as: UTF8.self))]
    }

    /// A database at `path` holding one committed document, reopened over a fault-injecting system (nothing
    /// armed) with `durability`.
    static func oneDocumentOverFaults(_ path: String, durability: Durability = .none) throws
        -> (Database, Document, FaultInjectingSystemCalls) {
        let setup = try Database(path: path, options: testOptions())
        let first = try setup.put(["n": 0], id: id(0))
        try setup.close()
        let faults = FaultInjectingSystemCalls()
        return (try Database(path: path, options: DatabaseOptions(durability: durability), system: faults), first,
                faults)
    }

    @Test func readsInsideTheBatchSeeEveryWriteWhileChunksAreInFlight() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions())
        var random = SeededRandom(seed: 11)
        try db.inBatch { for i in 0..<300 { try db.put(Self.body(i, random: &random), id: Self.id(i)) } }
        var expected: [String: JSON] = [:]
        for i in 0..<300 { expected[Self.id(i)] = try #require(try db.document(id: Self.id(i))).userProperties }
        let count = 3 * WriteBatch.pipelineChunk + 77
        try db.inBatch {
            for i in 300..<(300 + count) {
                let doc = try db.put(Self.body(i, random: &random), id: Self.id(i))
                expected[doc.id] = doc.userProperties
                if i % 41 == 0 {
                    // One written just now (the overlay), one a chunk ago (in flight or applied), one committed.
                    for j in [i, max(300, i - WriteBatch.pipelineChunk - 3), i % 300] {
                        let read = try #require(try db.document(id: Self.id(j)), "document \(j)")
                        #expect(read.userProperties == expected[Self.id(j)], "document \(j)")
                    }
                }
                #expect(try db.document(id: Self.id(i + 1)) == nil)
            }
            #expect(try #require(db.documents.batch).chunksHandedOff >= 3, "the pipeline ran")
            #expect(try #require(db.documents.batch).chunksAppended >= 1, "onto the open edges")
            // An update of a document in an applied chunk, then one more put above them all.
            let earlier = try #require(try db.document(id: Self.id(310)))
            try db.put(["n": -1], id: earlier.id, rev: earlier.revisionID)
            expected[earlier.id] = ["n": -1]
            try db.put(["n": -2], id: Self.id(300 + count))
            expected[Self.id(300 + count)] = ["n": -2]
            #expect(db.documentCount == 300 + count + 1)
            #expect(db.lastSequence == UInt64(300 + count + 2))
        }
        #expect(db.lastSequence == UInt64(300 + count + 2))
        #expect(try db.changes(since: 300).count == count + 1, "each document once")
        for (id, properties) in expected {
            #expect(try db.document(id: id)?.userProperties == properties, "\(id)")
        }
        expectSound(db)
        try db.close()
        let reopened = try Database(path: dir.database(), options: testOptions())
        #expect(reopened.documentCount == expected.count)
        #expect(try reopened.document(id: Self.id(310))?.userProperties == ["n": -1])
        expectSound(reopened)
    }

    /// The leaves of `tree`, found without putting any into the node cache.
    static func leafOffsets(of tree: BTree) throws -> [UInt64] {
        guard let root = tree.root else { return [] }
        var leaves: [UInt64] = []
        func visit(_ offset: UInt64) throws {
            let node = try tree.node(at: offset, cachingLeaf: false)
            if node.isLeaf { return leaves.append(offset) }
            for i in 0..<node.count { try visit(node.childOffset(i)) }
        }
        try visit(root.offset)
        return leaves
    }

    /// The leaves a bulk load's open edges wrote are not cached as written; the next commit reads them into the
    /// node cache on its own queue (``DocumentFile/startNodeCacheFill()``): the by-ID tree's, but its right edge.
    /// A compaction in between drops the fill (the old file's leaves); a batch that modifies the trees after
    /// its edges leaves its leaves to readers.
    @Test func leavesTheEdgesWroteAreReadIntoTheNodeCacheByTheNextCommit() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions())
        var random = SeededRandom(seed: 8)
        let count = 4 * WriteBatch.pipelineChunk + 50
        try db.inBatch {
            for i in 0..<count { try db.put(Self.body(i, random: &random), id: Self.id(i)) }
            #expect(try #require(db.documents.batch).chunksAppended == 4)
        }
        // The next commit (a log record: the trees stay as they are) reads them into the node cache.
        try db.put(["n": -1], id: Self.id(count + 1))
        WriteBatch.fillQueue.sync {}  // its fill is done
        let snapshot = try db.documents.committedSnapshot()
        let byID = try Self.leafOffsets(of: snapshot.byID)
        let bySequence = try Self.leafOffsets(of: snapshot.bySequence)
        #expect(byID.count > 3 && bySequence.count > 1, "several leaves: \(byID.count), \(bySequence.count)")
        // All but the last, the right edge, which the next bulk batch would rewrite; none of the by-sequence
        // tree's, which readers take once, in order.
        for offset in byID.dropLast() {
            #expect(snapshot.storage.nodeCache.node(at: offset) != nil, "leaf at \(offset) is cached")
        }
        #expect(snapshot.storage.nodeCache.node(at: byID.last!) == nil, "the edge leaf is left to readers")
        for offset in bySequence { #expect(snapshot.storage.nodeCache.node(at: offset) == nil) }

        // A compaction drops the fill a bulk batch left: its leaves are the old file's.
        var next = count + 2
        func bulk(_ n: Int) throws {
            for i in next..<(next + n) { try db.put(Self.body(i, random: &random), id: Self.id(i)) }
            next += n
        }
        try db.inBatch { try bulk(2 * WriteBatch.pipelineChunk) }
        #expect(db.documents.cacheFill != nil)
        _ = try db.compact()
        #expect(db.documents.cacheFill == nil, "the old file's leaves are not filled")
        // A batch that modifies the trees after appending to their edges leaves its leaves to readers.
        try db.inBatch {
            try bulk(WriteBatch.pipelineChunk + 10)
            next += 1000
            try bulk(1)
            next -= 500
            try bulk(WriteBatch.pipelineChunk)  // below the ID before: the commit's flush modifies the trees
        }
        #expect(db.documents.cacheFill == nil)
        expectSound(db)
    }

    /// A bulk load of new IDs in order appends its chunks to the trees' open edges (``TreeAppender``), written
    /// once, by the commit's flush: nothing of the trees is left dead, and reading documents inside the batch
    /// keeps them open. A chunk that does not append (new IDs out of order) writes them first, on the flush
    /// thread or at commit; a chunk whose sequences are out of ID order still appends.
    @Test func chunksOfNewIDsInOrderAppendToTheTreesOpenEdges() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions())
        var random = SeededRandom(seed: 5)
        var expected: [String: JSON] = [:]
        func put(_ i: Int) throws {
            expected[Self.id(i)] = try db.put(Self.body(i, random: &random), id: Self.id(i)).userProperties
        }
        try db.inBatch {
            for i in 0..<300 { try put(i) }
            #expect(try #require(db.documents.batch).chunksAppended == 1)
        }
        // A chunk that rewrote its edges would have left them dead (a leaf and its inner nodes per tree).
        let loaded = try db.documentFileReport()
        #expect(loaded.fileSize - loaded.liveBytes < 100, "only the first, empty commit is dead: \(loaded)")
        let count = 5 * WriteBatch.pipelineChunk + 77
        try db.inBatch {
            for i in 300..<(300 + count) {
                try put(i)
                if i == 300 + WriteBatch.pipelineChunk + 10 {
                    // A document of an applied chunk, read from its body alone (the edges stay open); then one
                    // of the overlay updated, so that its new sequence is out of its chunk's ID order.
                    #expect(try db.document(id: Self.id(305))?.userProperties == expected[Self.id(305)])
                    let earlier = try #require(try db.document(id: Self.id(i - 5)))
                    expected[earlier.id] = try db.put(["n": -5], id: earlier.id, rev: earlier.revisionID).userProperties
                }
            }
            let batch = try #require(db.documents.batch)
            #expect(batch.chunksHandedOff == 5 && batch.chunksAppended == 5)
            // New IDs above every stored one, out of order: the commit's flush writes the open edges, then
            // applies the overlay as a batch modify.
            for i in [300 + count + 2, 300 + count + 1] { try put(i) }
        }
        // One chunk that appends, then one that does not: the flush thread writes the edges before applying it.
        let next = 300 + count + 3
        try db.inBatch {
            for i in next..<(next + WriteBatch.pipelineChunk) { try put(i) }
            for i in (0..<(WriteBatch.pipelineChunk + 40)).reversed() { try put(next + WriteBatch.pipelineChunk + i) }
            let batch = try #require(db.documents.batch)
            #expect(batch.chunksHandedOff == 2 && batch.chunksAppended == 1)
        }
        #expect(db.documentCount == expected.count)
        let changes = try db.changes(since: 0)
        #expect(changes.count == expected.count, "each document once")
        #expect(changes.map(\.sequence) == changes.map(\.sequence).sorted())
        for (id, properties) in expected {
            #expect(try db.document(id: id)?.userProperties == properties, "\(id)")
        }
        let ids = try db.createAllDocumentsQuery().run().compactMap(\.documentID)
        #expect(ids == expected.keys.sorted(), "all documents in ID order")
        expectSound(db)
        try db.close()
        let reopened = try Database(path: dir.database(), options: testOptions())
        #expect(reopened.documentCount == expected.count)
        for (id, properties) in expected {
            #expect(try reopened.document(id: id)?.userProperties == properties, "\(id)")
        }
        expectSound(reopened)
    }

    /// An ID above every one in an overlay of new IDs is known new by one comparison
    /// (``WriteBatch/record(_:forEdit:)``); IDs below the overlay's, stored ones, and ones the batch wrote are
    /// still found, before and after chunks.
    @Test func idsAboveTheOverlayAreNewAndOthersAreStillFound() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions())
        try db.inBatch {
            for i in stride(from: 0, to: 300, by: 2) { try db.put(["n": .number(Double(i))], id: Self.id(i)) }
        }
        var expected = Dictionary(uniqueKeysWithValues: stride(from: 0, to: 300, by: 2).map {
            (Self.id($0), ["n": .number(Double($0))] as JSON)
        })
        try db.inBatch {
            for i in 300..<(300 + 2 * WriteBatch.pipelineChunk + 40) {
                try db.put(["n": .number(Double(i))], id: Self.id(i))
                expected[Self.id(i)] = ["n": .number(Double(i))]
                if i % 97 == 0 {
                    // A stored ID, and one this batch wrote (in the overlay, in flight or applied): conflicts.
                    let batchWrote = [i - 1, i - WriteBatch.pipelineChunk].filter { $0 >= 300 }
                    for existing in [i % 300 / 2 * 2] + batchWrote {
                        let error = #expect(throws: SofaError.self) { try db.put(["x": 1], id: Self.id(existing)) }
                        #expect(error?.code == .conflict, "document \(existing)")
                    }
                    // A new ID below the stored ones, then the ascending run goes on.
                    let below = i % 300 / 2 * 2 + 1
                    try db.put(["below": .number(Double(below))], id: Self.id(below))
                    expected[Self.id(below)] = ["below": .number(Double(below))]
                    let again = #expect(throws: SofaError.self) { try db.put(["x": 1], id: Self.id(below)) }
                    #expect(again?.code == .conflict)
                }
            }
        }
        // An overlay that starts below stored IDs is not above the trees: a stored ID above its last is found.
        try db.inBatch {
            try db.put(["n": 1], id: Self.id(1))
            expected[Self.id(1)] = ["n": 1]
            let error = #expect(throws: SofaError.self) { try db.put(["x": 1], id: Self.id(2)) }
            #expect(error?.code == .conflict)
        }
        #expect(db.documentCount == expected.count)
        for (id, properties) in expected {
            #expect(try db.document(id: id)?.userProperties == properties, "\(id)")
        }
        expectSound(db)
    }

    @Test func aBatchOfUpdatesIsNotPipelined() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions())
        try db.inBatch { for i in 0..<600 { try db.put(["n": 0], id: Self.id(i)) } }
        try db.inBatch {
            for i in 0..<600 {
                let doc = try #require(try db.document(id: Self.id(i)))
                try db.put(["n": 1], id: doc.id, rev: doc.revisionID)
            }
            #expect(try #require(db.documents.batch).chunksHandedOff == 0)
        }
        #expect(try db.document(id: Self.id(599))?.userProperties == ["n": 1])
        expectSound(db)
    }

    @Test func aRollbackKeepsNothingOfAPipelinedBatch() throws {
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions())
        var random = SeededRandom(seed: 12)
        let first = try db.put(["n": 0], id: Self.id(0))
        let size = try FileSize.of(dir.database() + "/docs")
        struct Stop: Error {}
        #expect(throws: Stop.self) {
            try db.inBatch {
                for i in 1...(2 * WriteBatch.pipelineChunk + 10) {
                    try db.put(Self.body(i, random: &random), id: Self.id(i))
                }
                #expect(try #require(db.documents.batch).chunksHandedOff >= 2)
                throw Stop()
            }
        }
        #expect(db.documentCount == 1 && db.lastSequence == 1)
        #expect(try db.document(id: Self.id(5)) == nil)
        #expect(try db.document(id: Self.id(0)) == first)
        #expect(try FileSize.of(dir.database() + "/docs") == size, "the chunks were cut off")
        try db.inBatch { for i in 1...600 { try db.put(["n": .number(Double(i))], id: Self.id(i)) } }
        #expect(db.documentCount == 601)
        expectSound(db)
    }

    @Test func aStorageErrorOnTheFlushThreadPoisonsTheBatch() throws {
        let dir = TemporaryDatabaseDirectory()
        let path = dir.database()
        let (db, first, faults) = try Self.oneDocumentOverFaults(path)
        // Bodies inline (under 1 KiB) and incompressible: only the flush thread appends, and its chunks pass the
        // storage layer's 1 MiB write buffer after four or five, so the first `pwrite` is one of its own.
        faults.arm(.init(call: .pwrite, nth: 1, errno: ENOSPC))
        var random = SeededRandom(seed: 13)
        var sawFailure = false
        expectSofaError(.diskFull) {
            try db.inBatch {
                for i in 1...(12 * WriteBatch.pipelineChunk) {
                    do {
                        try db.put(Self.body(i, size: 900, random: &random), id: Self.id(i))
                    } catch let error as SofaError where error.code == .diskFull {
                        sawFailure = true  // the caller goes on; the commit must still refuse
                    }
                }
                #expect(try #require(db.documents.batch).chunksHandedOff >= 5)
                // The lost chunk's documents are neither in the overlay nor in the trees: reads refuse.
                expectSofaError(.diskFull) { try db.document(id: Self.id(1)) }
            }
        }
        #expect(sawFailure, "a put met the flush thread's error")
        faults.arm(nil)
        #expect(db.documentCount == 1 && db.lastSequence == 1)
        #expect(try db.document(id: Self.id(0)) == first)
        #expect(try db.document(id: Self.id(1)) == nil)
        // Space is back: the same handle takes the batch.
        try db.inBatch {
            for i in 1...(3 * WriteBatch.pipelineChunk) {
                try db.put(Self.body(i, size: 900, random: &random), id: Self.id(i))
            }
        }
        #expect(db.documentCount == 3 * WriteBatch.pipelineChunk + 1)
        expectSound(db)
        try db.close()
        let reopened = try Database(path: path, options: testOptions())
        #expect(reopened.documentCount == 3 * WriteBatch.pipelineChunk + 1)
        expectSound(reopened)
    }

    /// A durable pipelined batch syncs its chunks early, on another thread
    /// (``StorageFile/flushAppendedStartingSync(minimum:)``) — here because a new file's zero tail is short, so
    /// the chunks extend it and sync the new zeros before the commit writes over them:
    /// more than one `fdatasync` per batch, of which the commit's is the last; the commit is still one one-sync
    /// commit (its data check covers every chunk of the batch) and ends before a zero tail the early syncs made
    /// durable, shorter than opening's look-back; the database reopens with all of it.
    @Test func aDurableBatchSyncsItsChunksBeforeItsCommit() throws {
        let dir = TemporaryDatabaseDirectory()
        let path = dir.database()
        let (db, _, faults) = try Self.oneDocumentOverFaults(path, durability: .full)
        let storage = db.documents.storage
        let before = storage.latestCommit
        let syncsBefore = faults.count(.fdatasync)
        var random = SeededRandom(seed: 17)
        let count = 4 * WriteBatch.pipelineChunk + 10
        try db.inBatch {
            for i in 1...count { try db.put(Self.body(i, size: 300, random: &random), id: Self.id(i)) }
            #expect(try #require(db.documents.batch).chunksHandedOff == 4)
        }
        let syncs = faults.count(.fdatasync) - syncsBefore
        #expect(syncs >= 2, "early syncs besides the commit's (\(syncs))")
        let header = storage.latestCommit
        #expect(header.endOffset - before.endOffset > UInt64(StorageFile.earlyWritebackMinimum) * 4)
        #expect(header.dataCheck?.start == before.endOffset, "one one-sync commit")
        var status = stat()
        #expect(stat(storage.path, &status) == 0)
        let fileSize = UInt64(status.st_size)
        #expect(fileSize > header.endOffset, "a zero tail after the commit")
        #expect(fileSize - header.endOffset < UInt64(StorageFile.preallocationStep + 4096))
        expectSound(db)
        try db.close()
        let reopened = try Database(path: path, options: testOptions())
        #expect(reopened.documentCount == count + 1)
        #expect(reopened.documents.storage.latestCommit.offset == header.offset, "found at the end, past its tail")
        expectSound(reopened)
    }

    /// A durable batch syncs early only once its data is past ``StorageFile/earlySyncMinimum`` when its zero tail
    /// has room (FORMAT.md §11, "early syncs"): below it the commit's one `fdatasync` is the batch's only sync;
    /// past it the flush thread syncs chunks before the commit too. The file (~10 MiB) is large enough for a
    /// zero tail of 1 MiB, which neither batch runs short of.
    @Test func aDurableBatchSyncsEarlyOnlyPastTheEarlySyncMinimum() throws {
        let dir = TemporaryDatabaseDirectory()
        let path = dir.database()
        var random = SeededRandom(seed: 29)
        let loaded = 30_000
        let setup = try Database(path: path, options: testOptions())
        try setup.inBatch {
            for i in 0..<loaded { try setup.put(Self.body(i, size: 300, random: &random), id: Self.id(i)) }
        }
        try setup.close()
        let faults = FaultInjectingSystemCalls()
        let db = try Database(path: path, options: DatabaseOptions(durability: .full), system: faults)
        let storage = db.documents.storage
        try db.put(["n": -1], id: Self.id(loaded))  // its commit writes a zero tail of 1 MiB after it
        var status = stat()
        #expect(stat(storage.path, &status) == 0)
        #expect(UInt64(status.st_size) - storage.latestCommit.endOffset >= UInt64(StorageFile.preallocationStep))
        var next = loaded + 1
        func batch(_ count: Int) throws -> (syncs: Int, bytes: UInt64) {
            let syncs = faults.count(.fdatasync), start = storage.latestCommit.endOffset
            try db.inBatch {
                for i in next..<(next + count) {
                    try db.put(Self.body(i, size: 300, random: &random), id: Self.id(i))
                }
                #expect(try #require(db.documents.batch).chunksHandedOff == count / WriteBatch.pipelineChunk)
            }
            next += count
            return (faults.count(.fdatasync) - syncs, storage.latestCommit.endOffset - start)
        }
        let small = try batch(2 * WriteBatch.pipelineChunk + 10)
        #expect(small.bytes > UInt64(StorageFile.earlyWritebackMinimum) * 2)
        #expect(small.bytes < UInt64(StorageFile.earlySyncMinimum), "\(small.bytes) bytes")
        #expect(small.syncs == 1, "the commit's sync alone (\(small.syncs))")
        let large = try batch(5 * WriteBatch.pipelineChunk + 10)
        #expect(large.bytes > UInt64(StorageFile.earlySyncMinimum) + UInt64(StorageFile.earlySyncMinimum) / 4,
                "\(large.bytes) bytes")
        #expect(large.syncs >= 2, "early syncs besides the commit's (\(large.syncs))")
        #expect(db.documentCount == next)
        expectSound(db)
        try db.close()
        let reopened = try Database(path: path, options: testOptions())
        #expect(reopened.documentCount == next)
        expectSound(reopened)
    }

    /// An early sync that fails on its own thread fail-stops the handle, as a failed commit sync does (what
    /// reached the disk is unknown): a later hand-off inside the batch meets it — a `put` throws before any commit
    /// was attempted, which tells it from the commit's own sync — the commit throws too, the handle refuses
    /// writes until reopened, and nothing of the batch is kept.
    @Test func aFailedEarlySyncFailsTheCommitAndRefusesWrites() throws {
        let dir = TemporaryDatabaseDirectory()
        let path = dir.database()
        let (db, first, faults) = try Self.oneDocumentOverFaults(path, durability: .full)
        faults.arm(.init(call: .fdatasync, nth: 1))
        var random = SeededRandom(seed: 19)
        var failedInside = false
        expectSofaError(.ioError) {
            try db.inBatch {
                for i in 1...(8 * WriteBatch.pipelineChunk) {
                    do {
                        try db.put(Self.body(i, size: 300, random: &random), id: Self.id(i))
                    } catch let error as SofaError where error.code == .ioError {
                        #expect(error.message.contains("early sync"), "\(error)")
                        failedInside = true
                        break
                    }
                }
            }
        }
        #expect(failedInside, "the early sync's failure reached a put inside the batch")
        #expect(faults.failuresInjected == 1)
        faults.arm(nil)
        expectSofaError(.writesRefused) { try db.put(["n": 1], id: "after") }
        #expect(db.documentCount == 1)
        #expect(try db.document(id: Self.id(0)) == first)
        try db.close()
        let reopened = try Database(path: path, options: testOptions())
        #expect(reopened.documentCount == 1)
        #expect(try reopened.document(id: Self.id(1)) == nil)
        try reopened.put(["n": 2], id: "later")
        expectSound(reopened)
    }

    /// A failed write whose error reaches a read the caller ignores has discarded chunks the batch's records
    /// point at: the batch must not commit them (it did before the discard count was checked, leaving a record
    /// whose body offset held a tree node).
    @Test func aFailedWriteMetByAnIgnoredReadKeepsTheBatchFromCommitting() throws {
        let dir = TemporaryDatabaseDirectory()
        let path = dir.database()
        let (db, first, faults) = try Self.oneDocumentOverFaults(path)
        var random = SeededRandom(seed: 14)
        let large = Self.body(1, size: 8_000, random: &random)  // over the inline limit: a value chunk
        expectSofaError(.ioError) {
            try db.inBatch {
                try db.put(large, id: Self.id(1))
                // Reading the body writes the buffered chunk out first; that write fails, the chunk is discarded
                // and the read throws — an error this caller drops.
                faults.arm(.init(call: .pwrite, nth: 1, errno: ENOSPC))
                #expect((try? db.document(id: Self.id(1))) == nil)
                faults.arm(nil)
            }
        }
        #expect(db.documentCount == 1 && db.lastSequence == 1)
        #expect(try db.document(id: Self.id(0)) == first)
        #expect(try db.document(id: Self.id(1)) == nil)
        try db.put(large, id: Self.id(1))
        #expect(try db.document(id: Self.id(1))?.userProperties == large)
        expectSound(db)
        try db.close()
        let reopened = try Database(path: path, options: testOptions())
        #expect(reopened.documentCount == 2)
        expectSound(reopened)
    }
}

/// A file's size in bytes.
enum FileSize {
    static func of(_ path: String) throws -> Int {
        var info = stat()
        guard stat(path, &info) == 0 else { throw SofaError(.ioError, "stat \(path) failed") }
        return Int(info.st_size)
    }
}
