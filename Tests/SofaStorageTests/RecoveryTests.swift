import Foundation
import Testing

@testable import SofaStorage

/// Damaged files (RELIABILITY.md R4, R5): truncation, torn headers, bit flips. The oracle: the file opens at
/// the newest intact commit, whose content equals the model; damage inside reachable data surfaces as a
/// typed corruption error naming the file and offset — never a trap, never a wrong row.
@Suite struct RecoveryTests {
    /// A file built by `commits` workload commits, with each commit's end offset.
    struct Built {
        let dir = TemporaryDirectory()
        var path: String { dir.file("tree") }
        var ends: [UInt64] = []  // ends[k] = file length after workload commit k (ends[0]: the empty file)
        let seed: UInt64
    }

    static func build(seed: UInt64, commits: Int) throws -> Built {
        var built = Built(seed: seed)
        let file = try StorageFile(path: built.path, options: StorageOptions(durability: .none))
        var tree = BTree(file: file, root: nil, configuration: CrashWorkload.configuration,
                         limit: StorageFile.unlimited)
        built.ends.append(file.latestCommit.endOffset)
        for k in 1...commits {
            tree = try tree.modified(by: CrashWorkload.batch(seed: seed, commit: k))
            built.ends.append(try file.commit(roots: [tree.root],
                                              metadata: CrashWorkload.metadata(commit: k)).endOffset)
        }
        try file.close()
        return built
    }

    /// Opens `path` read-only and checks it holds exactly workload commit `expected`.
    static func expectCommit(_ path: String, seed: UInt64, expected: Int, _ context: String) throws {
        let file = try StorageFile(path: path, options: StorageOptions(readOnly: true))
        #expect(Int(file.latestCommit.commitNumber) - 1 == expected, "\(context): opened the wrong commit")
        let tree = BTree(file: file, commit: file.latestCommit, index: 0, configuration: CrashWorkload.configuration)
        let rows = try tree.rows()
        let model = CrashWorkload.model(seed: seed, commits: expected)
        #expect(rows.map(\.key) == model.map(\.key) && rows.map(\.value) == model.map(\.value), "\(context): content")
        expectSound(tree, context)
    }

    @Test func truncationOpensTheNewestIntactCommit() throws {
        let built = try Self.build(seed: 11, commits: 12)
        let bytes = readFile(built.path)
        let scratch = TemporaryDirectory()
        // Every 4 KiB boundary across the last commits, every commit end ±1, and random offsets.
        let from = Int(built.ends[built.ends.count - 4])
        var cuts = Set(stride(from: from / 4096 * 4096, to: bytes.count, by: 4096))
        for end in built.ends.dropFirst() { cuts.formUnion([Int(end) - 1, Int(end), Int(end) + 1]) }
        var rng = SeededGenerator(seed: 5)
        for _ in 0..<20 { cuts.insert(Int.random(in: Int(built.ends[0])..<bytes.count, using: &rng)) }
        for cut in cuts.sorted() where cut <= bytes.count && cut >= Int(built.ends[0]) {
            let path = scratch.file("cut-\(cut)")
            writeFile(path, Array(bytes[0..<cut]))
            let expected = built.ends.lastIndex { $0 <= UInt64(cut) }!
            try Self.expectCommit(path, seed: built.seed, expected: expected, "cut at \(cut)")
        }
    }

    @Test func tornNewestHeaderFallsBackAtEveryByte() throws {
        let built = try Self.build(seed: 12, commits: 6)
        let bytes = readFile(built.path)
        let scratch = TemporaryDirectory()
        let file = try StorageFile(path: built.path, options: StorageOptions(readOnly: true))
        let headerStart = Int(file.latestCommit.offset)
        for tear in headerStart..<bytes.count {
            // Torn as truncation, and torn as garbage in place of the rest of the header and trailer.
            let cutPath = scratch.file("torn-\(tear)")
            writeFile(cutPath, Array(bytes[0..<tear]))
            try Self.expectCommit(cutPath, seed: built.seed, expected: 5, "torn (cut) at \(tear)")
            var garbled = bytes
            for i in tear..<bytes.count { garbled[i] = UInt8(truncatingIfNeeded: i &* 31 &+ 7) ^ bytes[i] | 1 }
            writeFile(cutPath, garbled)
            try Self.expectCommit(cutPath, seed: built.seed, expected: 5, "torn (garbage) at \(tear)")
        }
    }

