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
        var tree = BTree(file: file, root: nil, configuration: CrashWorkload.configuration, limit: StorageFile.unlimited)
        built.ends.append(file.latestCommit.endOffset)
        for k in 1...commits {
            tree = try tree.modified(by: CrashWorkload.batch(seed: seed, commit: k))
            built.ends.append(try file.commit(roots: [tree.root], metadata: CrashWorkload.metadata(commit: k)).endOffset)
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

    @Test func singleBitFlipsInReachableNodesAreAlwaysDetected() throws {
        let built = try Self.build(seed: 13, commits: 8)
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
            let target = nodes.randomElement(using: &rng)!
            let byte = Int(target.offset) + Int.random(in: 0..<target.length, using: &rng)
            var damaged = bytes
            damaged[byte] ^= 1 << UInt8.random(in: 0..<8, using: &rng)
            let path = scratch.file("flip-\(n)")
            writeFile(path, damaged)
            let f = try StorageFile(path: path, options: StorageOptions(readOnly: true))
            let t = BTree(file: f, commit: f.latestCommit, index: 0, configuration: CrashWorkload.configuration)
            do {
                let rows = try t.rows()
                // Reading everything without an error would mean the flip went unnoticed: it must not match…
                Issue.record("flip at \(byte) not detected (rows equal model: \(rows.map(\.key) == model.map(\.key)))")
            } catch let error as SofaError {
                #expect(error.code == .corruption, "flip at \(byte): \(error)")
                #expect(error.offset == Int(target.offset), "flip at \(byte) reported at \(error.offset ?? -1)")
                #expect(error.path == path)
                detected += 1
            }
            #expect(!t.verify().problems.isEmpty, "verify missed the flip at \(byte)")
        }
        print("RecoveryTests: \(detected) of \(flips) single-bit flips in reachable nodes detected")
        #expect(detected == flips)
    }
}
