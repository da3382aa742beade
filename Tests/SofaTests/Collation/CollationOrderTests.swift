import Testing

@testable import Sofa

/// Fixed lists that must sort exactly, by `JSON.collate` and by the bytes of `CollationKey`, from any order.
@Suite struct CollationOrderTests {
    /// CouchDB's view-collation list, as DESIGN.md §2 quotes it.
    static let couchDB: [JSON] = [
        nil, false, true, 1, 2, 3.0, 4, "a", "A", "aa", "b", "B", "ba", "bb",
        ["a"], ["b"], ["b", "c"], ["b", "c", "a"], ["b", "d"], ["b", "d", "e"],
        ["a": 1], ["a": 2], ["b": 1], ["b": 2], ["b": 2, "a": 1], ["b": 2, "c": 2],
    ]

    /// A longer list in the same spirit: negative and fractional numbers, the extremes of doubles, symbols and
    /// digits before letters, accents and case as tie-breaks, other scripts, empty and nested containers.
    static let extended: [JSON] = [
        nil, false, true,
        .number(-.greatestFiniteMagnitude), -1e300, -2, -1.5, -1, -0.1, .number(-.leastNonzeroMagnitude),
        0, .number(.leastNonzeroMagnitude), 0.1, 1, 2, 3.0, 4, 1e300, .number(.greatestFiniteMagnitude),
        "", " ", "_", "-", "!", "~", "$", "0", "1", "10", "2", "9",
        "a", "A", "á", "Á", "aa", "b", "B", "ba", "bb", "e", "é", "è", "f", "z", "Z",
        "α", "ω", "Ω", "я", "한", "あ", "一", "日",
        [], [nil], [false], [true], [-1], [0], [1], [""], ["a"], ["a", nil], ["a", 1], ["a", "b"], ["b"],
        ["b", "c"], ["b", "c", "a"], ["b", "d"], ["b", "d", "e"], [[]], [[nil]], [["a"]], [[:]], [["a": 1]],
        [:], ["": nil], ["a": nil], ["a": 1], ["a": 2], ["a": "x"], ["a": []], ["a": [:]], ["A": 1],
        ["b": 1], ["b": 2], ["b": 2, "a": 1], ["b": 2, "c": 2],
    ]

    @Test(arguments: [("CouchDB", couchDB), ("extended", extended)])
    func listIsStrictlyIncreasing(name: String, list: [JSON]) throws {
        let keys = try list.map { try CollationKey($0) }
        for i in list.indices {
            for j in list.indices {
                let expected = i < j ? -1 : (i == j ? 0 : 1)
                #expect(JSON.collate(list[i], list[j]) == expected,
                        "\(name): \(describe(list[i])) vs \(describe(list[j]))")
                #expect(byteOrder(keys[i].bytes, keys[j].bytes) == expected,
                        "\(name): bytes of \(describe(list[i])) vs \(describe(list[j])): \(keys[i]) / \(keys[j])")
                #expect((keys[i] < keys[j]) == (expected < 0), "\(name): < of \(describe(list[i]))")
            }
        }
    }

    @Test(arguments: [("CouchDB", couchDB), ("extended", extended)])
    func everyShuffleSortsBack(name: String, list: [JSON]) throws {
        var random = CollationRandom(stream: 10)
        let encoded = try list.map { try CollationKey($0) }
        for round in 0..<500 {
            let order = Array(list.indices).shuffled(using: &random)
            let byCollate = order.sorted { JSON.collate(list[$0], list[$1]) < 0 }
            let byBytes = order.sorted { encoded[$0] < encoded[$1] }
            #expect(byCollate == Array(list.indices), "\(name) round \(round) \(seedNote)")
            #expect(byBytes == Array(list.indices), "\(name) round \(round) \(seedNote)")
            // Encoding after shuffling too, so that keys made in any order (reusing one buffer) agree.
            var scratch: [UInt8] = []
            for index in order {
                scratch.removeAll(keepingCapacity: true)
                try CollationKey.encode(list[index], into: &scratch)
                #expect(scratch == encoded[index].bytes, "\(name): \(describe(list[index]))")
            }
        }
    }

    @Test func designStringOrder() throws {
        let ordered: [JSON] = ["~", "1", "a", "A", "aa", "b", "B"]
        for (a, b) in zip(ordered, ordered.dropFirst()) {
            #expect(JSON.collate(a, b) == -1, "\(a) < \(b)")
            #expect(try CollationKey(a) < CollationKey(b), "\(a) < \(b)")
        }
    }

    @Test func equalValuesHaveEqualKeys() throws {
        let pairs: [(JSON, JSON)] = [
            (1, 1.0), (0, .number(-0.0)), ([0], [.number(-0.0)]), (["a": 0], ["a": .number(-0.0)]),
            ("a\u{0}b", "ab"), ("é", "e\u{301}"), (["é": 1], ["e\u{301}": 1]), ([], []), ([:], [:]),
        ]
        for (a, b) in pairs {
            #expect(JSON.collate(a, b) == 0, "\(describe(a)) == \(describe(b))")
            #expect(try CollationKey(a) == CollationKey(b), "\(describe(a)) == \(describe(b))")
            #expect(try CollationKey(a).hashValue == CollationKey(b).hashValue)
        }
    }

    @Test func typesOrderBeforeValues() {
        // A large number still sorts before the smallest string, an empty array after every string, and so on.
        let chain: [JSON] = [nil, false, true, 1e300, "", [], [:]]
        for (a, b) in zip(chain, chain.dropFirst()) {
            #expect(JSON.collate(a, b) == -1, "\(describe(a)) < \(describe(b))")
            #expect(JSON.collate(b, a) == 1, "\(describe(b)) > \(describe(a))")
        }
    }

    @Test func objectsCompareInStoredOrderNotByName() {
        // The same members in another order are a different key: the first member decides.
        let ab: JSON = ["a": 1, "b": 2]
        let ba: JSON = ["b": 2, "a": 1]
        #expect(JSON.collate(ab, ba) == -1)
        #expect(JSON.collate(["a": 9], ["b": 0]) == -1, "the name decides before the value")
        #expect(JSON.collate(["a": 1], ["a": 1, "": nil]) == -1, "a prefix sorts first")
    }

    @Test func nanCollatesAfterNumbersAndEqualToItself() {
        let nan = JSON.number(.nan), infinity = JSON.number(.infinity)
        #expect(JSON.collate(nan, nan) == 0)
        #expect(JSON.collate(nan, infinity) == 1)
        #expect(JSON.collate(.number(-.infinity), nan) == -1)
        #expect(JSON.collate(nan, "") == -1, "NaN is still a number: before strings")
        #expect(JSON.collate(true, nan) == -1)
        #expect(JSON.collate(.number(-.infinity), -1e300) == -1)
        #expect(JSON.collate(infinity, 1e300) == 1)
    }
}
