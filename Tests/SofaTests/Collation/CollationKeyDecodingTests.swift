import Testing

@testable import Sofa

/// Walking encoded keys: extents, groups, scalars, and malformed bytes that must throw (never trap).
@Suite struct CollationKeyDecodingTests {
    private func bytes(_ key: JSON) throws -> [UInt8] { try CollationKey(key).bytes }

    private func group(_ key: JSON, level: Int, docID: String = "doc") throws -> [UInt8] {
        let row = try bytes(key) + Array(docID.utf8)
        return Array(row.prefix(try CollationKey.groupPrefixLength(row, level: level)))
    }

    @Test func elementEndFindsEachItem() throws {
        let items: [JSON] = [nil, true, 2.5, "Zeppelin", ["x": [1, "y"]], [], "", false]
        let whole = try bytes(.array(items))
        var offset = 1
        for item in items {
            let end = try CollationKey.elementEnd(in: whole, from: offset)
            #expect(Array(whole[offset..<end]) == (try bytes(item)), "\(describe(item))")
            offset = end
        }
        #expect(whole[offset] == 0x00 && offset == whole.count - 1)
    }

    @Test func groupPrefixesFollowGroupLevel() throws {
        let abc: JSON = ["Rock", "Queen", "Innuendo"]
        let tag: [UInt8] = [0x50]
        let rock = try bytes("Rock"), queen = try bytes("Queen"), innuendo = try bytes("Innuendo")
        #expect(try group(abc, level: 0) == [])
        #expect(try group(abc, level: 1) == tag + rock)
        #expect(try group(abc, level: 2) == tag + rock + queen)
        #expect(try group(abc, level: 3) == tag + rock + queen + innuendo)
        #expect(try group(abc, level: 4) == tag + rock + queen + innuendo + [0x00], "fewer items: whole key")
        // An array with exactly `level` items joins its longer relatives' group.
        #expect(try group(["Rock"], level: 1) == group(abc, level: 1))
        #expect(try group(["Rock"], level: 2) != group(["Rock", "Queen"], level: 2))
        #expect(try group([], level: 1) == [0x50, 0x00])
        // Non-array keys group whole, whatever the level; the doc ID after the key is never included.
        #expect(try group("Rock", level: 1) == rock)
        #expect(try group(["a": 1], level: 2) == bytes(["a": 1]))
        #expect(try group(7, level: 0, docID: "") == [])
    }

    @Test func scalarsDecode() throws {
        let values: [JSON] = [nil, false, true, 0, -1.5, 1e300, .number(.leastNonzeroMagnitude)]
        for value in values {
            let encoded = try bytes(value)
            #expect(try encoded.withUnsafeBytes { try CollationKey.decodeScalar($0, at: 0) } == value)
        }
        for value: JSON in ["a", [1], ["a": 1]] {
            #expect(try bytes(value).withUnsafeBytes { try CollationKey.decodeScalar($0, at: 0) } == nil)
        }
        let pair = try bytes([nil, 42])
        #expect(try pair.withUnsafeBytes { try CollationKey.decodeNumber($0, at: 2) } == 42)
        #expect(throws: SofaError.self) { try pair.withUnsafeBytes { try CollationKey.decodeNumber($0, at: 1) } }
        #expect(throws: SofaError.self) { try pair.withUnsafeBytes { try CollationKey.decodeScalar($0, at: 99) } }
        #expect(throws: SofaError.self) { try pair.withUnsafeBytes { try CollationKey.decodeScalar($0, at: -1) } }
    }

