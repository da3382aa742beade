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
        for seed in SeededGenerator.seeds(fixed: [1, 2, 3]) {
            try run(seed: seed, config: BTreeConfiguration(nodeSize: nodeSize, innerNodeSize: innerNodeSize,
                                                           compress: compress, reducer: Int64SumReducer()))
        }
    }

    func run(seed: UInt64, config: BTreeConfiguration) throws {
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
        let initial = [0, 1, 30, 800].randomElement(using: &rng)!
        if initial > 0 {
            let actions = (0..<initial).map { BTreeAction.put(BTreeModelTests.key($0), value(&rng)) }
            for (n, a) in actions.enumerated() { model[n] = Row(key: a.key, value: a.value!) }
            tree = try tree.forWriter.modified(by: actions)
        }
        var next = initial
        for round in 1...6 {
            let context = "seed \(seed) round \(round) nodeSize \(config.nodeSize)"
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
