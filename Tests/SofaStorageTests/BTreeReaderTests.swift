import Testing

@testable import SofaStorage

/// `BTreeReader`, one thread's reader with a memo of the nodes its reads descend through and a buffer for the
/// leaves it reads without caching them, must answer as the plain `BTree` reads do — in any order of reads,
/// across memo evictions, on trees of several depths — and give the same corruption errors on damaged nodes.
@Suite struct BTreeReaderTests {
    static func key(_ n: Int) -> [UInt8] { numericKey(n) + Array(repeating: UInt8(n % 251), count: n % 5) }

    /// A committed tree of `count` rows (even numbers only, so odd ones are absent keys) with small nodes, so
    /// that it is several levels deep with many nodes per level; and its file.
    static func makeTree(_ dir: TemporaryDirectory, count: Int, compress: Bool, rng: inout SeededGenerator)
        throws -> (StorageFile, BTree)
    {
        let path = dir.file("tree")
        let config = BTreeConfiguration(nodeSize: 512, innerNodeSize: 200, compress: compress,
                                        reducer: Int64SumReducer())
        var file = try StorageFile(path: path, options: StorageOptions(durability: .none))
        var tree = BTree(file: file, commit: file.latestCommit, index: 0, configuration: config)
        let actions = (0..<count).map { n -> BTreeAction in
            // Values of several sizes: some compress well, some not at all.
            let filler = (0..<Int.random(in: 0...40, using: &rng)).map { _ in UInt8.random(in: 0...3, using: &rng) }
            return .put(key(2 * n), int64Value(Int64(n % 1000)) + filler)
        }
        tree = try tree.modified(by: actions)
        try file.commit(roots: [tree.root], metadata: [])
        try file.close()
        // Reopened: an empty node cache, so reads go to the file.
        file = try StorageFile(path: path, options: StorageOptions(durability: .none))
        return (file, BTree(file: file, commit: file.latestCommit, index: 0, configuration: config))
    }

