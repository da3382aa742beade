import Testing

@testable import SofaStorage

/// Model-based randomized tests: batches of puts and removes against a plain sorted model, checked after
/// every commit (scans both ways, random ranges, counts, reductions, grouped reductions, skips, lookups),
/// with the file reopened every few batches and `verify()` run throughout.
@Suite struct BTreeModelTests {
    /// A row of the model.
    struct Row: Equatable {
        var key: [UInt8]
        var value: [UInt8]
    }

    static func key(_ n: Int) -> [UInt8] { numericKey(n) + Array(repeating: UInt8(n % 251), count: n % 7) }

    static func sumOf(_ rows: some Collection<Row>) -> Int64 {
        rows.reduce(0) { $0 &+ (Int64SumReducer.decode($1.value) ?? 0) }
    }

    /// Inner nodes smaller than leaves (as the document file's) make deeper trees, whose small batches copy
    /// most inner entries unchanged from the nodes they rewrite.
    @Test(arguments: [(nodeSize: 256, innerNodeSize: 256, compress: true),
                      (nodeSize: 1024, innerNodeSize: 1024, compress: false),
                      (nodeSize: 4096, innerNodeSize: 4096, compress: true),
                      (nodeSize: 1024, innerNodeSize: 200, compress: true)])
    func randomBatchesAgainstModel(nodeSize: Int, innerNodeSize: Int, compress: Bool) throws {
        for seed in SeededGenerator.seeds(fixed: [1, 2]) {
            try run(seed: seed, nodeSize: nodeSize, innerNodeSize: innerNodeSize, compress: compress,
                    operations: 12_000)
        }
    }

    func run(seed: UInt64, nodeSize: Int, innerNodeSize: Int, compress: Bool, operations: Int) throws {
        var rng = SeededGenerator(seed: seed)
        let dir = TemporaryDirectory()
        let path = dir.file("tree")
        let config = BTreeConfiguration(nodeSize: nodeSize, innerNodeSize: innerNodeSize, compress: compress,
                                        reducer: Int64SumReducer())
        var file = try StorageFile(path: path, options: StorageOptions(durability: .none))
        var tree = BTree(file: file, commit: file.latestCommit, index: 0, configuration: config)
        var model: [Int: Row] = [:]
        let keySpace = 6000
        var done = 0
        var batch = 0
        while done < operations {
            // A batch: sorted, unique keys; puts (new or replacing) and removes (present or absent).
            let size = [1, 5, 50, 400, 1500].randomElement(using: &rng)!
            var byKey: [Int: BTreeAction] = [:]
            for _ in 0..<size {
                let n = Int.random(in: 0..<keySpace, using: &rng)
                if Int.random(in: 0..<100, using: &rng) < 30 {
                    byKey[n] = .remove(Self.key(n))
                } else {
                    let big = Int.random(in: 0..<200, using: &rng) == 0
                    let value = big ? [UInt8](repeating: 7, count: nodeSize + 100)
                                    : int64Value(Int64.random(in: -1000...1000, using: &rng))
                    byKey[n] = .put(Self.key(n), value)
                }
            }
            let actions = byKey.keys.sorted().map { byKey[$0]! }
            tree = try tree.modified(by: actions)
            for n in byKey.keys {
                if let v = byKey[n]!.value { model[n] = Row(key: Self.key(n), value: v) } else { model[n] = nil }
            }
            try file.commit(roots: [tree.root], metadata: [])
            done += size
            batch += 1
            if batch % 7 == 0 {
                try file.close()
                file = try StorageFile(path: path, options: StorageOptions(durability: .none))
            }
            tree = BTree(file: file, commit: file.latestCommit, index: 0, configuration: config)
            let sorted = model.keys.sorted().map { model[$0]! }
            try check(tree, against: sorted, rng: &rng, context: "seed \(seed) batch \(batch) nodeSize \(nodeSize)")
        }
        expectSound(tree, "seed \(seed)")
    }

