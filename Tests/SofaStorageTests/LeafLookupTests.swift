import Testing

@testable import SofaStorage

/// `LeafLookup` finds a key in a leaf's payload without decoding a `Node`; the incremental view update's
/// scattered lookups (`BTree.value(for:cachingLeaf: false)`) take that path for leaves not in the cache. It must
/// answer as the decoded node does on every leaf, and give corruption errors, never crashes, on damaged ones.
@Suite struct LeafLookupTests {
    /// An owned payload holding `bytes`, as a leaf chunk at offset 64.
    static func payload(_ bytes: [UInt8]) -> ChunkPayload {
        let memory = UnsafeMutableRawPointer.allocate(byteCount: max(1, bytes.count), alignment: 8)
        bytes.withUnsafeBytes { if !$0.isEmpty { memory.copyMemory(from: $0.baseAddress!, byteCount: $0.count) } }
        return ChunkPayload(taking: memory, count: bytes.count, offset: 64, kind: .leaf, fileLength: bytes.count + 16)
    }

    /// A leaf payload holding `rows` (keys sorted, distinct).
    static func leafBytes(_ rows: [(key: [UInt8], value: [UInt8])]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.appendVarint(UInt64(rows.count))
        for row in rows {
            bytes.appendVarint(UInt64(row.key.count))
            bytes.append(contentsOf: row.key)
            bytes.appendVarint(UInt64(row.value.count))
            bytes.append(contentsOf: row.value)
        }
        return bytes
    }

    /// The decoded node's answer for `key`.
    static func nodeAnswer(_ node: Node, _ key: [UInt8]) -> [UInt8]? {
        key.withUnsafeBytes { k in
            let i = node.lowerBound(k)
            guard i < node.count, compareBytes(node.key(i), k) == 0 else { return nil }
            return Array(node.value(i))
        }
    }

    static func lookup(_ payload: ChunkPayload, _ key: [UInt8]) throws -> [UInt8]? {
        try key.withUnsafeBytes { try LeafLookup.value(for: $0, inLeaf: payload, path: "test").map { Array($0) } }
    }

    /// Keys sorted as a leaf holds them (``compareBytes(_:_:)``).
    /// 1–20 rows of a small leaf in key order: keys of 0–4 bytes from a four-letter alphabet (so that lookups
    /// often miss between them), values of 0–140 bytes.
    static func randomRows(using rng: inout SeededGenerator) -> [(key: [UInt8], value: [UInt8])] {
        let keys = Set((0..<Int.random(in: 1...20, using: &rng)).map { _ in
            (0..<Int.random(in: 0...4, using: &rng)).map { _ in UInt8.random(in: 0...3, using: &rng) }
        })
        return inByteOrder(keys).map { key in
            (key, [UInt8](repeating: 9, count: Int.random(in: 0...140, using: &rng)))
        }
    }

    static func inByteOrder(_ keys: Set<[UInt8]>) -> [[UInt8]] {
        keys.sorted { a, b in a.withUnsafeBytes { x in b.withUnsafeBytes { compareBytes(x, $0) } } < 0 }
    }

    /// 0 or more bytes (a count drawn from `count`), each drawn from `alphabet`.
    static func randomBytes(_ count: ClosedRange<Int>, from alphabet: [UInt8],
                            using rng: inout SeededGenerator) -> [UInt8] {
        (0..<Int.random(in: count, using: &rng)).map { _ in alphabet.randomElement(using: &rng)! }
    }

