#if canImport(Glibc)
import Glibc
#endif
import Testing

@testable import SofaStorage

/// ``TreeAppender`` against a sorted model: trees of every height resumed, rows appended over several chunks
/// (oversized values among them), finished, then modified as any tree is, committed and reopened — the rows,
/// counts, reductions, ranges and lookups checked after each round (``BTreeModelTests/check``) and `verify()`
/// clean.
@Suite struct TreeAppenderTests {
    typealias Row = BTreeModelTests.Row

    @Test(arguments: [(nodeSize: 256, innerNodeSize: 256, compress: true),
                      (nodeSize: 1024, innerNodeSize: 200, compress: true),
                      (nodeSize: 4096, innerNodeSize: 4096, compress: false)])
    func appendedChunksAgainstModel(nodeSize: Int, innerNodeSize: Int, compress: Bool) throws {
        for seed in SeededGenerator.seeds(fixed: [1, 2]) {
            for initial in [0, 1, 30, 800] {
                try run(seed: seed, initial: initial,
                        config: BTreeConfiguration(nodeSize: nodeSize, innerNodeSize: innerNodeSize,
                                                   compress: compress, reducer: Int64SumReducer()))
            }
        }
    }

    /// Levels of `tree` (0 when empty, 1 for a lone leaf).
    static func height(_ tree: BTree) throws -> Int {
        var levels = 0
        try tree.forEachNode { levels = max(levels, $0.level) }
        return levels
    }

    func run(seed: UInt64, initial: Int, config: BTreeConfiguration) throws {
        var rng = SeededGenerator(seed: seed)
        let dir = TemporaryDirectory()
        let path = dir.file("tree")
        var file = try StorageFile(path: path, options: StorageOptions(durability: .none))
        var tree = BTree(file: file, commit: file.latestCommit, index: 0, configuration: config)
        var model: [Int: Row] = [:]
        func value(_ rng: inout SeededGenerator) -> [UInt8] {
            Int.random(in: 0..<60, using: &rng) == 0 ? [UInt8](repeating: 9, count: config.nodeSize + 100)
                : int64Value(Int64.random(in: -1000...1000, using: &rng))
        }
        // A first tree made by a batch modify: empty, a lone leaf, or a few levels.
        if initial > 0 {
            let actions = (0..<initial).map { BTreeAction.put(BTreeModelTests.key($0), value(&rng)) }
            for (n, a) in actions.enumerated() { model[n] = Row(key: a.key, value: a.value!) }
            tree = try tree.forWriter.modified(by: actions)
        }
        var next = initial
        let startHeight = try Self.height(tree)
        for round in 1...6 {
            let context = "seed \(seed) initial \(initial) round \(round) nodeSize \(config.nodeSize)"
            let appender = try TreeAppender(resuming: tree.forWriter)
            #expect(appender.largestKey == model.keys.max().map { BTreeModelTests.key($0) }, "\(context): edge key")
            for _ in 0..<Int.random(in: 1...3, using: &rng) {
                for _ in 0..<[1, 3, 40, 150].randomElement(using: &rng)! {
                    let row = Row(key: BTreeModelTests.key(next), value: value(&rng))
                    try appender.append(key: row.key, value: row.value)
                    model[next] = row
                    next += Int.random(in: 1...3, using: &rng)
                }
                #expect(appender.largestKey == BTreeModelTests.key(model.keys.max()!), "\(context): largest key")
            }
            tree = try appender.finish()
            // The finished tree is an ordinary one: a batch modify with puts and removes anywhere in it.
            if Bool.random(using: &rng) {
                var byKey: [Int: BTreeAction] = [:]
                for _ in 0..<Int.random(in: 1...60, using: &rng) {
                    let n = Int.random(in: 0..<next + 5, using: &rng)
                    byKey[n] = Bool.random(using: &rng) ? .remove(BTreeModelTests.key(n))
                        : .put(BTreeModelTests.key(n), value(&rng))
                }
                tree = try tree.modified(by: byKey.keys.sorted().map { byKey[$0]! })
                for (n, a) in byKey { model[n] = a.value.map { Row(key: a.key, value: $0) } }
                next = max(next, (model.keys.max() ?? -1) + 1)
            }
            try file.commit(roots: [tree.root], metadata: [])
            if round % 3 == 0 {
                try file.close()
                file = try StorageFile(path: path, options: StorageOptions(durability: .none))
            }
            tree = BTree(file: file, commit: file.latestCommit, index: 0, configuration: config)
            let rows = model.keys.sorted().map { model[$0]! }
            try BTreeModelTests().check(tree, against: rows, rng: &rng, context: context)
            expectSound(tree, context)
        }
        #expect(try Self.height(tree) >= startHeight, "seed \(seed) initial \(initial): no level lost")
    }