    @Test(arguments: [(true, BTreeReader.defaultMemoBudget), (false, BTreeReader.defaultMemoBudget), (true, 16 << 10)])
    func answersAsTheTreeDoes(compress: Bool, memoBudget: Int) throws {
        for seed in SeededGenerator.seeds(fixed: [3]) {
            var rng = SeededGenerator(seed: seed)
            let dir = TemporaryDirectory()
            let count = 6000
            let (file, tree) = try Self.makeTree(dir, count: count, compress: compress, rng: &rng)
            defer { try? file.close() }
            var depth = 0
            try tree.forEachNode { depth = max(depth, $0.level) }
            #expect(depth >= 4, "seed \(seed): a tree deep enough to exercise the memo's levels (\(depth))")
            let reader = BTreeReader(tree, memoBudget: memoBudget)
            // Scattered lookups (a mapping chunk's), then sorted ones; present and absent keys, leaves cached or not.
            var probes = (0..<3000).map { _ in Int.random(in: -2...(2 * count + 2), using: &rng) }
            probes += probes.sorted()
            for n in probes {
                let key = n < 0 ? [] : Self.key(n)
                let cachingLeaf = Bool.random(using: &rng)
                let got = try key.withUnsafeBytes { try reader.get($0, cachingLeaf: cachingLeaf) }
                #expect(got == (try tree.get(key)), "seed \(seed): get \(n), cachingLeaf \(cachingLeaf)")
            }
            #expect(reader.memoHits > reader.memoMisses, "seed \(seed): the memo serves the upper levels")
            // Sorted range reduces (a recompute chunk's groups), narrow and wide.
            var low = 0
            while low < 2 * count {
                let high = low + Int.random(in: 0...(Bool.random(using: &rng) ? 10 : 2000), using: &rng)
                let range = KeyRange(lower: KeyBound(Self.key(low), inclusive: Bool.random(using: &rng)),
                                     upper: KeyBound(Self.key(high), inclusive: Bool.random(using: &rng)))
                let (reduction, first) = try reader.reduceAndFirstEntry(in: range)
                let (expected, expectedFirst) = try tree.reduceAndFirstEntry(in: range)
                #expect(reduction == expected, "seed \(seed): reduce \(low)...\(high)")
                #expect(first?.withUnsafeBytes { Array($0) } == expectedFirst?.withUnsafeBytes { Array($0) },
                        "seed \(seed): first row \(low)...\(high)")
                low = high + Int.random(in: 1...50, using: &rng)
            }
            #expect(reader.memoBytes > 0 && reader.memoBytes <= memoBudget,
                    "seed \(seed): the memo within its budget (\(reader.memoBytes) bytes)")
            if memoBudget < BTreeReader.defaultMemoBudget {
                #expect(reader.memoBytes >= memoBudget * 3 / 4, "seed \(seed): the small budget filled")
            }
        }
    }

    /// On a cold node cache, a lookup that does not cache its leaf reads each inner node of its path once,
    /// through the tree (decoded and cached), and only the leaf in place: an inner node is told apart by its
    /// chunk's kind byte before being checked or decompressed into the reader's buffer. A second lookup in the
    /// same leaf reads nothing from the file (the inner nodes from the memo, the leaf's bytes again from the buffer).
    @Test(arguments: [true, false])
    func innerNodesAreReadOnce(compress: Bool) throws {
        var rng = SeededGenerator(seed: 5)
        let dir = TemporaryDirectory()
        let (file, tree) = try Self.makeTree(dir, count: 3000, compress: compress, rng: &rng)
        defer { try? file.close() }
        var levels = 0  // nodes on a root-to-leaf path
        try tree.forEachNode { levels = max(levels, $0.level) }
        #expect(levels >= 3)
        let key = Self.key(2 * 1500), next = Self.key(2 * 1500 + 2)
        let expected = (try tree.get(key), try tree.get(next))
        file.nodeCache.removeAll()  // (the reads above cached the nodes)
        let reader = BTreeReader(tree)
        let before = file.nodeCache.statistics
        #expect(before.nodes == 0, "a cold cache")
        let got = try key.withUnsafeBytes { try reader.get($0, cachingLeaf: false) }
        let after = file.nodeCache.statistics
        #expect(got == expected.0)
        #expect(after.misses - before.misses == levels, "each node of the path missed the cache once")
        #expect(after.nodes == levels - 1, "the inner nodes cached, the leaf not")
        #expect(reader.leavesReadInPlace == 1, "only the leaf was read in place")
        #expect(reader.memoMisses == levels - 1)
        #expect(reader.memoHits == 0)
        // The same leaf again: nothing read.
        let again = try next.withUnsafeBytes { try reader.get($0, cachingLeaf: false) }
        #expect(again == expected.1)
        #expect(file.nodeCache.statistics.misses == after.misses + 1,
                "the leaf's cache probe only: the inner nodes come from the memo")
        #expect(reader.leavesReadInPlace == 1, "the leaf's bytes reused")
        #expect(reader.memoHits == levels - 1)
    }

    /// Once the file is closed, a reader that would read a chunk from the mapping it holds throws as the plain
    /// reads do ("the file is closed"), rather than reading on.
    @Test func readsFailOnceTheFileIsClosed() throws {
        var rng = SeededGenerator(seed: 7)
        let dir = TemporaryDirectory()
        let (file, tree) = try Self.makeTree(dir, count: 3000, compress: true, rng: &rng)
        let reader = BTreeReader(tree)
        // Every inner node into the memo, so that the read below goes to the file only for its leaf.
        for n in stride(from: 0, to: 6000, by: 20) {
            _ = try Self.key(n).withUnsafeBytes { try reader.get($0, cachingLeaf: false) }
        }
        let misses = reader.memoMisses
        try file.close()
        let far = Self.key(2 * 2900)
        #expect {
            try far.withUnsafeBytes { try reader.get($0, cachingLeaf: false) }
        } throws: { error in
            (error as? SofaError)?.code == .invalidArgument && "\(error)".contains("closed")
        }
        #expect(reader.memoMisses == misses, "the inner nodes came from the memo: the leaf's read threw")
    }

    /// The chunk of the leaf holding `key` in `tree`: its offset and stored length (prefix included).
    static func leafChunk(_ tree: BTree, holding key: [UInt8]) throws -> (offset: UInt64, length: Int) {
        var found: (UInt64, Int)?
        try tree.forEachNode { node in
            let k = key.withUnsafeBytes { k in
                node.firstKey.withUnsafeBytes { compareBytes($0, k) <= 0 }
                    && node.lastKey.withUnsafeBytes { compareBytes($0, k) >= 0 }
            }
            if node.isLeaf && k { found = (node.offset, node.storedBytes) }
        }
        return try #require(found)
    }

    /// A reader reading a damaged leaf from the file (not cached) throws `.corruption`, never crashes or
    /// answers: a flipped payload byte fails the CRC (leaves stored compressed or not); a compressed chunk whose
    /// declared raw length is wrong but whose CRC was recomputed (so only decompression can tell) fails to
    /// decompress to it.
    @Test func damagedLeavesAreCorruption() throws {
        var rng = SeededGenerator(seed: 11)
        for (damage, compress) in [("payload byte", true), ("raw length", true), ("payload byte", false)] {
            let dir = TemporaryDirectory()
            let (file, tree) = try Self.makeTree(dir, count: 3000, compress: compress, rng: &rng)
            let key = Self.key(2 * 1234)
            let (offset, length) = try Self.leafChunk(tree, holding: key)
            try file.close()
            var bytes = readFile(dir.file("tree"))
            let start = Int(offset)
            #expect(bytes[start + 13] & 1 == (compress ? 1 : 0), "the leaf is stored compressed: \(compress)")
            if damage == "payload byte" {
                bytes[start + length - 3] ^= 0x40
            } else {
                let raw = UInt32(bytes[start + 8]) | UInt32(bytes[start + 9]) << 8
                    | UInt32(bytes[start + 10]) << 16 | UInt32(bytes[start + 11]) << 24
                let wrong = raw + 7
                for i in 0..<4 { bytes[start + 8 + i] = UInt8(truncatingIfNeeded: wrong >> (8 * i)) }
                let crc = CRC32C.checksum(Array(bytes[(start + 4)..<(start + length)]))
                for i in 0..<4 { bytes[start + i] = UInt8(truncatingIfNeeded: crc >> (8 * i)) }
            }
            writeFile(dir.file("tree"), bytes)
            let damaged = try StorageFile(path: dir.file("tree"), options: StorageOptions(durability: .none))
            defer { try? damaged.close() }
            let reopened = BTree(file: damaged, commit: damaged.latestCommit, index: 0,
                                 configuration: tree.configuration)
            for cachingLeaf in [false, true] {
                let reader = BTreeReader(reopened)
                // A lookup elsewhere first, so the upper levels are in the memo.
                _ = try Self.key(2).withUnsafeBytes { try reader.get($0, cachingLeaf: cachingLeaf) }
                #expect {
                    try key.withUnsafeBytes { try reader.get($0, cachingLeaf: cachingLeaf) }
                } throws: { error in
                    (error as? SofaError)?.code == .corruption && (error as? SofaError)?.offset == start
                }
                #expect("\(damage), compressed \(compress): the reduce over the damaged leaf") {
                    try reader.reduceAndFirstEntry(in: KeyRange(lower: KeyBound(key, inclusive: true),
                                                                upper: KeyBound(Self.key(2 * 1240), inclusive: true)))
                } throws: { error in
                    (error as? SofaError)?.code == .corruption && (error as? SofaError)?.offset == start
                }
            }
        }
    }
}
