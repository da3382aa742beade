import Testing

@testable import Sofa

/// Randomized checks over thousands of values. Each runs with a fixed seed and a fresh one (or `SOFA_SEED`),
/// and every failure names its seed so it can be replayed.
@Suite struct JSONPropertyTests {
    /// parse(serialize(x)) == x, and serializing again gives the same bytes.
    @Test(arguments: SeededRandom.testSeeds)
    func parseOfSerializeIsIdentity(seed: UInt64) throws {
        var generator = RandomJSON(seed: seed)
        for iteration in 0..<3000 {
            let value = generator.value()
            let bytes = try value.serializedBytes()
            let parsed: JSON
            do {
                parsed = try JSON(parsing: bytes)
            } catch {
                Issue.record("\(generator.random.replayHint), iteration \(iteration): \(error) for \(value)")
                return
            }
            guard parsed == value else {
                Issue.record("\(generator.random.replayHint), iteration \(iteration): \(value) came back as \(parsed)")
                return
            }
            // Equality treats 0 and -0 alike; the bytes must still match exactly.
            let again = try parsed.serializedBytes()
            #expect(again == bytes, "\(generator.random.replayHint), iteration \(iteration)")
        }
    }

    /// Number text of every shape parses to exactly what the standard library's correctly rounded conversion
    /// gives, whichever of the parser's paths (fast or slow) handles it.
    @Test(arguments: SeededRandom.testSeeds)
    func numbersMatchTheStandardLibrary(seed: UInt64) throws {
        var random = SeededRandom(seed: seed)
        for iteration in 0..<20_000 {
            var text = Bool.random(using: &random) ? "-" : ""
            let integerDigits = Int.random(in: 1...22, using: &random)
            text += String(Int.random(in: 1...9, using: &random))
            for _ in 1..<integerDigits { text += String(Int.random(in: 0...9, using: &random)) }
            if Int.random(in: 0..<5, using: &random) == 0 { text = text.hasPrefix("-") ? "-0" : "0" }
            if Bool.random(using: &random) {
                text += "."
                for _ in 0..<Int.random(in: 1...20, using: &random) {
                    text += String(Int.random(in: 0...9, using: &random))
                }
            }
            if Bool.random(using: &random) {
                text += ["e", "E", "e+", "e-", "E-"].randomElement(using: &random)!
                text += String(Int.random(in: 0...330, using: &random))
            }
            guard let expected = Double(text), expected.isFinite else {
                #expect(throws: SofaError.self, "\(random.replayHint), iteration \(iteration): \(text)") {
                    try JSON(parsing: text)
                }
                continue
            }
            let parsed = try JSON(parsing: text)
            #expect(
                parsed.doubleValue?.bitPattern == expected.bitPattern,
                "\(random.replayHint), iteration \(iteration): \(text) parsed as \(parsed), expected \(expected)")
        }
    }

    /// Corrupted JSON text never crashes the parser: each input either parses or throws `.invalidJSON` with an
    /// offset inside the input.
    @Test(arguments: SeededRandom.testSeeds)
    func corruptedInputFailsCleanly(seed: UInt64) throws {
        var generator = RandomJSON(seed: seed)
        let interesting: [UInt8] = Array(#"{}[]",:\u0"#.utf8) + [0x00, 0x80, 0xC3, 0xED, 0xF4, 0xFF]
        for iteration in 0..<3000 {
            var bytes = try generator.value().serializedBytes()
            for _ in 0..<Int.random(in: 1...3, using: &generator.random) {
                let position = Int.random(in: 0...bytes.count, using: &generator.random)
                switch Int.random(in: 0..<3, using: &generator.random) {
                case 0 where position < bytes.count:
                    bytes.remove(at: position)
                case 1 where position < bytes.count:
                    bytes[position] = interesting.randomElement(using: &generator.random)!
                default:
                    bytes.insert(interesting.randomElement(using: &generator.random)!, at: position)
                }
            }
            do {
                _ = try JSON(parsing: bytes)
            } catch let error as SofaError {
                #expect(error.code == .invalidJSON, "\(generator.random.replayHint), iteration \(iteration)")
                let offset = try #require(error.offset, "\(generator.random.replayHint), iteration \(iteration)")
                #expect((0...bytes.count).contains(offset), "\(generator.random.replayHint): \(error)")
                #expect(error.message.contains("offset \(offset)"), "\(generator.random.replayHint): \(error)")
            }
        }
    }

    /// Going through the Codable bridge with `JSON` itself as the type changes nothing.
    @Test(arguments: SeededRandom.testSeeds)
    func codableBridgeIsIdentityForJSON(seed: UInt64) throws {
        var generator = RandomJSON(seed: seed)
        for iteration in 0..<1000 {
            let value = generator.value()
            let decoded = try value.decode(JSON.self)
            let encoded = try JSON(encoding: value)
            #expect(decoded == value && encoded == value, "\(generator.random.replayHint), iteration \(iteration)")
        }
    }
}
