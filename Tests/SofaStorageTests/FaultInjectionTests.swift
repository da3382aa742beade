import Foundation
import Testing

@testable import SofaStorage

/// Failing system calls (RELIABILITY.md R2, R7, R8): every crash point of a workload, single and persistent
/// failures of each call, a full disk. The oracle: a typed error, no trap, no descriptor leak, and on
/// reopening the newest commit that returned (or the one in flight) with exactly its content.
@Suite struct FaultInjectionTests {
    static let seed: UInt64 = 21

    /// Runs workload commits 1…`commits` on `path` through `calls`; returns how many returned.
    static func runWorkload(_ path: String, calls: FaultInjectingSystemCalls, commits: Int) -> Int {
        var acked = 0
        do {
            let file = try StorageFile(path: path, options: StorageOptions(durability: .full), system: calls)
            defer { try? file.close() }
            var tree = BTree(file: file, commit: file.latestCommit, index: 0,
                             configuration: CrashWorkload.configuration)
            for k in 1...commits {
                tree = try tree.modified(by: CrashWorkload.batch(seed: seed, commit: k))
                try file.commit(roots: [tree.root], metadata: CrashWorkload.metadata(commit: k))
                acked = k
            }
        } catch {
            #expect(error is SofaError, "untyped error \(error)")
        }
        return acked
    }

    /// Descriptors of this process open on files under `directory` (tests run in parallel, so only ours count).
    static func openFileDescriptors(under directory: String) -> Int {
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return fds.filter { fd in
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(fd)"))?
                .hasPrefix(directory) ?? false
        }.count
    }