    /// Every node chunk reachable from the newest commit: offset and length.
    /// Writes `bytes` to `path` with one random bit of one of `nodes` flipped; returns that node's offset and the
    /// flipped byte's.
    static func writeWithOneBitFlipped(_ bytes: [UInt8], in nodes: [(offset: UInt64, length: Int)], to path: String,
                                       using rng: inout SeededGenerator) -> (nodeOffset: UInt64, byte: Int) {
        let target = nodes.randomElement(using: &rng)!
        let byte = Int(target.offset) + Int.random(in: 0..<target.length, using: &rng)
        var damaged = bytes
        damaged[byte] ^= 1 << UInt8.random(in: 0..<8, using: &rng)
        writeFile(path, damaged)
        return (target.offset, byte)
    }

    static func reachableNodes(_ tree: BTree) throws -> [(offset: UInt64, length: Int)] {
        var out: [(UInt64, Int)] = []
        func walk(_ offset: UInt64) throws {
            let chunk = try tree.file.readChunk(at: offset, kind: nil, limit: tree.limit)
            out.append((offset, chunk.fileLength))
            let node = try tree.node(at: offset)
            if !node.isLeaf { for i in 0..<node.count { try walk(node.childOffset(i)) } }
        }
        if let root = tree.root { try walk(root.offset) }
        return out
    }

    /// R5. The newest commit here writes no data (it only restates the roots), so every reachable node lies
    /// outside its data check and a flip must surface as a corruption error naming the node.
    @Test func singleBitFlipsInReachableNodesAreAlwaysDetected() throws {
        let built = try Self.build(seed: 13, commits: 8)
        do {
            let file = try StorageFile(path: built.path, options: StorageOptions(durability: .none))
            try file.commit(roots: file.latestCommit.roots, metadata: file.latestCommit.metadata)
            try file.close()
        }
        let bytes = readFile(built.path)
        let file = try StorageFile(path: built.path, options: StorageOptions(readOnly: true))
        let tree = BTree(file: file, commit: file.latestCommit, index: 0, configuration: CrashWorkload.configuration)
        let nodes = try Self.reachableNodes(tree)
        let model = CrashWorkload.model(seed: built.seed, commits: 8)
        let scratch = TemporaryDirectory()
        var rng = SeededGenerator(seed: 99)
        var detected = 0
        let flips = 300
        for n in 0..<flips {
            let path = scratch.file("flip-\(n)")
            let (nodeOffset, byte) = Self.writeWithOneBitFlipped(bytes, in: nodes, to: path, using: &rng)
            let f = try StorageFile(path: path, options: StorageOptions(readOnly: true))
            let t = BTree(file: f, commit: f.latestCommit, index: 0, configuration: CrashWorkload.configuration)
            do {
                let rows = try t.rows()
                // Reading everything without an error would mean the flip went unnoticed: it must not match…
                Issue.record("flip at \(byte) not detected (rows equal model: \(rows.map(\.key) == model.map(\.key)))")
            } catch let error as SofaError {
                #expect(error.code == .corruption, "flip at \(byte): \(error)")
                #expect(error.offset == Int(nodeOffset), "flip at \(byte) reported at \(error.offset ?? -1)")
                #expect(error.path == path)
                detected += 1
            }
            #expect(!t.verify().problems.isEmpty, "verify missed the flip at \(byte)")
        }
        print("RecoveryTests: \(detected) of \(flips) single-bit flips in reachable nodes detected")
        #expect(detected == flips)
    }

