import Testing

@testable import SofaStorage

/// The node cache against a dictionary model: random inserts, lookups and purges with a budget small enough
/// to force constant eviction. A node the cache returns must be the one inserted at that offset; nothing
/// purged may come back; the byte budget holds.
@Suite struct NodeCacheTests {
    static func leaf(_ tag: UInt8) throws -> Node {
        let bytes: [UInt8] = [1, 1, tag, 1, tag]  // one entry: key [tag], value [tag]
        let memory = UnsafeMutableRawPointer.allocate(byteCount: bytes.count, alignment: 8)
        bytes.withUnsafeBytes { memory.copyMemory(from: $0.baseAddress!, byteCount: bytes.count) }
        let payload = ChunkPayload(taking: memory, count: bytes.count, offset: UInt64(tag), kind: .leaf,
                                   fileLength: bytes.count + 16)
        return try Node(payload: payload, isLeaf: true, path: "test")
    }

    @Test func behavesLikeABoundedMap() throws {
        for seed in SeededGenerator.seeds(fixed: [7]) {
            var rng = SeededGenerator(seed: seed)
            let sample = try Self.leaf(1)
            let cache = NodeCache(capacityBytes: sample.memoryCost * 200)
            var inserted: [UInt64: UInt8] = [:]  // offsets ever inserted and not purged, with their tag
            for step in 0..<10_000 {
                let offset = UInt64.random(in: 1...600, using: &rng)
                switch Int.random(in: 0..<100, using: &rng) {
                case 0..<45:
                    let tag = UInt8(truncatingIfNeeded: offset)
                    if inserted[offset] == nil {
                        cache.insert(try Self.leaf(tag), at: offset)
                        inserted[offset] = tag
                    }
                case 45..<99:
                    if let node = cache.node(at: offset) {
                        #expect(inserted[offset] != nil, "seed \(seed) step \(step): \(offset) was never inserted")
                        #expect(Array(node.key(0)) == [inserted[offset] ?? 0], "seed \(seed) step \(step)")
                    }
                default:
                    let cut = UInt64.random(in: 1...600, using: &rng)
                    cache.removeAll(atOrAbove: cut)
                    inserted = inserted.filter { $0.key < cut }
                    for probe in stride(from: cut, through: min(600, cut + 20), by: 1) {
                        #expect(cache.node(at: probe) == nil, "seed \(seed) step \(step): \(probe) survived a purge")
                    }
                }
                let stats = cache.statistics
                #expect(stats.bytes <= cache.capacityBytes, "seed \(seed) step \(step): over budget")
            }
            #expect(cache.statistics.hits > 500, "seed \(seed): \(cache.statistics)")
            cache.removeAll()
            #expect(cache.statistics.nodes == 0 && cache.statistics.bytes == 0)
        }
    }
}
