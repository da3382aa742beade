import Foundation
import Testing

@testable import SofaStorage

/// The file layer: commits, reopening, locking, read-only opening, append-only growth.
@Suite struct StorageFileTests {
    @Test func newFileHasOneEmptyCommitAndSurvivesReopen() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("f")
        do {
            let file = try StorageFile(path: path)
            #expect(file.latestCommit.commitNumber == 1)
            #expect(file.latestCommit.roots.isEmpty)
            let a = try [UInt8]("hello".utf8).withUnsafeBytes {
                try file.append(kind: .value, payload: $0, compress: false)
            }
            let header = try file.commit(roots: [], metadata: [1, 2, 3])
            #expect(header.commitNumber == 2)
            #expect(try file.readChunk(at: a.offset, kind: .value, limit: header.endOffset).bytes
                    == Array("hello".utf8))
            try file.close()
        }
        let again = try StorageFile(path: path)
        #expect(again.latestCommit.commitNumber == 2)
        #expect(again.latestCommit.metadata == [1, 2, 3])
        // The file ends at the commit, or with a zero tail up to a preallocation step (FORMAT.md §2, §11).
        let bytes = readFile(path)
        let end = Int(again.latestCommit.endOffset)
        #expect(bytes.count == end || (bytes.count % 4096 == 0 && bytes[end...].allSatisfy { $0 == 0 }))
    }

    /// `latestCommitOffset` names the newest commit without copying its header.
    @Test func latestCommitOffsetFollowsCommits() throws {
        let dir = TemporaryDirectory()
        let file = try StorageFile(path: dir.file("f"), options: StorageOptions(durability: .none))
        #expect(file.latestCommitOffset == file.latestCommit.offset)
        let second = try file.commit(roots: [], metadata: [7])
        #expect(file.latestCommitOffset == second.offset)
        #expect(second.offset != 0)
        try file.close()
    }

    /// Starting the writeback of appended chunks before committing (a view update does it before recomputing its
    /// group aggregates) writes them out and changes nothing else: the commit after it is a two-sync commit as
    /// usual (no data check: more than a one-sync commit's data), and every chunk reads back after reopening.
    @Test func writebackStartedBeforeACommitKeepsItIntact() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("f")
        var chunks: [(offset: UInt64, bytes: [UInt8])] = []
        do {
            let file = try StorageFile(path: path)
            for i in 0..<(StorageFile.oneSyncLimit / 4000 + 10) {
                let bytes = [UInt8](repeating: UInt8(i & 0xff), count: 4000)
                chunks.append((try bytes.withUnsafeBytes {
                    try file.append(kind: .value, payload: $0, compress: false)
                }.offset, bytes))
            }
            try file.flushAppendedStartingWriteback()
            #expect(file.writtenLength > file.latestCommit.endOffset + UInt64(StorageFile.oneSyncLimit))
            let header = try file.commit(roots: [], metadata: [9])
            #expect(header.dataCheck == nil)
            try file.close()
        }
        let again = try StorageFile(path: path)
        #expect(again.latestCommit.metadata == [9])
        for chunk in chunks {
            #expect(try again.readChunk(at: chunk.offset, kind: .value, limit: again.latestCommit.endOffset).bytes
                    == chunk.bytes)
        }
        try again.close()
    }

    @Test func compressedChunksRoundTripAndShrink() throws {
        let dir = TemporaryDirectory()
        let file = try StorageFile(path: dir.file("f"), options: StorageOptions(durability: .none))
        let text = [UInt8](String(repeating: "sofa collation ", count: 200).utf8)
        let c = try text.withUnsafeBytes { try file.append(kind: .value, payload: $0, compress: true) }
        #expect(c.length < text.count / 4)
        let header = try file.commit(roots: [], metadata: [])
        let back = try file.readChunk(at: c.offset, kind: .value, limit: header.endOffset)
        #expect(back.bytes == text)
        #expect(back.isOwned)
    }

    @Test func secondWriterIsLockedOutButReadersAreNot() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("f")
        let writer = try StorageFile(path: path)
        #expect {
            _ = try StorageFile(path: path)
        } throws: { ($0 as? SofaError)?.code == .locked }
        let reader = try StorageFile(path: path, options: StorageOptions(readOnly: true))
        #expect(reader.latestCommit.commitNumber == 1)
        try writer.close()
        _ = try StorageFile(path: path)  // the lock went with the writer
    }

    @Test func readOnlyNeverWritesOrCreates() throws {
        let dir = TemporaryDirectory()
        let missing = dir.file("missing")
        #expect {
            _ = try StorageFile(path: missing, options: StorageOptions(readOnly: true))
        } throws: { ($0 as? SofaError)?.code == .notFound }
        #expect(!FileManager.default.fileExists(atPath: missing))

        let path = dir.file("f")
        do {
            let file = try StorageFile(path: path)
            var tree = BTree(file: file, root: nil, configuration: BTreeConfiguration(), limit: StorageFile.unlimited)
            tree = try tree.modified(by: [.put([1], [2])])
            try file.commit(roots: [tree.root], metadata: [])
            try file.close()
        }
        // Garbage after the last commit must stay where it is for a read-only opener.
        var bytes = readFile(path)
        bytes += [0xde, 0xad, 0xbe, 0xef]
        writeFile(path, bytes)
        chmod(path, 0o444)
        let calls = FaultInjectingSystemCalls()
        let file = try StorageFile(path: path, options: StorageOptions(readOnly: true), system: calls)
        let tree = BTree(file: file, commit: file.latestCommit, index: 0, configuration: BTreeConfiguration())
        #expect(try tree.get([1]) == [2])
        #expect {
            _ = try [UInt8](repeating: 0, count: 8).withUnsafeBytes {
                try file.append(kind: .value, payload: $0, compress: false)
            }
        } throws: { ($0 as? SofaError)?.code == .readOnly }
        #expect(throws: SofaError.self) { try file.commit(roots: [], metadata: []) }
        for call in FaultInjectingSystemCalls.Call.allCases where call.isWriteOrSync || call == .lock {
            #expect(calls.count(call) == 0, "read-only opening made a \(call) call")
        }
        #expect(readFile(path) == bytes)
    }

    /// The writeback hint of a large uncommitted stretch is given on another thread: the writer goes on while
    /// it blocks (a full disk queue), and the commit's `fdatasync`, like `close()`, waits for it first.
    @Test func writebackHintRunsBesideTheWriterAndTheCommitWaitsForIt() throws {
        let dir = TemporaryDirectory()
        let calls = FaultInjectingSystemCalls()
        let file = try StorageFile(path: dir.file("f"), options: StorageOptions(), system: calls)
        let payload = [UInt8](repeating: 7, count: 4096)
        for _ in 0..<40 {  // 160 KiB: more than a one-sync commit holds
            _ = try payload.withUnsafeBytes { try file.append(kind: .value, payload: $0, compress: false) }
        }
        let release = DispatchSemaphore(value: 0)
        let observed = Lock<(finished: Bool, syncsWhileHeld: Int)>((false, -1))
        calls.writebackHook.withLock {
            $0 = {
                let before = calls.count(.fdatasync)
                release.wait()
                let during = calls.count(.fdatasync) - before
                observed.withLock { $0 = (true, during) }
            }
        }
        // Had the hint run on this thread, only this would end the wait (and the next check would fail).
        DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(5)) { release.signal() }
        try file.flushAppendedStartingWriteback()
        // Returned with the hint still held: it runs on another thread.
        #expect(observed.withLock { $0.finished } == false)
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(50)) { release.signal() }
        try file.commit(roots: [], metadata: [1])  // waits for the hint before it syncs
        let (finished, syncsWhileHeld) = observed.withLock { $0 }
        #expect(finished)
        #expect(syncsWhileHeld == 0, "the commit synced while the hint was still running")
        #expect(calls.writebacksStarted == 1)
        calls.writebackHook.withLock { $0 = nil }  // the hook holds `calls`
        try file.close()
        #expect(try StorageFile(path: dir.file("f")).latestCommit.metadata == [1])
    }

    @Test func writableOpenCutsGarbageTailAndKeepsGoing() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("f")
        var end: UInt64 = 0
        do {
            let file = try StorageFile(path: path)
            end = try file.commit(roots: [], metadata: [9]).endOffset
            try file.close()
        }
        writeFile(path, readFile(path) + [UInt8](repeating: 0x55, count: 1000))
        let file = try StorageFile(path: path)
        #expect(file.latestCommit.metadata == [9])
        #expect(UInt64(readFile(path).count) == end)
        try file.commit(roots: [], metadata: [10])
        try file.close()
        #expect(try StorageFile(path: path).latestCommit.metadata == [10])
    }

    @Test func notASofaFileIsRefusedClearly() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("f")
        writeFile(path, [UInt8]("this is not a database, just some text that is long enough".utf8))
        #expect {
            _ = try StorageFile(path: path, options: StorageOptions(readOnly: true))
        } throws: { error in
            guard let e = error as? SofaError else { return false }
            return e.code == .unsupportedFormat || e.code == .corruption
        }
    }

    @Test func readersKeepTheirSnapshotWhileTheWriterCommits() throws {
        let dir = TemporaryDirectory()
        let file = try StorageFile(path: dir.file("f"), options: StorageOptions(durability: .none))
        let config = BTreeConfiguration(nodeSize: 256, reducer: Int64SumReducer())
        var tree = BTree(file: file, root: nil, configuration: config, limit: StorageFile.unlimited)
        tree = try tree.modified(by: (0..<500).map { .put(numericKey($0), int64Value(1)) })
        let first = try file.commit(roots: [tree.root], metadata: [])
        let snapshot = BTree(file: file, commit: first, index: 0, configuration: config)
        for round in 1...20 {
            tree = try tree.modified(by: (0..<500).map { .put(numericKey($0), int64Value(Int64(round))) })
            try file.commit(roots: [tree.root], metadata: [])
        }
        #expect(snapshot.rowCount == 500)
        #expect(Int64SumReducer.decode(try snapshot.reduce().value) == 500)
        #expect(try snapshot.rows().allSatisfy { $0.value == int64Value(1) })
        expectSound(snapshot)
    }
}