    /// From an empty tree, an appender fills nodes as the bulk load does (FORMAT.md §8): the same leaves and inner
    /// nodes, row for row, the tree growing level by level. (Finishing and resuming in between may leave a node
    /// behind the edge short of full, as a batch modify's full-first split does: the entry that overflowed it
    /// pointed at an edge node written early.)
    @Test func fillsNodesAsTheBulkLoadDoes() throws {
        let dir = TemporaryDirectory()
        let file = try StorageFile(path: dir.file("tree"), options: StorageOptions(durability: .none))
        let config = BTreeConfiguration(nodeSize: 512, innerNodeSize: 200, compress: false, reducer: Int64SumReducer())
        var rng = SeededGenerator(seed: 7)
        let rows = (0..<3000).map { n in
            // Values over the node size, one over twice the appender's open-leaf buffer (which then grows).
            Row(key: BTreeModelTests.key(n),
                value: n == 1500 ? (0..<5000).map { UInt8(truncatingIfNeeded: $0) }
                    : n % 97 == 0 ? [UInt8](repeating: 1, count: 600)
                    : int64Value(Int64.random(in: -9...9, using: &rng)))
        }
        let builder = TreeBuilder(file: file, configuration: config)
        for row in rows { try builder.add(key: row.key, value: row.value) }
        let built = try builder.finish()
        let appender = try TreeAppender(resuming: BTree(file: file, root: nil, configuration: config,
                                                        limit: StorageFile.unlimited))
        for row in rows { try appender.append(key: row.key, value: row.value) }
        let appended = try appender.finish()
        func shape(_ tree: BTree) throws -> [[Int]] {
            var levels: [[Int]] = []
            try tree.forEachNode { node in
                while levels.count < node.level { levels.append([]) }
                levels[node.level - 1].append(node.entries)
            }
            return levels
        }
        #expect(try shape(appended) == shape(built))
        #expect(try shape(appended).count >= 3, "grown from empty to three levels or more")
        // Leaf for leaf the same bytes (inner nodes differ only in where their children lie).
        func leafPayloads(_ tree: BTree) throws -> [[UInt8]] {
            var payloads: [[UInt8]] = []
            try tree.forEachNode { node in
                guard node.isLeaf else { return }
                let chunk = try file.readChunk(at: node.offset, kind: .leaf, limit: StorageFile.unlimited)
                payloads.append(chunk.withUnsafeBytes { Array($0) })
            }
            return payloads
        }
        #expect(try leafPayloads(appended) == leafPayloads(built))
        #expect(try appended.rows().map { Row(key: $0.key, value: $0.value) } == rows)
        expectSound(appended)
    }

    /// Edge nodes written with larger targets (an older file) are resumed as they are: the tree takes the new
    /// rows, and the nodes after them are filled to the new targets.
    @Test func resumesNodesLargerThanTheTarget() throws {
        let dir = TemporaryDirectory()
        let file = try StorageFile(path: dir.file("tree"), options: StorageOptions(durability: .none))
        let large = BTreeConfiguration(nodeSize: 2048, innerNodeSize: 1024, compress: true, reducer: Int64SumReducer())
        let small = BTreeConfiguration(nodeSize: 256, innerNodeSize: 200, compress: true, reducer: Int64SumReducer())
        let rows = (0..<2000).map { Row(key: BTreeModelTests.key($0), value: int64Value(Int64($0 % 11))) }
        let old = try BTree(file: file, root: nil, configuration: large, limit: StorageFile.unlimited)
            .modified(by: rows[..<1500].map { .put($0.key, $0.value) })
        let appender = try TreeAppender(resuming: BTree(file: file, root: old.root, configuration: small,
                                                        limit: StorageFile.unlimited))
        for row in rows[1500...] { try appender.append(key: row.key, value: row.value) }
        let tree = try appender.finish()
        #expect(try tree.rows().map { Row(key: $0.key, value: $0.value) } == rows)
        let sum = (0..<2000).reduce(Int64(0)) { $0 + Int64($1 % 11) }
        #expect(Int64SumReducer.decode(tree.reduction ?? []) ?? 0 == sum)
        expectSound(tree)
    }