    /// Specific malformations, each with the offset the error must name.
    @Test(arguments: [
        ([], 0),
        ([0x00], 0),  // end where a value should be
        ([0x11], 0),  // unknown tag
        ([0x30, 0x80, 0, 0], 0),  // number cut short
        ([0x30, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF], 1),  // -0.0
        ([0x30, 0xFF, 0xF8, 0, 0, 0, 0, 0, 0], 1),  // NaN
        ([0x30, 0xFF, 0xF0, 0, 0, 0, 0, 0, 0], 1),  // +infinity
        ([0x30, 0x00, 0x0F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF], 1),  // -infinity
        ([0x40, 0x2A, 0x01, 0x05, 0x01], 1),  // sort key without terminator
        ([0x40, 0x2A, 0x01, 0x05, 0x00], 1),  // one level separator
        ([0x40, 0x00], 1),  // empty sort key
        ([0x50, 0x10], 2),  // array without end
        ([0x50, 0x10, 0x00, 0x10], 3),  // trailing bytes
        ([0x60, 0x10, 0x00], 1),  // object member without a name: 0x10 starts a name that never ends
        ([0x60, 0x2A, 0x01, 0x05, 0x01, 0x05, 0x00], 7),  // name without a value
        ([0x60, 0x2A, 0x01, 0x05, 0x01, 0x05, 0x00, 0x00], 7),  // name followed by end
    ] as [([UInt8], Int)])
    func malformedBytesAreRejected(bytes: [UInt8], offset: Int) {
        let error = #expect(throws: SofaError.self) { try CollationKey(validating: bytes) }
        #expect(error?.code == .invalidCollationKey)
        #expect(error?.offset == offset, "\(error?.description ?? "")")
        #expect(error?.message.hasPrefix("malformed collation key") == true)
    }

    @Test func everyProperPrefixIsInvalid() throws {
        // Prefix-freedom from the other side: cutting a key anywhere leaves bytes that are not a key.
        var random = CollationRandom(stream: 40)
        for _ in 0..<300 {
            let key = try seeded(bytes(random.json()))
            for length in 0..<key.count {
                #expect(throws: SofaError.self, "\(key) cut at \(length) \(seedNote)") {
                    try CollationKey(validating: Array(key.prefix(length)))
                }
            }
        }
    }

    /// Mutated keys and random bytes: the walker either accepts them (then they re-validate and have a clean
    /// extent) or throws `invalidCollationKey` with an offset inside the input. It never traps.
    @Test func damagedBytesThrowOrValidate() throws {
        var random = CollationRandom(stream: 41)
        let tags: [UInt8] = [0x00, 0x01, 0x10, 0x20, 0x21, 0x30, 0x40, 0x50, 0x60, 0x2A, 0x05, 0xFF]
        for round in 0..<20_000 {
            var input: [UInt8]
            if round % 2 == 0 {
                input = try seeded(bytes(random.json(depth: 3)))
                for _ in 0..<Int.random(in: 1...3, using: &random) where !input.isEmpty {
                    let index = Int.random(in: 0..<input.count, using: &random)
                    switch Int.random(in: 0..<3, using: &random) {
                    case 0: input[index] = tags.randomElement(using: &random)!
                    case 1: input.remove(at: index)
                    default: input.insert(UInt8.random(in: 0...255, using: &random), at: index)
                    }
                }
            } else {
                input = (0..<Int.random(in: 0...24, using: &random)).map { _ in
                    random.chance(0.6) ? tags.randomElement(using: &random)! : UInt8.random(in: 0...255, using: &random)
                }
            }
            do {
                let key = try CollationKey(validating: input)
                #expect(try CollationKey.elementEnd(in: key.bytes, from: 0) == input.count)
                for level in 0...3 {
                    #expect(try CollationKey.groupPrefixLength(input, level: level) <= input.count)
                }
            } catch let error as SofaError {
                #expect(error.code == .invalidCollationKey, "\(error) \(seedNote)")
                #expect((0...input.count).contains(error.offset ?? -1), "\(error) in \(input) \(seedNote)")
            }
            // Walking from every offset must not trap either.
            for offset in [-1, 0, input.count / 2, input.count, input.count + 1] {
                _ = try? CollationKey.elementEnd(in: input, from: offset)
            }
        }
    }
}
