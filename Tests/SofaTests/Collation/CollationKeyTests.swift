import Testing

@testable import Sofa

/// The byte layout of `CollationKey` (CollationKey.swift, FORMAT.md) and the keys it refuses.
@Suite struct CollationKeyTests {
    private let sortKeyA: [UInt8] = [0x2A, 0x01, 0x05, 0x01, 0x05, 0x00]  // "a" under ICU 72

    @Test func scalarsHaveTheDocumentedBytes() throws {
        #expect(try CollationKey(nil).bytes == [0x10])
        #expect(try CollationKey(false).bytes == [0x20])
        #expect(try CollationKey(true).bytes == [0x21])
        #expect(try CollationKey(1).bytes == [0x30, 0xBF, 0xF0, 0, 0, 0, 0, 0, 0])
        #expect(try CollationKey(-1).bytes == [0x30, 0x40, 0x0F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF])
        #expect(try CollationKey(0).bytes == [0x30, 0x80, 0, 0, 0, 0, 0, 0, 0])
        #expect(try CollationKey(.number(-0.0)).bytes == [0x30, 0x80, 0, 0, 0, 0, 0, 0, 0])
        #expect(try CollationKey("a").bytes == [0x40] + ICUCollator.sortKey("a")!)
        #expect(try CollationKey("").bytes == [0x40, 0x01, 0x01, 0x00])
    }

    @Test func containersHaveTheDocumentedBytes() throws {
        #expect(try CollationKey([]).bytes == [0x50, 0x00])
        #expect(try CollationKey([:]).bytes == [0x60, 0x00])
        let one: [UInt8] = [0x30, 0xBF, 0xF0, 0, 0, 0, 0, 0, 0]
        #expect(try CollationKey(["a", 1]).bytes == [0x50, 0x40] + ICUCollator.sortKey("a")! + one + [0x00])
        // Member names carry no tag: the name's sort key, then the value.
        #expect(try CollationKey(["a": nil]).bytes == [0x60] + ICUCollator.sortKey("a")! + [0x10, 0x00])
        #expect(try CollationKey([[nil]]).bytes == [0x50, 0x50, 0x10, 0x00, 0x00])
    }

    /// The doc comment's examples are ICU 72's bytes; on another ICU only the sort-key bytes may differ.
    @Test(.enabled(if: ICUCollator.libraryVersion[0] == 72, "the examples were recorded with ICU 72"))
    func documentedExamplesOnICU72() throws {
        #expect(try CollationKey("a").bytes == [0x40] + sortKeyA)
        #expect(try CollationKey(["a": nil]).description == "60 2a 01 05 01 05 00 10 00")
        #expect(try CollationKey(["a", 1]).description == "50 40 2a 01 05 01 05 00 30 bf f0 00 00 00 00 00 00 00")
        #expect(CollationKey.collatorVersion == [153, 120, 0, 0])
    }

    @Test func numbersRoundTripThroughTheirBits() throws {
        var random = CollationRandom(stream: 30)
        for _ in 0..<2000 {
            let number = random.number()
            let key = try seeded(CollationKey(.number(number)))
            let decoded = try key.bytes.withUnsafeBytes { try seeded(CollationKey.decodeNumber($0, at: 0)) }
            #expect(decoded == number && (decoded != 0 || decoded.sign == .plus),
                    "\(number) came back as \(decoded) \(seedNote)")
        }
    }

    @Test(arguments: [Double.nan, -Double.nan, .signalingNaN, .infinity, -.infinity])
    func nonFiniteNumbersAreRejected(number: Double) {
        let error = #expect(throws: SofaError.self) { try CollationKey(.number(number)) }
        #expect(error?.code == .invalidValue)
        #expect(error?.message.contains("cannot be a key") == true, "\(error?.message ?? "")")
    }

    @Test func errorsSayWhereInTheKey() {
        let key: JSON = ["Rock", ["year": .number(.nan)]]
        let error = #expect(throws: SofaError.self) { try CollationKey(key) }
        #expect(error?.code == .invalidValue)
        #expect(error?.message.contains("nan cannot be a key") == true, "\(error?.message ?? "")")
        #expect(error?.message.contains("key[1][\"year\"]") == true, "\(error?.message ?? "")")
    }

    @Test func failedEncodeLeavesTheBufferAlone() {
        var buffer: [UInt8] = [1, 2, 3]
        #expect(throws: SofaError.self) { try CollationKey.encode(["a", "b", .number(.infinity)], into: &buffer) }
        #expect(buffer == [1, 2, 3])
    }

    @Test func encodeAppends() throws {
        var buffer: [UInt8] = [0xEE]
        try CollationKey.encode(["Rock", 1971], into: &buffer)
        try CollationKey.encode("x", into: &buffer)
        #expect(buffer == [0xEE] + (try CollationKey(["Rock", 1971]).bytes) + (try CollationKey("x").bytes))
    }

    /// Nesting `depth` arrays deep, alternating with objects so both containers count.
    private func nested(_ depth: Int) -> JSON {
        var value: JSON = 1
        for level in 0..<depth { value = level % 2 == 0 ? [value] : ["k": value] }
        return value
    }

    @Test func depthLimitIsEnforcedBothWays() throws {
        let deepest = try CollationKey(nested(CollationKey.maxDepth))
        #expect(try CollationKey(validating: deepest.bytes) == deepest)

        let error = #expect(throws: SofaError.self) { try CollationKey(nested(CollationKey.maxDepth + 1)) }
        #expect(error?.code == .invalidValue)
        #expect(error?.message.contains("\(CollationKey.maxDepth) levels") == true, "\(error?.message ?? "")")

        // Far deeper than the limit: still a typed error, with no deep recursion before it.
        #expect(throws: SofaError.self) { try CollationKey(nested(1_000)) }

        // Bytes nested too deep are refused by the walker too (the encoder would never write them).
        let tooDeep = [UInt8](repeating: 0x50, count: 300) + [UInt8](repeating: 0x00, count: 300)
        let walkError = #expect(throws: SofaError.self) { try CollationKey(validating: tooDeep) }
        #expect(walkError?.code == .invalidCollationKey)
        #expect(walkError?.offset == CollationKey.maxDepth)
    }

    @Test func descriptionIsHex() throws {
        #expect(try CollationKey([true, nil]).description == "50 21 10 00")
    }
}