    @Test func answersAsTheDecodedLeafDoes() throws {
        for seed in SeededGenerator.seeds(fixed: [5]) {
            var rng = SeededGenerator(seed: seed)
            for round in 0..<300 {
                func randomKey() -> [UInt8] { Self.randomBytes(0...6, from: [0, 1, 2, 0x80, 0xFF], using: &rng) }
                var keys = Set<[UInt8]>()
                for _ in 0..<Int.random(in: 1...80, using: &rng) { keys.insert(randomKey()) }
                let sorted = Self.inByteOrder(keys)
                // Values of 0–200 bytes, so that some lengths take two varint bytes.
                let rows = sorted.map { key in
                    (key: key, value: Self.randomBytes(0...200, from: Array(0...255), using: &rng))
                }
                let payload = Self.payload(Self.leafBytes(rows))
                let node = try Node(payload: payload, isLeaf: true, path: "test")
                for probe in sorted + (0..<30).map({ _ in randomKey() }) {
                    #expect(try Self.lookup(payload, probe) == Self.nodeAnswer(node, probe),
                            "seed \(seed) round \(round): \(probe) in \(sorted)")
                }
            }
        }
    }

    /// A leaf read to its end (every key smaller than the one sought) must end after its last entry, as a
    /// decoded node must: a trailing byte is corruption, not a miss.
    @Test func trailingBytesAfterTheLastEntryAreCorruption() throws {
        let rows: [(key: [UInt8], value: [UInt8])] = [([1], [10]), ([2], [20])]
        let clean = Self.payload(Self.leafBytes(rows))
        #expect(try Self.lookup(clean, [3]) == nil)
        let damaged = Self.payload(Self.leafBytes(rows) + [0])
        #expect(throws: SofaError.self) { try Self.lookup(damaged, [3]) }
        #expect(try Self.lookup(damaged, [2]) == [20], "an entry found before the damage is still answered")
    }

    @Test func wordWiseOrderIsByteOrder() {
        for seed in SeededGenerator.seeds(fixed: [4]) {
            var rng = SeededGenerator(seed: seed)
            for _ in 0..<20000 {
                // Long shared prefixes, so that words compare equal before one differs.
                let shared = (0..<Int.random(in: 0...20, using: &rng)).map { _ in UInt8.random(in: 0...2, using: &rng) }
                let a = shared + Self.randomBytes(0...12, from: [0, 1, 0x7F, 0x80, 0xFF], using: &rng)
                let b = shared + Self.randomBytes(0...12, from: [0, 1, 0x7F, 0x80, 0xFF], using: &rng)
                let expected = a.withUnsafeBytes { x in b.withUnsafeBytes { compareBytes(x, $0) } }.signum()
                let got = a.withUnsafeBytes { x in b.withUnsafeBytes { LeafLookup.order(x, $0) } }.signum()
                #expect(got == expected, "seed \(seed): \(a) vs \(b)")
            }
        }
    }

    @Test func damagedLeavesGiveCorruptionErrors() throws {
        for seed in SeededGenerator.seeds(fixed: [6]) {
            var rng = SeededGenerator(seed: seed)
            for round in 0..<2000 {
                let rows = Self.randomRows(using: &rng)
                let sorted = rows.map(\.key)
                var bytes = Self.leafBytes(rows)
                // Cut short, or with bytes overwritten (length prefixes become huge, zero or wrong).
                if Bool.random(using: &rng) {
                    bytes.removeLast(Int.random(in: 1...bytes.count, using: &rng))
                } else {
                    for _ in 0..<Int.random(in: 1...3, using: &rng) {
                        let at = Int.random(in: 0..<bytes.count, using: &rng)
                        bytes[at] = [0, 0x7F, 0x80, 0xFF].randomElement(using: &rng)!
                    }
                }
                let payload = Self.payload(bytes)
                let node = try? Node(payload: payload, isLeaf: true, path: "test")
                // A damaged key can leave a leaf that decodes but is out of order (which only `verify` checks);
                // a binary and a linear search may then disagree, so answers are compared on ordered leaves.
                let ordered = node.map { n in (1..<n.count).allSatisfy { compareBytes(n.key($0 - 1), n.key($0)) < 0 } }
                for probe in sorted + [[], [3, 3, 3, 3, 3]] {
                    do {
                        let found = try Self.lookup(payload, probe)
                        // Where the whole leaf decodes, the answers agree; otherwise the damage lay past the answer.
                        if let node, ordered == true {
                            #expect(found == Self.nodeAnswer(node, probe), "seed \(seed) round \(round)")
                        }
                    } catch let error as SofaError {
                        #expect(error.code == .corruption, "seed \(seed) round \(round): \(error)")
                        #expect(node == nil, "seed \(seed) round \(round): the lookup failed where the node decodes")
                    }
                }
            }
        }
    }

    /// Through the tree, leaves raw or LZ4-compressed: `value(for:cachingLeaf: false)` on a file whose cache holds
    /// no leaf answers as `get`, and leaves no leaf in the cache (it searched their payloads, decoding nothing).
    @Test(arguments: [false, true])
    func treeLookupsWithoutCachingAnswerAsCachedOnes(compress: Bool) throws {
        let dir = TemporaryDirectory()
        let path = dir.file("tree")
        let config = BTreeConfiguration(nodeSize: 512, compress: compress, reducer: Int64SumReducer())
        let file = try StorageFile(path: path, options: StorageOptions(durability: .none))
        let rows = (0..<3000).filter { $0 % 3 != 0 }.map { BTreeAction.put(numericKey($0), int64Value(Int64($0))) }
        let tree = try BTree(file: file, commit: file.latestCommit, index: 0, configuration: config).modified(by: rows)
        try file.commit(roots: [tree.root], metadata: [])
        let reader = BTree(file: file, commit: file.latestCommit, index: 0, configuration: config)
        file.nodeCache.removeAll()
        for n in 0..<3001 {
            let key = numericKey(n)
            let uncached = try key.withUnsafeBytes { k in
                try reader.value(for: k, cachingLeaf: false).map { $0.withUnsafeBytes { Array($0) } }
            }
            #expect(uncached == (n % 3 != 0 ? int64Value(Int64(n)) : nil), "key \(n)")
        }
        let cachedByLookups = file.nodeCache.statistics.nodes
        // A full scan caches every leaf; the same answers then come from the cached nodes.
        var leaves = 0
        try reader.forEachSpan { _, _ in leaves += 1; return true }
        #expect(leaves > 10)
        #expect(file.nodeCache.statistics.nodes == cachedByLookups + leaves, "the lookups cached inner nodes only")
        for n in 0..<3001 {
            #expect(try reader.get(numericKey(n), cachingLeaf: false) == reader.get(numericKey(n)), "key \(n)")
        }
        expectSound(reader, "compress \(compress)")
        try file.close()
    }
}
