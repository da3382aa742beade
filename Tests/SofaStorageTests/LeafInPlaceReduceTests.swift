import Testing

@testable import SofaStorage

/// `ReduceParts.addLeafRows`, the reader's in-place reduce of a leaf's rows, on crafted payloads: the rows of the
/// range as a decoded leaf gives them, and corruption errors (never a read out of bounds) on damaged bytes.
@Suite struct LeafInPlaceReduceTests {
    static func rows(_ bytes: [UInt8], _ range: KeyRange) throws -> (count: UInt64, sum: Int64?, first: [UInt8]?) {
        var parts = ReduceParts(reducer: Int64SumReducer(), wantsFirst: true)
        try bytes.withUnsafeBytes { try parts.addLeafRows($0, chunkOffset: 64, range: range, path: "test") }
        let first = parts.first?.withUnsafeBytes { Array($0) }
        let reduction = try parts.finish()
        return (reduction.rowCount, reduction.rowCount > 0 ? Int64SumReducer.decode(reduction.value) : nil, first)
    }

    @Test func reducesTheRowsOfTheRangeAsTheDecodedLeafDoes() throws {
        var rng = SeededGenerator(seed: 21)
        for round in 0..<300 {
            let keys = LeafLookupTests.inByteOrder(Set((0..<Int.random(in: 1...60, using: &rng)).map { _ in
                LeafLookupTests.randomBytes(0...5, from: [0, 1, 2, 0xFF], using: &rng)
            }))
            let leafRows = keys.map { (key: $0, value: int64Value(Int64.random(in: -50...50, using: &rng))) }
            let bytes = LeafLookupTests.leafBytes(leafRows)
            let node = try Node(payload: LeafLookupTests.payload(bytes), isLeaf: true, path: "test")
            func bound() -> KeyBound? {
                Bool.random(using: &rng) ? nil : KeyBound(LeafLookupTests.randomBytes(0...5, from: [0, 1, 2, 0xFF],
                                                                                    using: &rng),
                                                          inclusive: Bool.random(using: &rng))
            }
            let range = KeyRange(lower: bound(), upper: bound())
            var expected: [(key: [UInt8], value: [UInt8])] = []
            for i in 0..<node.count where range.contains(node.key(i)) {
                expected.append((Array(node.key(i)), Array(node.value(i))))
            }
            let got = try Self.rows(bytes, range)
            #expect(got.count == UInt64(expected.count), "round \(round): count in \(range)")
            #expect(got.first == expected.first?.value, "round \(round): first row in \(range)")
            if !expected.isEmpty {
                #expect(got.sum == expected.reduce(0) { $0 + Int64SumReducer.decode($1.value)! },
                        "round \(round): sum in \(range)")
            }
        }
    }

    @Test func damagedLeavesAreCorruption() throws {
        let clean = LeafLookupTests.leafBytes([([1], int64Value(1)), ([2], int64Value(2)), ([3], int64Value(3))])
        #expect(try Self.rows(clean, .all).count == 3)
        var damaged: [(String, [UInt8])] = [("no entries", [0]), ("trailing byte", clean + [7])]
        for cut in 1..<clean.count { damaged.append(("cut at \(cut)", Array(clean[..<cut]))) }
        var longKey = clean
        longKey[1] = 0x7F  // the first key's length runs past the payload
        damaged.append(("key length", longKey))
        for (what, bytes) in damaged {
            do {
                _ = try Self.rows(bytes, .all)
                Issue.record("\(what): no error")
            } catch let error as SofaError {
                #expect(error.code == .corruption, "\(what): \(error)")
            }
        }
    }
}
