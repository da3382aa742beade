import Testing

@testable import SofaStorage

/// `Node.lowerBound` compares the 4 key bytes after the node's shared prefix before whole keys: it must find
/// what a plain binary search over `compareBytes` finds, for keys that share long prefixes, end inside or
/// right after it, contain zero bytes (which equal the padding), and for searched keys outside the prefix.
@Suite struct NodeSearchTests {
    /// A leaf holding `keys` (sorted, distinct), each with a one-byte value.
    static func leaf(_ keys: [[UInt8]]) throws -> Node {
        var bytes: [UInt8] = []
        bytes.appendVarint(UInt64(keys.count))
        for key in keys {
            bytes.appendVarint(UInt64(key.count))
            bytes.append(contentsOf: key)
            bytes.append(contentsOf: [1, 7])
        }
        let memory = UnsafeMutableRawPointer.allocate(byteCount: bytes.count, alignment: 8)
        bytes.withUnsafeBytes { memory.copyMemory(from: $0.baseAddress!, byteCount: bytes.count) }
        let payload = ChunkPayload(taking: memory, count: bytes.count, offset: 64, kind: .leaf,
                                   fileLength: bytes.count + 16)
        return try Node(payload: payload, isLeaf: true, path: "test")
    }

    @Test func findsWhatAPlainBinarySearchFinds() throws {
        for seed in SeededGenerator.seeds(fixed: [11]) {
            var rng = SeededGenerator(seed: seed)
            for round in 0..<400 {
                // Keys over a small alphabet with zeros, under a shared prefix of 0–6 bytes, 0–7 bytes after it.
                let prefix = (0..<Int.random(in: 0...6, using: &rng)).map { _ in UInt8.random(in: 0...2, using: &rng) }
                func randomKey() -> [UInt8] {
                    prefix + (0..<Int.random(in: 0...7, using: &rng)).map { _ in
                        [0, 1, 2, 0xFF].randomElement(using: &rng)!
                    }
                }
                var keys = Set<[UInt8]>()
                for _ in 0..<Int.random(in: 1...60, using: &rng) { keys.insert(randomKey()) }
                let sorted = keys.sorted { a, b in
                    a.withUnsafeBytes { x in b.withUnsafeBytes { compareBytes(x, $0) } } < 0
                }
                let node = try Self.leaf(sorted)
                // Half the probes start with the shared prefix; the others (one byte short) mostly do not.
                let probes = (0..<40).map { _ in
                    Bool.random(using: &rng) ? randomKey() : Array(randomKey().dropFirst())
                }
                for probe in probes {
                    for strictly in [false, true] {
                        let expected = sorted.firstIndex { key in
                            let c = key.withUnsafeBytes { k in probe.withUnsafeBytes { compareBytes(k, $0) } }
                            return strictly ? c > 0 : c >= 0
                        } ?? sorted.count
                        let found = probe.withUnsafeBytes { node.lowerBound($0, strictly: strictly) }
                        #expect(found == expected,
                                "seed \(seed) round \(round): \(probe) in \(sorted), strictly \(strictly)")
                    }
                }
            }
        }
    }
}
