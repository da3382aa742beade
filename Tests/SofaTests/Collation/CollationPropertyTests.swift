import Testing

@testable import Sofa

/// Random nested values (seeded: `SOFA_SEED` replays a run): the byte order and `JSON.collate` always agree,
/// the order is a total order, and the encoding is prefix-free and walkable.
@Suite struct CollationPropertyTests {
    /// Pairs per property; each pair also yields a near variant, so twice as many comparisons.
    static let cases = 4000

    @Test func byteOrderEqualsCollate() throws {
        var random = CollationRandom(stream: 20)
        for _ in 0..<Self.cases {
            let a = random.json()
            for b in [random.json(), random.variant(of: a)] {
                let keyA = try seeded(CollationKey(a)), keyB = try seeded(CollationKey(b))
                let order = JSON.collate(a, b)
                #expect(byteOrder(keyA.bytes, keyB.bytes) == order,
                        "\(describe(a)) vs \(describe(b)): collate \(order), bytes \(keyA) / \(keyB) \(seedNote)")
                #expect((keyA < keyB) == (order < 0) && (keyA == keyB) == (order == 0),
                        "\(describe(a)) vs \(describe(b)) \(seedNote)")
                #expect(CollationKey.compare(keyA.bytes, keyB.bytes) == order, "\(seedNote)")
            }
        }
    }

    @Test func collateIsAntisymmetricAndReflexive() {
        var random = CollationRandom(stream: 21)
        for _ in 0..<Self.cases {
            let a = random.json()
            let b = random.chance(0.5) ? random.variant(of: a) : random.json()
            #expect(JSON.collate(a, b) == -JSON.collate(b, a), "\(describe(a)) vs \(describe(b)) \(seedNote)")
            #expect(JSON.collate(a, a) == 0, "\(describe(a)) \(seedNote)")
        }
    }

    /// Transitivity, checked the strong way: sort a few hundred values (many of them near each other) and check
    /// every pair of the result, not only neighbours; plus explicit triples.
    @Test func collateIsTransitive() throws {
        var random = CollationRandom(stream: 22)
        for round in 0..<4 {
            var values: [JSON] = []
            while values.count < 250 {
                let value = random.json(depth: 3)
                values.append(value)
                values.append(random.variant(of: value))
            }
            let sorted = values.sorted { JSON.collate($0, $1) < 0 }
            for i in sorted.indices {
                for j in sorted.indices where i < j {
                    #expect(JSON.collate(sorted[i], sorted[j]) <= 0,
                            "round \(round): \(describe(sorted[i])) after \(describe(sorted[j])) \(seedNote)")
                }
            }
            let byBytes = try values.map { try seeded(CollationKey($0)) }.sorted()
            let resorted = try sorted.map { try seeded(CollationKey($0)) }
            #expect(byBytes == resorted, "round \(round): byte sort differs from collate sort \(seedNote)")
        }
        for _ in 0..<Self.cases {
            let a = random.json(depth: 2)
            let b = random.variant(of: a)
            let c = random.chance(0.5) ? random.variant(of: b) : random.variant(of: a)
            let ab = JSON.collate(a, b), bc = JSON.collate(b, c), ac = JSON.collate(a, c)
            if ab <= 0 && bc <= 0 {
                #expect(ac <= 0, "\(describe(a)) ≤ \(describe(b)) ≤ \(describe(c)) \(seedNote)")
                if ab < 0 || bc < 0 { #expect(ac < 0, "\(describe(a)) < \(describe(c)) \(seedNote)") }
            }
        }
    }

    @Test func encodingIsPrefixFreeAndWalkable() throws {
        var random = CollationRandom(stream: 23)
        for _ in 0..<Self.cases {
            let a = random.json(), b = random.variant(of: a)
            let keyA = try seeded(CollationKey(a).bytes), keyB = try seeded(CollationKey(b).bytes)
            if keyA != keyB {
                #expect(!keyA.starts(with: keyB) && !keyB.starts(with: keyA),
                        "\(describe(a)) vs \(describe(b)): one encoding is a prefix \(seedNote)")
            }
            #expect(try seeded(CollationKey(validating: keyA).bytes) == keyA, "\(describe(a)) \(seedNote)")
            let row = keyA + Array("doc-\(random.next())".utf8)
            let end = try seeded(CollationKey.elementEnd(in: row, from: 0))
            #expect(end == keyA.count, "\(describe(a)) \(seedNote)")
        }
    }

    /// `CollationKey(key) + docID` orders rows by key, then by the raw bytes of the doc ID.
    @Test func rowKeysOrderByKeyThenDocID() throws {
        var random = CollationRandom(stream: 24)
        let ids = ["", "a", "b", "a0", "ab", "\u{0}", "\u{FF}", "Z", "doc-1", "doc-10", "doc-2", "é"]
        for _ in 0..<Self.cases {
            let keyA = random.json(depth: 2)
            let keyB = random.chance(0.5) ? keyA : random.variant(of: keyA)
            let idA = Array(ids.randomElement(using: &random)!.utf8)
            let idB = Array(ids.randomElement(using: &random)!.utf8)
            var rowA: [UInt8] = [], rowB: [UInt8] = []
            try seeded(CollationKey.encode(keyA, into: &rowA))
            try seeded(CollationKey.encode(keyB, into: &rowB))
            rowA += idA
            rowB += idB
            let keyOrder = JSON.collate(keyA, keyB)
            let expected = keyOrder != 0 ? keyOrder : byteOrder(idA, idB)
            #expect(byteOrder(rowA, rowB) == expected,
                    "\(describe(keyA))+\(idA) vs \(describe(keyB))+\(idB) \(seedNote)")
        }
    }

    /// Group bytes at level L are equal exactly when the keys' first L items collate equal (CouchDB's
    /// group_level), and they order as those truncated keys do, so each group is one contiguous run of rows.
    @Test func groupPrefixesMatchTruncatedKeys() throws {
        var random = CollationRandom(stream: 25)
        for _ in 0..<Self.cases {
            let a = random.json(depth: 3)
            var b = random.variant(of: a)
            if random.chance(0.3) { b = .array((a.arrayValue ?? [a]) + [random.json(depth: 1)]) }
            let level = Int.random(in: 1...4, using: &random)
            let rowA = try seeded(CollationKey(a).bytes) + [0x64, 0x31]  // "d1" and "d": doc IDs of any length
            let rowB = try seeded(CollationKey(b).bytes) + [0x64]
            let groupA = Array(rowA.prefix(try seeded(CollationKey.groupPrefixLength(rowA, level: level))))
            let groupB = Array(rowB.prefix(try seeded(CollationKey.groupPrefixLength(rowB, level: level))))
            let order = JSON.collate(truncated(a, level), truncated(b, level))
            #expect(byteOrder(groupA, groupB) == order,
                    "level \(level): \(describe(a)) vs \(describe(b)) \(seedNote)")
            #expect(rowA.starts(with: groupA) && rowB.starts(with: groupB))
        }
    }

    /// The key CouchDB reports for a row's group: the first `level` items of an array, any other key whole.
    private func truncated(_ key: JSON, _ level: Int) -> JSON {
        guard case .array(let items) = key else { return key }
        return .array(Array(items.prefix(level)))
    }
}