    func check(_ tree: BTree, against rows: [Row], rng: inout SeededGenerator, context: String) throws {
        #expect(tree.rowCount == UInt64(rows.count), "\(context): rowCount")
        let forward = try tree.rows().map { Row(key: $0.key, value: $0.value) }
        #expect(forward == rows, "\(context): full ascending scan")
        let backward = try tree.rows(descending: true).map { Row(key: $0.key, value: $0.value) }
        #expect(backward == rows.reversed(), "\(context): full descending scan")
        #expect(Int64SumReducer.decode(tree.reduction ?? []) ?? 0 == (rows.isEmpty ? 0 : Self.sumOf(rows)),
                "\(context): whole-tree reduction")
        // A thread's reader, kept across this check's reads: the same answers through its memo.
        let reader = BTreeReader(tree)
        for _ in 0..<6 {
            let a = Int.random(in: -1...6001, using: &rng), b = Int.random(in: -1...6001, using: &rng)
            let lo = KeyBound(numericKey(max(0, min(a, b))), inclusive: Bool.random(using: &rng))
            let hi = KeyBound(Self.key(max(0, max(a, b))), inclusive: Bool.random(using: &rng))
            let range = KeyRange(lower: a < 0 ? nil : lo, upper: b > 6000 ? nil : hi)
            let expected = rows.filter { r in r.key.withUnsafeBytes { range.contains($0) } }
            let descending = Bool.random(using: &rng)
            let got = try tree.rows(in: range, descending: descending).map { Row(key: $0.key, value: $0.value) }
            #expect(got == (descending ? expected.reversed() : expected), "\(context): range scan \(range)")
            #expect(try tree.count(in: range) == UInt64(expected.count), "\(context): count \(range)")
            let reduced = try tree.reduce(in: range)
            #expect(reduced.rowCount == UInt64(expected.count), "\(context): reduce count")
            if !expected.isEmpty {
                #expect(Int64SumReducer.decode(reduced.value) == Self.sumOf(expected), "\(context): reduce sum")
            }
            // The reduce that also finds the range's first row (on its lower edge, or by one more descent).
            let (withFirst, first) = try tree.reduceAndFirstEntry(in: range)
            #expect(withFirst == reduced, "\(context): reduce with first row")
            let firstRow = first.map { slice in
                let (node, i) = slice.entry!
                return Row(key: Array(node.key(i)), value: slice.withUnsafeBytes { Array($0) })
            }
            #expect(firstRow == expected.first, "\(context): first row \(range)")
            let (readerReduction, readerFirst) = try reader.reduceAndFirstEntry(in: range)
            #expect(readerReduction == reduced, "\(context): reader's reduce with first row")
            #expect(readerFirst?.withUnsafeBytes { Array($0) } == expected.first?.value,
                    "\(context): reader's first row \(range)")
            let skip = UInt64.random(in: 0...UInt64(expected.count + 2), using: &rng)
            var skipped: [Row] = []
            try tree.forEach(in: range, descending: descending, skip: skip) { k, v in
                skipped.append(Row(key: Array(k), value: Array(v)))
                return skipped.count < 25
            }
            let all = descending ? Array(expected.reversed()) : expected
            #expect(skipped == Array(all.dropFirst(Int(skip)).prefix(25)), "\(context): skip \(skip)")
            // Groups: rows sharing their first 3 key bytes (n / 256).
            var groups: [(first: [UInt8], count: UInt64, sum: Int64)] = []
            try tree.reduceGroups(in: range, groupPrefix: { _ in 3 }) { g in
                groups.append((g.firstKey, g.reduction.rowCount, Int64SumReducer.decode(g.reduction.value) ?? 0))
                return true
            }
            var expectedGroups: [(first: [UInt8], count: UInt64, sum: Int64)] = []
            for r in expected {
                if let last = expectedGroups.last, last.first.prefix(3) == r.key.prefix(3) {
                    expectedGroups[expectedGroups.count - 1].count += 1
                    expectedGroups[expectedGroups.count - 1].sum &+= Int64SumReducer.decode(r.value) ?? 0
                } else {
                    expectedGroups.append((r.key, 1, Int64SumReducer.decode(r.value) ?? 0))
                }
            }
            #expect(groups.map(\.first) == expectedGroups.map(\.first), "\(context): group keys")
            #expect(groups.map(\.count) == expectedGroups.map(\.count), "\(context): group counts")
            #expect(groups.map(\.sum) == expectedGroups.map(\.sum), "\(context): group sums")
        }
        for _ in 0..<10 {
            let n = Int.random(in: 0..<6000, using: &rng)
            let want = rows.first { $0.key == Self.key(n) }?.value
            #expect(try tree.get(Self.key(n)) == want, "\(context): get \(n)")
            let cachingLeaf = Bool.random(using: &rng)
            #expect(try Self.key(n).withUnsafeBytes { try reader.get($0, cachingLeaf: cachingLeaf) } == want,
                    "\(context): reader's get \(n)")
        }
    }

    /// `reduceAndFirstEntry` on the ranges whose first row the reduce does not read on its lower edge — no
    /// lower bound, the whole tree, an exclusive lower bound equal to a leaf's last key (the range starts with
    /// the next leaf, a whole subtree) — and on ordinary ones: the reduction is `reduce(in:)`'s and the first
    /// row `rows(in:)`'s first.
    @Test func reduceAndFirstEntryOnSubtreeBoundaries() throws {
        let dir = TemporaryDirectory()
        let config = BTreeConfiguration(nodeSize: 256, innerNodeSize: 256, compress: false,
                                        reducer: Int64SumReducer())
        let file = try StorageFile(path: dir.file("tree"), options: StorageOptions(durability: .none))
        let empty = BTree(file: file, root: nil, configuration: config, limit: StorageFile.unlimited)
        let tree = try empty.modified(by: (0..<2000).map { .put(numericKey($0), int64Value(Int64($0))) })
        try file.commit(roots: [tree.root], metadata: [])
        let committed = BTree(file: file, commit: file.latestCommit, index: 0, configuration: config)
        var leafLastKeys: [[UInt8]] = []
        try committed.forEachSpan { leaf, _ in leafLastKeys.append(Array(leaf.key(leaf.count - 1))); return true }
        #expect(leafLastKeys.count > 20)
        var ranges: [KeyRange] = [.all, KeyRange(upper: KeyBound(numericKey(1500))),
                                  KeyRange(upper: KeyBound(numericKey(0), inclusive: false))]
        for key in leafLastKeys.dropLast().prefix(8) {
            ranges.append(KeyRange(lower: KeyBound(key, inclusive: false)))
            ranges.append(KeyRange(lower: KeyBound(key, inclusive: false), upper: KeyBound(numericKey(1999))))
            ranges.append(KeyRange(lower: KeyBound(key)))
        }
        for range in ranges {
            let (reduction, first) = try committed.reduceAndFirstEntry(in: range)
            #expect(reduction == (try committed.reduce(in: range)), "\(range): reduction")
            let firstRow = first.map { slice in
                let (node, i) = slice.entry!
                return Row(key: Array(node.key(i)), value: slice.withUnsafeBytes { Array($0) })
            }
            let expected = try committed.rows(in: range).first.map { Row(key: $0.key, value: $0.value) }
            #expect(firstRow == expected, "\(range): first row")
        }
        try file.close()
    }
}
