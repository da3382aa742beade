import Testing

@testable import SofaStorage

/// `Node.leafEntries` lists a leaf's entries as views of its payload without decoding a `Node`; a large batch
/// modify's leaf workers read each touched leaf that way. It must list what the decoded node holds, and throw a
/// corruption error exactly where decoding the node does, never crash, on damaged leaves.
@Suite struct LeafEntriesTests {
    static func entries(_ payload: ChunkPayload) throws -> [(key: [UInt8], value: [UInt8])] {
        var views: [(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)] = [(.init(start: nil, count: 0),
                                                                                        .init(start: nil, count: 0))]
        try Node.leafEntries(of: payload, path: "test", into: &views)
        return views.map { (Array($0.key), Array($0.value)) }
    }

    @Test func listsWhatTheDecodedLeafHolds() throws {
        for seed in SeededGenerator.seeds(fixed: [7]) {
            var rng = SeededGenerator(seed: seed)
            for round in 0..<300 {
                var keys = Set<[UInt8]>()
                for _ in 0..<Int.random(in: 1...80, using: &rng) {
                    keys.insert(LeafLookupTests.randomBytes(0...6, from: [0, 1, 2, 0x80, 0xFF], using: &rng))
                }
                // Values of 0–200 bytes, so that some lengths take two varint bytes.
                let rows = LeafLookupTests.inByteOrder(keys).map { key in
                    (key: key, value: LeafLookupTests.randomBytes(0...200, from: Array(0...255), using: &rng))
                }
                let payload = LeafLookupTests.payload(LeafLookupTests.leafBytes(rows))
                let node = try Node(payload: payload, isLeaf: true, path: "test")
                let listed = try Self.entries(payload)
                #expect(listed.count == node.count, "seed \(seed) round \(round)")
                for (i, e) in listed.enumerated() where i < node.count {
                    #expect(e.key == Array(node.key(i)) && e.value == Array(node.value(i)),
                            "seed \(seed) round \(round) entry \(i)")
                }
            }
        }
    }

    @Test func damagedLeavesThrowWhereTheNodeDoes() throws {
        for seed in SeededGenerator.seeds(fixed: [8]) {
            var rng = SeededGenerator(seed: seed)
            for round in 0..<2000 {
                var bytes = LeafLookupTests.leafBytes(LeafLookupTests.randomRows(using: &rng))
                // Cut short, grown by a byte, or with bytes overwritten (length prefixes huge, zero or wrong).
                switch Int.random(in: 0..<3, using: &rng) {
                case 0: bytes.removeLast(Int.random(in: 1...bytes.count, using: &rng))
                case 1: bytes.append(0)
                default:
                    for _ in 0..<Int.random(in: 1...3, using: &rng) {
                        let at = Int.random(in: 0..<bytes.count, using: &rng)
                        bytes[at] = [0, 0x7F, 0x80, 0xFF].randomElement(using: &rng)!
                    }
                }
                let payload = LeafLookupTests.payload(bytes)
                let node = try? Node(payload: payload, isLeaf: true, path: "test")
                do {
                    let listed = try Self.entries(payload)
                    #expect(node != nil, "seed \(seed) round \(round): listed a leaf that does not decode")
                    if let node {
                        #expect(listed.map(\.key) == (0..<node.count).map { Array(node.key($0)) },
                                "seed \(seed) round \(round)")
                    }
                } catch let error as SofaError {
                    #expect(error.code == .corruption, "seed \(seed) round \(round): \(error)")
                    #expect(node == nil, "seed \(seed) round \(round): the listing failed where the node decodes")
                }
            }
        }
    }
}
