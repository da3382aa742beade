import Foundation
import Testing

@testable import SofaStorage

/// A batch modify touching many leaves prepares them on every core (`LeafPreparation` in BTree+Modify.swift);
/// it must write exactly the bytes the one-thread path writes, in the same order, whatever the batch.
@Suite struct ParallelModifyTests {
    static func key(_ n: Int) -> [UInt8] { numericKey(n) + Array(repeating: UInt8(n % 251), count: n % 5) }

    /// The same random batches applied to two files, one batch modify on one thread, the other with leaves
    /// prepared on every core: after every commit both hold the model's rows and, uncompressed, the files are
    /// byte for byte the same. Batches are large enough to span several preparation windows, and some empty
    /// whole leaves.
    @Test(arguments: [(nodeSize: 256, compress: true), (nodeSize: 1024, compress: false)])
    func parallelLeavesWriteTheSameFile(nodeSize: Int, compress: Bool) throws {
        for seed in SeededGenerator.seeds(fixed: [3]) {
            var rng = SeededGenerator(seed: seed)
            let dir = TemporaryDirectory()
            let config = BTreeConfiguration(nodeSize: nodeSize, innerNodeSize: nodeSize, compress: compress,
                                            reducer: Int64SumReducer())
            let serialFile = try StorageFile(path: dir.file("serial"), options: StorageOptions(durability: .none))
            let parallelFile = try StorageFile(path: dir.file("parallel"), options: StorageOptions(durability: .none))
            var serial = BTree(file: serialFile, commit: serialFile.latestCommit, index: 0, configuration: config)
            var parallel = BTree(file: parallelFile, commit: parallelFile.latestCommit, index: 0, configuration: config)
            var model: [Int: [UInt8]] = [:]
            for batch in 0..<8 {
                var byKey: [Int: BTreeAction] = [:]
                let size = batch == 0 ? 20_000 : [50, 3000, 9000].randomElement(using: &rng)!
                // One batch in four removes a whole key range (leaves become empty and disappear).
                let cleared = batch % 4 == 3 ? Int.random(in: 0..<15_000, using: &rng) : nil
                if let cleared { for n in cleared..<(cleared + 2000) { byKey[n] = .remove(Self.key(n)) } }
                for _ in 0..<size {
                    let n = Int.random(in: 0..<20_000, using: &rng)
                    if batch > 0 && Int.random(in: 0..<100, using: &rng) < 25 {
                        byKey[n] = .remove(Self.key(n))
                    } else {
                        byKey[n] = .put(Self.key(n), int64Value(Int64.random(in: -1000...1000, using: &rng)))
                    }
                }
                let actions = byKey.keys.sorted().map { byKey[$0]! }
                let dataStart = Int(serialFile.latestCommit.endOffset)
                #expect(compress || parallelFile.latestCommit.endOffset == serialFile.latestCommit.endOffset)
                serial = try serial.modified(by: actions, parallelFrom: Int.max)
                // Workers take a leaf from the node cache when it is there, and read it from the file otherwise:
                // every other batch finds the cache empty.
                if batch % 2 == 1 { parallelFile.nodeCache.removeAll() }
                parallel = try parallel.modified(by: actions, parallelFrom: 1)
                for (n, action) in byKey { model[n] = action.value }
                try serialFile.commit(roots: [serial.root], metadata: [])
                try parallelFile.commit(roots: [parallel.root], metadata: [])
                serial = BTree(file: serialFile, commit: serialFile.latestCommit, index: 0, configuration: config)
                parallel = BTree(file: parallelFile, commit: parallelFile.latestCommit, index: 0, configuration: config)
                let expected = model.keys.sorted().map { (Self.key($0), model[$0]!) }
                let rows = try parallel.rows()
                #expect(rows.map(\.key) == expected.map(\.0) && rows.map(\.value) == expected.map(\.1),
                        "seed \(seed) batch \(batch): rows")
                #expect(parallel.reduction == serial.reduction, "seed \(seed) batch \(batch): reduction")
                // The batch's nodes (commit headers differ: they hold the time). LZ4's output may depend on the
                // compressor's history (each worker has its own), so compressed nodes are compared by content.
                guard !compress else { continue }
                #expect(parallel.root?.offset == serial.root?.offset
                        && parallel.root?.subtreeSize == serial.root?.subtreeSize)
                let dataEnd = Int(serialFile.latestCommit.offset)
                let a = try Data(contentsOf: URL(fileURLWithPath: dir.file("serial")))[dataStart..<dataEnd]
                let b = try Data(contentsOf: URL(fileURLWithPath: dir.file("parallel")))[dataStart..<dataEnd]
                #expect(a == b, "seed \(seed) batch \(batch): the nodes written differ")
            }
            expectSound(parallel, "seed \(seed)")
            try serialFile.close()
            try parallelFile.close()
        }
    }

    /// Appends at the end of the key range (the by-sequence tree's only change, and the by-ID tree's with
    /// increasing IDs) split the right edge full first (`NodeWriter.appendRuns`): after many small appending
    /// batches every leaf and inner node but the right edge's is full, and the one-thread and every-core paths
    /// write the same bytes.
    @Test func appendsFillNodesBehindTheRightEdge() throws {
        let dir = TemporaryDirectory()
        let config = BTreeConfiguration(nodeSize: 256, innerNodeSize: 256, compress: false,
                                        reducer: Int64SumReducer())
        let serialFile = try StorageFile(path: dir.file("serial"), options: StorageOptions(durability: .none))
        let parallelFile = try StorageFile(path: dir.file("parallel"), options: StorageOptions(durability: .none))
        var serial = BTree(file: serialFile, root: nil, configuration: config, limit: StorageFile.unlimited)
        var parallel = BTree(file: parallelFile, root: nil, configuration: config, limit: StorageFile.unlimited)
        // File creation wrote a commit holding the time: compare what follows it.
        let dataStart = Int(serialFile.latestCommit.endOffset)
        var next = 0
        for batch in 0..<400 {
            // Mostly one or two rows per batch, now and then a larger one spanning several leaves.
            let count = batch % 50 == 49 ? 300 : 1 + batch % 2
            let actions = (next..<(next + count)).map { BTreeAction.put(Self.key($0), int64Value(Int64($0))) }
            next += count
            serial = try serial.modified(by: actions, parallelFrom: Int.max)
            parallel = try parallel.modified(by: actions, parallelFrom: 1)
            #expect(serial.root?.offset == parallel.root?.offset
                    && serial.root?.subtreeSize == parallel.root?.subtreeSize, "batch \(batch)")
        }
        try serialFile.commit(roots: [serial.root], metadata: [])
        try parallelFile.commit(roots: [parallel.root], metadata: [])
        let a = try Data(contentsOf: URL(fileURLWithPath: dir.file("serial")))
        let b = try Data(contentsOf: URL(fileURLWithPath: dir.file("parallel")))
        let end = Int(serialFile.latestCommit.offset)
        #expect(a[dataStart..<end] == b[dataStart..<end], "the nodes written differ")
        let tree = BTree(file: serialFile, commit: serialFile.latestCommit, index: 0, configuration: config)
        #expect(try tree.rows().map(\.key) == (0..<next).map(Self.key))
        expectSound(tree, "appends")
        // Per level, every node but the last (the right edge) is full: its next entry would not have fit.
        var levels: [Int: [NodeSummary]] = [:]
        try tree.forEachNode { levels[$0.level, default: []].append($0) }
        // Split evenly, a node behind the edge would hold about half of the 256 bytes.
        var behindEdge = 0
        for (level, nodes) in levels {
            for node in nodes.dropLast() {
                behindEdge += 1
                #expect(node.rawBytes > 176, "level \(level): node of \(node.rawBytes) bytes behind the edge")
            }
        }
        #expect(behindEdge > 20)
        try serialFile.close()
        try parallelFile.close()
    }

    /// Two batches modified one after the other without a commit between them (an update of several passes):
    /// the second reads leaves the first appended and has not committed, which its workers must find written.
    @Test func secondUncommittedPassReadsTheFirst() throws {
        let dir = TemporaryDirectory()
        let config = BTreeConfiguration(nodeSize: 512, compress: false, reducer: Int64SumReducer())
        let file = try StorageFile(path: dir.file("tree"), options: StorageOptions(durability: .none))
        var tree = BTree(file: file, root: nil, configuration: config, limit: StorageFile.unlimited)
        let first = (0..<5000).map { BTreeAction.put(Self.key($0 * 2), int64Value(1)) }
        tree = try tree.modified(by: first, parallelFrom: 1)
        let second = (0..<5000).map { BTreeAction.put(Self.key($0 * 2 + 1), int64Value(2)) }
        tree = try tree.modified(by: second, parallelFrom: 1)
        try file.commit(roots: [tree.root], metadata: [])
        let committed = BTree(file: file, commit: file.latestCommit, index: 0, configuration: config)
        #expect(committed.rowCount == 10_000)
        #expect(Int64SumReducer.decode(committed.reduction ?? []) == 15_000)
        #expect(try committed.rows().map(\.key) == (0..<10_000).map(Self.key))
        expectSound(committed, "two passes")
        try file.close()
    }

    /// RELIABILITY.md R8 for a parallel batch modify: a write failing for a full disk while leaf workers still
    /// read the uncommitted leaves of an earlier pass (a view update of several passes) is `.diskFull` — the
    /// file is not cut back under the workers (which would fault on the mapping) but once they are done —
    /// and the file keeps its last commit and takes the next one.
    @Test func diskFullWhileWorkersReadAnEarlierPass() throws {
        let dir = TemporaryDirectory()
        let faults = FaultInjectingSystemCalls()
        let config = BTreeConfiguration(nodeSize: 512, compress: false, reducer: Int64SumReducer())
        let file = try StorageFile(path: dir.file("tree"), options: StorageOptions(durability: .none), system: faults)
        let value = [UInt8](repeating: 7, count: 100)
        var tree = BTree(file: file, root: nil, configuration: config, limit: StorageFile.unlimited)
        tree = try tree.modified(by: (0..<1000).map { .put(Self.key($0), int64Value(1)) }, parallelFrom: 1)
        try file.commit(roots: [tree.root], metadata: [])
        let committedEnd = file.latestCommit.endOffset
        // A first pass, not committed: ~2 MiB of leaves past the commit.
        let first = (0..<20_000).map { BTreeAction.put(Self.key($0), value) }
        let pass1 = try tree.modified(by: first, parallelFrom: 1)
        // The second pass rewrites every leaf of the first; its writer flushes after 1 MiB while the workers
        // read ahead. The preparation's own flush is the first write, that one the second.
        faults.arm(.init(call: .pwrite, nth: 2, errno: ENOSPC))
        let second = (0..<20_000).map { BTreeAction.put(Self.key($0), int64Value(Int64($0)) + value) }
        var failure: SofaError?
        do { _ = try pass1.modified(by: second, parallelFrom: 1) } catch let error as SofaError { failure = error }
        #expect(failure?.code == .diskFull, "\(String(describing: failure))")
        #expect(faults.failuresInjected == 1)
        faults.arm(nil)
        #expect(file.writtenLength == committedEnd, "the uncommitted passes were cut off once the workers were done")

        let committed = BTree(file: file, commit: file.latestCommit, index: 0, configuration: config)
        #expect(committed.rowCount == 1000)
        let retried = try committed.modified(by: second, parallelFrom: 1)
        try file.commit(roots: [retried.root], metadata: [])
        let after = BTree(file: file, commit: file.latestCommit, index: 0, configuration: config)
        #expect(after.rowCount == 20_000)
        #expect(try after.rows().map(\.value) == (0..<20_000).map { int64Value(Int64($0)) + value })
        expectSound(after, "after the full disk")
        try file.close()
    }

    /// A touched leaf that fails its CRC, read by a leaf worker from the file, fails the batch with a corruption
    /// error naming the leaf's offset, as the one-thread path does; the file keeps its last commit.
    @Test(arguments: [1, Int.max])
    func damagedLeafFailsTheBatch(parallelFrom: Int) throws {
        let dir = TemporaryDirectory()
        let path = dir.file("tree")
        let config = BTreeConfiguration(nodeSize: 512, compress: false, reducer: Int64SumReducer())
        var file = try StorageFile(path: path, options: StorageOptions(durability: .none))
        let tree = try BTree(file: file, root: nil, configuration: config, limit: StorageFile.unlimited)
            .modified(by: (0..<3000).map { .put(Self.key($0), int64Value(1)) })
        try file.commit(roots: [tree.root], metadata: [])
        // A leaf: the sixth child of the first parent of leaves.
        var parent = try tree.node(at: tree.root!.offset)
        while try !tree.node(at: parent.childOffset(0)).isLeaf { parent = try tree.node(at: parent.childOffset(0)) }
        let leaf = parent.childOffset(min(5, parent.count - 1))
        try file.close()
        // One payload byte of the leaf flipped on disk; the file is opened again with an empty cache.
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
        try handle.seek(toOffset: leaf + 20)
        let byte = try handle.read(upToCount: 1)![0]
        try handle.seek(toOffset: leaf + 20)
        handle.write(Data([byte ^ 0x40]))
        try handle.close()
        file = try StorageFile(path: path, options: StorageOptions(durability: .none))
        let reopened = BTree(file: file, commit: file.latestCommit, index: 0, configuration: config)
        let every = (0..<3000).map { BTreeAction.put(Self.key($0), int64Value(2)) }
        var failure: SofaError?
        do { _ = try reopened.forWriter.modified(by: every, parallelFrom: parallelFrom) } catch let error as SofaError {
            failure = error
        }
        #expect(failure?.code == .corruption && failure?.offset == Int(leaf), "\(String(describing: failure))")
        file.discardUncommitted()
        #expect(file.writtenLength == file.latestCommit.endOffset)
        try file.close()
    }

    /// Only a batch whose changes all lie after a node's largest key splits it full first: a batch that also
    /// removes an entry of the last leaf, or inserts in the middle of a full leaf, splits evenly — on the one-
    /// thread path and with leaves prepared on every core alike.
    @Test(arguments: [Int.max, 1])
    func onlyPureAppendsSplitFullFirst(parallelFrom: Int) throws {
        let dir = TemporaryDirectory()
        let config = BTreeConfiguration(nodeSize: 512, compress: false, reducer: Int64SumReducer())
        let file = try StorageFile(path: dir.file("tree"), options: StorageOptions(durability: .none))
        let per = 512 / NodeWriter.leafEntrySize(keyCount: 4, valueCount: 8)  // entries of a full leaf
        func put(_ n: Int) -> BTreeAction { .put(numericKey(n), int64Value(Int64(n))) }
        func leafCounts(_ tree: BTree) throws -> [Int] {
            var counts: [Int] = []
            try tree.forEachSpan { leaf, _ in counts.append(leaf.count); return true }
            return counts
        }
        // Three full leaves of even keys (a new tree splits evenly: equal entries, equal runs).
        let empty = BTree(file: file, root: nil, configuration: config, limit: StorageFile.unlimited)
        let full = try empty.modified(by: (0..<(3 * per)).map { put($0 * 2) }, parallelFrom: parallelFrom)
        #expect(try leafCounts(full) == [per, per, per])
        let last = (3 * per - 1) * 2

        // Appends only: the old entries stay together, full; the new leaf holds the two new ones.
        let appended = try full.modified(by: [put(last + 2), put(last + 4)], parallelFrom: parallelFrom)
        #expect(try leafCounts(appended) == [per, per, per, 2])

        // A removal in the last leaf with the same appends: an even split of per + 1 entries.
        let mixed = try full.modified(by: [.remove(numericKey(last)), put(last + 2), put(last + 4)],
                                      parallelFrom: parallelFrom)
        #expect(try leafCounts(mixed) == [per, per, (per + 1) - (per + 1) / 2, (per + 1) / 2])

        // An insert in the middle of the full first leaf: an even split there, the others untouched.
        let middle = try full.modified(by: [put(1)], parallelFrom: parallelFrom)
        #expect(try leafCounts(middle) == [(per + 1) - (per + 1) / 2, (per + 1) / 2, per, per])
        for (tree, name) in [(appended, "appended"), (mixed, "mixed"), (middle, "middle")] {
            expectSound(tree, "\(name), parallelFrom \(parallelFrom)")
        }
        try file.close()
    }
}