    /// After `finish()`, and after a failed write, the appender refuses every call.
    @Test func refusesCallsOnceFinishedOrFailed() throws {
        let dir = TemporaryDirectory()
        let file = try StorageFile(path: dir.file("tree"), options: StorageOptions(durability: .none))
        let config = BTreeConfiguration(nodeSize: 256, innerNodeSize: 256, compress: false, reducer: Int64SumReducer())
        let appender = try TreeAppender(resuming: BTree(file: file, root: nil, configuration: config,
                                                        limit: StorageFile.unlimited))
        try appender.append(key: BTreeModelTests.key(1), value: int64Value(1))
        _ = try appender.finish()
        #expect(appender.largestKey == nil)
        try expectClosed(appender)
        // A write that fails (the storage file's buffer going out when the disk is full) closes it too: the
        // storage discarded the uncommitted nodes it points at.
        let faults = FaultInjectingSystemCalls()
        let faulty = try StorageFile(path: dir.file("faulty"), options: StorageOptions(durability: .none),
                                     system: faults)
        let failing = try TreeAppender(resuming: BTree(file: faulty, root: nil, configuration: config,
                                                       limit: StorageFile.unlimited))
        faults.arm(.init(call: .pwrite, nth: 1, persistent: true, errno: ENOSPC))
        let error = #expect(throws: SofaError.self) {
            for n in 0..<4000 {
                try failing.append(key: BTreeModelTests.key(n), value: [UInt8](repeating: 3, count: 500))
            }
        }
        #expect(error?.code == .diskFull)
        try expectClosed(failing)
    }

    func expectClosed(_ appender: TreeAppender, sourceLocation: SourceLocation = #_sourceLocation) throws {
        for call in [{ try appender.append(key: BTreeModelTests.key(9_999), value: int64Value(2)) },
                     { _ = try appender.finish() }] {
            #expect(sourceLocation: sourceLocation) { try call() } throws: {
                ($0 as? SofaError)?.message == "the tree appender was finished, or a write of it failed"
            }
        }
    }

    /// A key at or below the tree's largest is refused, and the appender and tree are left as they were.
    @Test func refusesKeysNotAboveTheTree() throws {
        let dir = TemporaryDirectory()
        let file = try StorageFile(path: dir.file("tree"), options: StorageOptions(durability: .none))
        let config = BTreeConfiguration(nodeSize: 256, innerNodeSize: 256, compress: false, reducer: Int64SumReducer())
        let rows = (0..<100).map { Row(key: BTreeModelTests.key($0 * 2), value: int64Value(Int64($0))) }
        let tree = try BTree(file: file, commit: file.latestCommit, index: 0, configuration: config)
            .forWriter.modified(by: rows.map { .put($0.key, $0.value) })
        let appender = try TreeAppender(resuming: tree)
        for key in [rows[99].key, rows[50].key, BTreeModelTests.key(197)] {
            #expect {
                try appender.append(key: key, value: int64Value(1))
            } throws: { ($0 as? SofaError)?.code == .invalidArgument }
        }
        try appender.append(key: BTreeModelTests.key(1000), value: int64Value(7))
        #expect {
            try appender.append(key: BTreeModelTests.key(1000), value: int64Value(8))
        } throws: { ($0 as? SofaError)?.message == "appended keys must be above every key of the tree" }
        let finished = try appender.finish()
        let expected = rows + [Row(key: BTreeModelTests.key(1000), value: int64Value(7))]
        #expect(try finished.rows().map { Row(key: $0.key, value: $0.value) } == expected)
        #expect(Int64SumReducer.decode(finished.reduction ?? []) ?? 0 == 4950 + 7)
        expectSound(finished)
    }

    /// Nothing appended: an empty tree stays empty, and a tree finishes with the same rows.
    @Test func finishingWithoutAppendsKeepsTheRows() throws {
        let dir = TemporaryDirectory()
        let file = try StorageFile(path: dir.file("tree"), options: StorageOptions(durability: .none))
        let config = BTreeConfiguration(nodeSize: 256, innerNodeSize: 256, compress: true, reducer: Int64SumReducer())
        let empty = BTree(file: file, commit: file.latestCommit, index: 0, configuration: config)
        #expect(try TreeAppender(resuming: empty).finish().root == nil)
        let rows = (0..<500).map { Row(key: BTreeModelTests.key($0), value: int64Value(Int64($0))) }
        let tree = try empty.forWriter.modified(by: rows.map { .put($0.key, $0.value) })
        let finished = try TreeAppender(resuming: tree).finish()
        #expect(try finished.rows().map { Row(key: $0.key, value: $0.value) } == rows)
        #expect(finished.rowCount == 500)
        expectSound(finished)
    }
}