    /// A flip in a node the newest commit wrote, when that is a one-sync commit, fails the commit's data check
    /// but leaves no all-zero sector piece, which only a write lost to a power cut leaves (FORMAT.md §6): the
    /// commit stays the newest and reading the node reports a corruption error naming it, as anywhere else.
    @Test func bitFlipsInTheNewestOneSyncCommitAreCorruptionErrors() throws {
        let built = try Self.build(seed: 13, commits: 8)
        let bytes = readFile(built.path)
        let file = try StorageFile(path: built.path, options: StorageOptions(readOnly: true))
        let newest = file.latestCommit
        let check = try #require(newest.dataCheck, "the workload's commits are small enough to be checked")
        let tree = BTree(file: file, commit: newest, index: 0, configuration: CrashWorkload.configuration)
        let nodes = try Self.reachableNodes(tree).filter { $0.offset >= check.start && $0.offset < newest.offset }
        try file.close()
        #expect(!nodes.isEmpty)
        let scratch = TemporaryDirectory()
        var rng = SeededGenerator(seed: 98)
        var detected = 0
        var rolledBack = 0
        let flips = 100
        for n in 0..<flips {
            let path = scratch.file("flip-\(n)")
            let (nodeOffset, byte) = Self.writeWithOneBitFlipped(bytes, in: nodes, to: path, using: &rng)
            let f = try StorageFile(path: path, options: StorageOptions(readOnly: true))
            if f.latestCommit.commitNumber != newest.commitNumber {
                // The node held a piece of a sector that is all zeros: read as a torn commit, never wrong rows.
                try Self.expectCommit(path, seed: built.seed, expected: 7, "flip at \(byte) rolled back")
                rolledBack += 1
                continue
            }
            let t = BTree(file: f, commit: f.latestCommit, index: 0, configuration: CrashWorkload.configuration)
            do {
                _ = try t.rows()
                Issue.record("flip at \(byte) not detected")
            } catch let error as SofaError {
                #expect(error.code == .corruption && error.offset == Int(nodeOffset), "flip at \(byte): \(error)")
                detected += 1
            }
        }
        #expect(detected + rolledBack == flips)
        #expect(detected >= flips * 9 / 10, "\(rolledBack) of \(flips) flips were taken for a torn commit")
    }

    /// A file written by `commits` durable workload commits, as small durable commits leave it: ending in a
    /// zero tail (FORMAT.md §2, §11). Returns its path and the newest commit's end offset.
    static func buildWithZeroTail(_ dir: TemporaryDirectory, seed: UInt64,
                                  commits: Int) throws -> (path: String, end: Int) {
        let path = dir.file("tree")
        let file = try StorageFile(path: path)
        var tree = BTree(file: file, root: nil, configuration: CrashWorkload.configuration,
                         limit: StorageFile.unlimited)
        for k in 1...commits {
            tree = try tree.modified(by: CrashWorkload.batch(seed: seed, commit: k))
            try file.commit(roots: [tree.root], metadata: CrashWorkload.metadata(commit: k))
        }
        let end = Int(file.latestCommit.endOffset)
        try file.close()
        return (path, end)
    }