    @Test func everyCrashPointRecoversToAnAcknowledgedOrInFlightCommit() throws {
        let commits = 9
        var n = 1
        var points = 0
        while true {
            let dir = TemporaryDirectory()
            let path = dir.file("tree")
            try StorageFile(path: path).close()  // created before the faults start
            let calls = FaultInjectingSystemCalls()
            calls.crashAfter(writesAndSyncs: n)
            let acked = Self.runWorkload(path, calls: calls, commits: commits)
            let file = try StorageFile(path: path, options: StorageOptions(readOnly: true))
            let recovered = Int(file.latestCommit.commitNumber) - 1
            #expect(recovered >= acked && recovered <= acked + 1,
                    "crash point \(n): acked \(acked), recovered \(recovered)")
            try RecoveryTests.expectCommit(path, seed: Self.seed, expected: recovered, "crash point \(n)")
            points += 1
            if calls.failuresInjected == 0 { break }  // the workload finished before the crash point
            n += 1
        }
        print("FaultInjectionTests: \(points) crash points (every write and sync of a \(commits)-commit workload)")
        // At least a write (a one-sync commit's data and header are one `pwrite`) and a sync per commit.
        #expect(points > 2 * commits)
    }

    @Test(arguments: [FaultInjectingSystemCalls.Call.pwrite, .fdatasync])
    func singleFailureIsTypedAndLeavesCommittedDataIntact(call: FaultInjectingSystemCalls.Call) throws {
        for nth in 1...6 {
            let dir = TemporaryDirectory()
            let path = dir.file("tree")
            try StorageFile(path: path).close()
            let calls = FaultInjectingSystemCalls()
            calls.arm(.init(call: call, nth: nth, persistent: false, errno: EIO))
            // Six commits: at least six syncs even when every commit is a one-sync commit.
            let acked = Self.runWorkload(path, calls: calls, commits: 6)
            #expect(calls.failuresInjected == 1, "\(call) #\(nth): the fault never fired")
            #expect(Self.openFileDescriptors(under: dir.path) == 0, "\(call) #\(nth): descriptor leak")
            let file = try StorageFile(path: path, options: StorageOptions(readOnly: true))
            let recovered = Int(file.latestCommit.commitNumber) - 1
            #expect(recovered >= acked && recovered <= acked + 1, "\(call) #\(nth)")
            try RecoveryTests.expectCommit(path, seed: Self.seed, expected: recovered, "\(call) #\(nth)")
        }
    }

    @Test func failedSyncRefusesFurtherWritesUntilReopened() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("tree")
        let calls = FaultInjectingSystemCalls()
        let file = try StorageFile(path: path, options: StorageOptions(), system: calls)
        var tree = BTree(file: file, root: nil, configuration: CrashWorkload.configuration,
                         limit: StorageFile.unlimited)
        tree = try tree.modified(by: [.put([1], int64Value(1))])
        try file.commit(roots: [tree.root], metadata: [])
        calls.arm(.init(call: .fdatasync, nth: 1))
        tree = try tree.modified(by: [.put([2], int64Value(2))])
        #expect { try file.commit(roots: [tree.root], metadata: []) } throws: { ($0 as? SofaError)?.code == .ioError }
        #expect { try file.commit(roots: [tree.root], metadata: []) } throws: {
            ($0 as? SofaError)?.code == .writesRefused
        }
        #expect {
            _ = try BTree(file: file, commit: file.latestCommit, index: 0, configuration: CrashWorkload.configuration)
                .modified(by: [.put([3], int64Value(3))])
        } throws: { ($0 as? SofaError)?.code == .writesRefused }
        try file.close()
        let reopened = try StorageFile(path: path)
        let t = BTree(file: reopened, commit: reopened.latestCommit, index: 0,
                      configuration: CrashWorkload.configuration)
        #expect(try t.get([1]) == int64Value(1))
        _ = try t.modified(by: [.put([4], int64Value(4))])
    }

    @Test func diskFullFailsCleanlyAndWritesResume() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("tree")
        let calls = FaultInjectingSystemCalls()
        let file = try StorageFile(path: path, options: StorageOptions(), system: calls)
        let config = BTreeConfiguration(nodeSize: 256, reducer: Int64SumReducer())
        var tree = BTree(file: file, root: nil, configuration: config, limit: StorageFile.unlimited)
        tree = try tree.modified(by: (0..<100).map { .put(numericKey($0), int64Value(1)) })
        try file.commit(roots: [tree.root], metadata: [])
        let committed = tree
        calls.arm(.init(call: .pwrite, nth: 1, persistent: true, errno: ENOSPC))
        #expect {
            let bigger = try committed.modified(by: (100..<20_000).map { .put(numericKey($0), int64Value(1)) })
            try file.commit(roots: [bigger.root], metadata: [])
        } throws: { ($0 as? SofaError)?.code == .diskFull }
        calls.arm(nil)  // space freed
        let retry = try BTree(file: file, commit: file.latestCommit, index: 0, configuration: config)
            .modified(by: (100..<200).map { .put(numericKey($0), int64Value(1)) })
        try file.commit(roots: [retry.root], metadata: [])
        try file.close()
        let reopened = try StorageFile(path: path, options: StorageOptions(readOnly: true))
        let t = BTree(file: reopened, commit: reopened.latestCommit, index: 0, configuration: config)
        #expect(t.rowCount == 200)
        expectSound(t)
    }

    /// R8 with background writes (``StorageFile/beginBackgroundWrites()``): a full disk failing the write of a
    /// buffer filled meanwhile is reported by the commit that follows, which waits for that write; everything
    /// uncommitted is cut off, and the file takes the next commit once space is free.
    @Test func failedBackgroundWriteIsReportedByTheNextCommit() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("chunks")
        let calls = FaultInjectingSystemCalls()
        let file = try StorageFile(path: path, options: StorageOptions(), system: calls)
        let committedEnd = file.latestCommit.endOffset
        var framed: [UInt8] = []
        [UInt8](repeating: 9, count: 3000).withUnsafeBytes {
            _ = Chunk.appendUncompressed(kind: .value, payload: $0, to: &framed)
        }
        let writesBefore = calls.count(.pwrite)
        calls.arm(.init(call: .pwrite, nth: 1, errno: ENOSPC))
        file.beginBackgroundWrites()
        // The 1 MiB buffer fills at the ~350th chunk: that append hands it to the write and returns.
        for _ in 0..<400 { _ = try framed.withUnsafeBytes { try file.append(framed: $0) } }
        file.endBackgroundWrites()
        #expect { try file.commit(roots: [], metadata: []) } throws: { ($0 as? SofaError)?.code == .diskFull }
        #expect(calls.failuresInjected == 1)
        #expect(calls.count(.pwrite) - writesBefore == 1, "the commit wrote nothing after the failed write")
        #expect(file.writtenLength == committedEnd, "the chunks appended after the failed write were discarded too")
        calls.arm(nil)  // space freed
        let chunk = try framed.withUnsafeBytes { try file.append(framed: $0) }
        let header = try file.commit(roots: [], metadata: [])
        #expect(chunk.offset == committedEnd)
        try file.close()
        let reopened = try StorageFile(path: path, options: StorageOptions(readOnly: true))
        #expect(reopened.latestCommit.commitNumber == header.commitNumber)
        #expect(try reopened.readChunk(at: chunk.offset, kind: .value, limit: header.endOffset).bytes
                == [UInt8](repeating: 9, count: 3000))
    }

    /// A short-write fault writes the first bytes through and then fails, as a disk filling up mid-write does.
    @Test func shortWriteFaultWritesItsFirstBytesThenFails() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("raw")
        let calls = FaultInjectingSystemCalls()
        let fd = try calls.open(path, flags: O_RDWR | O_CREAT, mode: 0o644)
        defer { try? calls.close(fd) }
        let bytes = (0..<4096).map { UInt8(truncatingIfNeeded: $0 % 251 + 1) }
        calls.arm(.init(call: .pwrite, nth: 1, errno: ENOSPC, shortWrite: 1000))
        #expect { try bytes.withUnsafeBytes { try calls.pwriteAll(fd, $0, at: 0) } } throws: {
            ($0 as? SystemCallFailure)?.errno == ENOSPC
        }
        #expect(readFile(path) == Array(bytes[..<1000]))
    }

    /// R8: a one-sync commit whose single `pwrite` (data and header) lands partly in the zero tail before the disk
    /// fills up: `.diskFull`, and although the file never grew past what was committed, the bytes that landed
    /// are cut off with the tail (the file ends at the newest commit again, so the next one-sync commit writes
    /// where the disk holds nothing, FORMAT.md §6); the next commit succeeds and every acknowledged commit reopens.
    @Test func shortWriteOfAOneSyncCommitIsCutOffAndCommitsResume() throws {
        let seed: UInt64 = 29
        let dir = TemporaryDirectory()
        let (path, end) = try RecoveryTests.buildWithZeroTail(dir, seed: seed, commits: 3)
        let allocated = readFile(path).count
        let calls = FaultInjectingSystemCalls()
        let file = try StorageFile(path: path, options: StorageOptions(durability: .full), system: calls)
        let config = CrashWorkload.configuration
        let failing = try BTree(file: file, commit: file.latestCommit, index: 0, configuration: config)
            .modified(by: CrashWorkload.batch(seed: seed, commit: 4))
        // 1000 bytes of the commit land, all inside the zero tail; then the disk is full.
        #expect(allocated - end > 1000, "the file has no zero tail for the commit to land in")
        calls.arm(.init(call: .pwrite, nth: 1, errno: ENOSPC, shortWrite: 1000))
        #expect { try file.commit(roots: [failing.root], metadata: CrashWorkload.metadata(commit: 4)) } throws: {
            ($0 as? SofaError)?.code == .diskFull
        }
        #expect(calls.failuresInjected == 1 && calls.count(.pwrite) == 1, "the commit was not one pwrite")
        #expect(readFile(path).count == end, "the partly written commit was left in the zero tail")
        #expect(file.latestCommit.endOffset == UInt64(end))

        calls.arm(nil)  // space freed
        let retry = try BTree(file: file, commit: file.latestCommit, index: 0, configuration: config)
            .modified(by: CrashWorkload.batch(seed: seed, commit: 4))
        let header = try file.commit(roots: [retry.root], metadata: CrashWorkload.metadata(commit: 4))
        #expect(header.dataCheck?.start == UInt64(end), "the retry was not a one-sync commit after the newest")
        try file.close()
        try RecoveryTests.expectCommit(path, seed: seed, expected: 4, "after a short write")
    }
}
