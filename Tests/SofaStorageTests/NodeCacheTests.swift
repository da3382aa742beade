import Testing

@testable import SofaStorage

/// The node cache against a dictionary model: random inserts, lookups and purges with a budget small enough
/// to force constant eviction. A node the cache returns must be the one inserted at that offset; nothing
/// purged may come back; the byte budget holds.
@Suite struct NodeCacheTests {
    /// A one-entry leaf whose key is `offset`'s two low bytes, so a node returned for the wrong offset shows.
    static func leaf(_ offset: UInt64) throws -> Node {
        let a = UInt8(truncatingIfNeeded: offset >> 8), b = UInt8(truncatingIfNeeded: offset)
        let bytes: [UInt8] = [1, 2, a, b, 1, b]
        let memory = UnsafeMutableRawPointer.allocate(byteCount: bytes.count, alignment: 8)
        bytes.withUnsafeBytes { memory.copyMemory(from: $0.baseAddress!, byteCount: bytes.count) }
        let payload = ChunkPayload(taking: memory, count: bytes.count, offset: offset, kind: .leaf,
                                   fileLength: bytes.count + 16)
        return try Node(payload: payload, isLeaf: true, path: "test")
    }

    @Test func behavesLikeABoundedMap() throws {
        for seed in SeededGenerator.seeds(fixed: [7]) {
            var rng = SeededGenerator(seed: seed)
            let sample = try Self.leaf(1)
            let cache = NodeCache(capacityBytes: sample.memoryCost * 200)
            var inserted: Set<UInt64> = []  // offsets inserted and not purged
            for step in 0..<10_000 {
                let offset = UInt64.random(in: 1...600, using: &rng)
                switch Int.random(in: 0..<100, using: &rng) {
                case 0..<45:
                    if !inserted.contains(offset) {
                        cache.insert(try Self.leaf(offset), at: offset)
                        inserted.insert(offset)
                    }
                case 45..<99:
                    if let node = cache.node(at: offset) {
                        #expect(inserted.contains(offset), "seed \(seed) step \(step): \(offset) was never inserted")
                        #expect(Array(node.key(0)) == [UInt8(offset >> 8), UInt8(truncatingIfNeeded: offset)],
                                "seed \(seed) step \(step): the node of another offset")
                    }
                default:
                    let cut = UInt64.random(in: 1...600, using: &rng)
                    cache.removeAll(atOrAbove: cut)
                    inserted = inserted.filter { $0 < cut }
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