    /// Opening finds the newest commit through the zero tail with a few `pread`s (no search), a writable open
    /// keeps the tail, and the next commit starts at the newest commit's end, inside it.
    @Test func zeroTailOpensAtTheNewestCommit() throws {
        let dir = TemporaryDirectory()
        let (path, end) = try Self.buildWithZeroTail(dir, seed: 17, commits: 6)
        let bytes = readFile(path)
        #expect(bytes.count >= end + StorageFile.minimumZeroTail && bytes.count % 4096 == 0)
        #expect(bytes[end...].allSatisfy { $0 == 0 })
        let calls = FaultInjectingSystemCalls()
        let readOnly = try StorageFile(path: path, options: StorageOptions(readOnly: true), system: calls)
        #expect(readOnly.latestCommit.endOffset == UInt64(end))
        let blocks = (StorageFile.preallocationStep + Recovery.zeroTailBlock - 1) / Recovery.zeroTailBlock
        #expect(calls.count(.pread) <= 5 + blocks, "the zero tail was searched byte by byte")
        try readOnly.close()
        try Self.expectCommit(path, seed: 17, expected: 6, "zero tail")

        let file = try StorageFile(path: path)
        #expect(readFile(path).count == bytes.count, "a writable open cut a clean zero tail")
        let tree = try BTree(file: file, commit: file.latestCommit, index: 0,
                             configuration: CrashWorkload.configuration)
            .modified(by: CrashWorkload.batch(seed: 17, commit: 7))
        let next = try file.commit(roots: [tree.root], metadata: CrashWorkload.metadata(commit: 7))
        #expect(next.dataCheck?.start == UInt64(end))
        try file.close()
        if next.endOffset <= UInt64(bytes.count) { #expect(readFile(path).count == bytes.count) }
        try Self.expectCommit(path, seed: 17, expected: 7, "commit into the zero tail")
    }

    /// The longest zero tail a writer leaves, a full preallocation step up to a 4 KiB boundary (1 MiB + 4095
    /// bytes), is looked back through in a bounded number of block reads: the open finds the newest commit at
    /// the end (a writable open keeps the tail as clean, which it would cut after a search).
    @Test func fullSizeZeroTailOpensAtTheNewestCommit() throws {
        let dir = TemporaryDirectory()
        let (path, end) = try Self.buildWithZeroTail(dir, seed: 31, commits: 4)
        let tail = StorageFile.preallocationStep + 4095
        writeFile(path, Array(readFile(path)[..<end]) + [UInt8](repeating: 0, count: tail))
        let calls = FaultInjectingSystemCalls()
        let readOnly = try StorageFile(path: path, options: StorageOptions(readOnly: true), system: calls)
        #expect(readOnly.latestCommit.endOffset == UInt64(end))
        // The file header, the last 16 bytes, 17 blocks back to the commit, then its trailer, header and data.
        let blocks = (tail + Recovery.zeroTailBlock - 1) / Recovery.zeroTailBlock
        #expect(blocks == 17)
        #expect(calls.count(.pread) <= 5 + blocks, "\(calls.count(.pread)) reads to look back through the tail")
        try readOnly.close()
        try Self.expectCommit(path, seed: 31, expected: 4, "full-size zero tail")

        let file = try StorageFile(path: path)
        #expect(readFile(path).count == end + tail, "a writable open took the full-size zero tail for torn")
        let tree = try BTree(file: file, commit: file.latestCommit, index: 0,
                             configuration: CrashWorkload.configuration)
            .modified(by: CrashWorkload.batch(seed: 31, commit: 5))
        let next = try file.commit(roots: [tree.root], metadata: CrashWorkload.metadata(commit: 5))
        #expect(next.dataCheck?.start == UInt64(end))
        try file.close()
        try Self.expectCommit(path, seed: 31, expected: 5, "commit into the full-size zero tail")
    }

    /// A zero run longer than any zero tail (longer than the look-back, one preallocation step plus a block, as
    /// an extended file or a filesystem's hole leaves) is not looked through: opening gives up after the
    /// look-back, searches backward, still finds the newest commit, and a writable open cuts the zeros off.
    @Test func zeroRunLongerThanTheLookBackFallsBackToTheSearch() throws {
        let dir = TemporaryDirectory()
        let (path, end) = try Self.buildWithZeroTail(dir, seed: 37, commits: 4)
        let lookBack = StorageFile.preallocationStep + Recovery.zeroTailBlock
        let run = lookBack + 4 * Recovery.zeroTailBlock
        writeFile(path, Array(readFile(path)[..<end]) + [UInt8](repeating: 0, count: run))
        let calls = FaultInjectingSystemCalls()
        let readOnly = try StorageFile(path: path, options: StorageOptions(readOnly: true), system: calls)
        #expect(readOnly.latestCommit.endOffset == UInt64(end))
        // The search reads through the mapping: the reads stop at the look-back, before the commit.
        let blocks = lookBack / Recovery.zeroTailBlock
        #expect(calls.count(.pread) <= 2 + blocks, "\(calls.count(.pread)) reads: the look-back went past its limit")
        try readOnly.close()
        try Self.expectCommit(path, seed: 37, expected: 4, "zero run past the look-back")

        let file = try StorageFile(path: path)
        #expect(readFile(path).count == end, "a writable open kept a zero run longer than a zero tail")
        let tree = try BTree(file: file, commit: file.latestCommit, index: 0,
                             configuration: CrashWorkload.configuration)
            .modified(by: CrashWorkload.batch(seed: 37, commit: 5))
        try file.commit(roots: [tree.root], metadata: CrashWorkload.metadata(commit: 5))
        try file.close()
        try Self.expectCommit(path, seed: 37, expected: 5, "committed after the cut")
    }

    /// Bytes in the zero tail (a crash while a commit was being written into it; a stale copy of the newest
    /// header and trailer) are ignored: opening finds the newest commit before them, a writable open cuts them
    /// off, and commits go on.
    @Test func garbageInTheZeroTailIsIgnoredAndCut() throws {
        let dir = TemporaryDirectory()
        let (path, end) = try Self.buildWithZeroTail(dir, seed: 19, commits: 5)
        let bytes = readFile(path)
        let file = try StorageFile(path: path, options: StorageOptions(readOnly: true))
        let newestHeader = Int(file.latestCommit.offset)
        try file.close()
        var damages: [(String, [UInt8])] = []
        for (what, at) in [("right after the commit", end), ("mid-tail", (end + bytes.count) / 2),
                           ("at the end", bytes.count - 7)] {
            var damaged = bytes
            damaged.replaceSubrange(at..<(at + 7), with: [UInt8](repeating: 0x55, count: 7))
            damages.append((what, damaged))
        }
        var copied = bytes
        let stale = Array(bytes[newestHeader..<end])
        let at = (end + bytes.count) / 2
        copied.replaceSubrange(at..<(at + stale.count), with: stale)
        damages.append(("a copy of the newest header and trailer", copied))
        for (n, (what, damaged)) in damages.enumerated() {
            let damagedPath = dir.file("damaged-\(n)")
            writeFile(damagedPath, damaged)
            try Self.expectCommit(damagedPath, seed: 19, expected: 5, what)
            let writer = try StorageFile(path: damagedPath)
            #expect(readFile(damagedPath).count == end, "\(what): the garbage was not cut off")
            let tree = try BTree(file: writer, commit: writer.latestCommit, index: 0,
                                 configuration: CrashWorkload.configuration)
                .modified(by: CrashWorkload.batch(seed: 19, commit: 6))
            try writer.commit(roots: [tree.root], metadata: CrashWorkload.metadata(commit: 6))
            try writer.close()
            try Self.expectCommit(damagedPath, seed: 19, expected: 6, "\(what), committed again")
        }
    }

    /// A version 1 file (FORMAT.md §12) opens, and keeps getting version 1 commits: no data check, two syncs,
    /// no zero tail, so that builds that read only version 1 still open it.
    @Test func versionOneFileStaysVersionOne() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("v1")
        var options = StorageOptions()
        options.formatVersion = 1
        try StorageFile(path: path, options: options).close()
        #expect(readFile(path)[20] == 1)

        let calls = FaultInjectingSystemCalls()
        let file = try StorageFile(path: path, options: StorageOptions(), system: calls)
        #expect(file.formatVersion == 1)
        var tree = BTree(file: file, root: nil, configuration: CrashWorkload.configuration,
                         limit: StorageFile.unlimited)
        for k in 1...3 {
            tree = try tree.modified(by: CrashWorkload.batch(seed: 23, commit: k))
            let header = try file.commit(roots: [tree.root], metadata: CrashWorkload.metadata(commit: k))
            #expect(header.dataCheck == nil)
        }
        #expect(calls.count(.fdatasync) == 6, "two syncs per version 1 commit")
        let end = file.latestCommit.endOffset
        try file.close()
        #expect(UInt64(readFile(path).count) == end, "no zero tail in a version 1 file")
        #expect(readFile(path)[20] == 1, "the file header still says version 1")
        try Self.expectCommit(path, seed: 23, expected: 3, "version 1")
    }
}
