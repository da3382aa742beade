import Foundation
import Testing

@testable import Sofa

/// `ASCIISortKey` against ICU's `ucol_getSortKey`: the two must agree byte for byte on every string the fast path
/// accepts, and the fast path must decline every string it cannot make exactly.
@Suite struct ASCIISortKeyTests {
    /// The fast path's key of `text`, or `nil` if it declines the string.
    private func fastKey(_ text: [UInt8]) throws -> [UInt8]? {
        let table = try #require(ASCIISortKey.shared, "the fast path is off for this ICU")
        var key: [UInt8] = [0xEE]  // a byte already there, to check that the key is appended after it
        guard text.withUnsafeBufferPointer({ table.append(utf8: $0, to: &key) }) else {
            #expect(key == [0xEE], "a declined string left bytes behind")
            return nil
        }
        #expect(key.first == 0xEE)
        return Array(key.dropFirst())
    }

    /// Asserts that `text` is accepted and encodes exactly as ICU encodes it.
    private func expectIdentical(_ text: [UInt8], _ context: String = "",
                                 sourceLocation: SourceLocation = #_sourceLocation) throws {
        let icu = try #require(ICUCollator.icuSortKey(text))
        let fast = try fastKey(text)
        #expect(fast == icu, "\(String(decoding: text, as: UTF8.self).debugDescription) \(context)",
                sourceLocation: sourceLocation)
    }

    /// Every printable ASCII character is in the table under ICU 72; if a later ICU drops one, this names it.
    @Test func everyPrintableCharacterIsInTheTable() throws {
        for byte in UInt8(0x20)...UInt8(0x7E) {
            #expect(try fastKey([byte]) != nil, "character \(String(UnicodeScalar(byte)).debugDescription)")
        }
    }

    @Test func singleCharactersPairsAndTheEmptyString() throws {
        try expectIdentical([])
        let printable = Array(UInt8(0x20)...UInt8(0x7E))
        for a in printable {
            try expectIdentical([a])
            for b in printable { try expectIdentical([a, b]) }
        }
    }

    @Test func declinesWhatItCannotMake() throws {
        // Control characters (ignorable or not), DEL, and anything beyond ASCII go to ICU.
        for text in ["a\u{0}b", "tab\there", "line\n", "\u{7F}", "café", "Résumé", "日本", "🎸", "a\u{301}"] {
            #expect(try fastKey(Array(text.utf8)) == nil, "\(text.debugDescription)")
        }
        // Through the public path such strings still get ICU's key.
        for text in ["a\u{0}b", "café", "Led Zeppelin"] {
            var key: [UInt8] = []
            #expect(ICUCollator.appendSortKey(of: text, to: &key))
            #expect(key == ICUCollator.icuSortKey(Array(text.utf8)))
        }
    }

    /// Runs across the compression limits: 33 common secondaries per byte, 97 common tertiaries per byte, with
    /// an uppercase letter (uncommon tertiary) before, between and after them.
    @Test func runsAcrossTheCompressionLimits() throws {
        for length in [0, 1, 2, 32, 33, 34, 35, 65, 66, 67, 96, 97, 98, 99, 193, 194, 195, 200, 300] {
            let lower = [UInt8](repeating: 0x61, count: length)
            try expectIdentical(lower, "lowercase run of \(length)")
            try expectIdentical([0x41] + lower, "A then \(length)")
            try expectIdentical(lower + [0x41], "\(length) then A")
            try expectIdentical([0x41] + lower + [0x5A] + lower + [0x57], "A, \(length), Z, \(length), W")
            try expectIdentical([UInt8](repeating: 0x20, count: length) + [0x39], "\(length) spaces then 9")
            try expectIdentical([UInt8](repeating: 0x37, count: length), "\(length) digits")
            try expectIdentical([UInt8](repeating: 0x51, count: length), "\(length) capitals")
        }
    }

    /// Random printable ASCII, lengths 0–200, drawn four ways: any character, letters of mixed case, runs of
    /// spaces and digits, and mostly lowercase with a capital now and then.
    @Test func randomStrings() throws {
        var random = CollationRandom(stream: 0xA5C1)
        let printable = Array(UInt8(0x20)...UInt8(0x7E))
        let letters = Array(UInt8(ascii: "a")...UInt8(ascii: "z")) + Array(UInt8(ascii: "A")...UInt8(ascii: "Z"))
        for round in 0..<20_000 {
            let length = Int.random(in: 0...200, using: &random)
            var text: [UInt8] = []
            switch round % 4 {
            case 0:
                for _ in 0..<length { text.append(printable.randomElement(using: &random)!) }
            case 1:
                for _ in 0..<length { text.append(letters.randomElement(using: &random)!) }
            case 2:
                while text.count < length {
                    let run = Int.random(in: 1...40, using: &random)
                    let byte = random.chance(0.5) ? UInt8(ascii: " ")
                        : UInt8(ascii: "0") + UInt8.random(in: 0...9, using: &random)
                    text += [UInt8](repeating: byte, count: run)
                    if random.chance(0.3) { text.append(letters.randomElement(using: &random)!) }
                }
            default:
                for _ in 0..<length {
                    text.append(random.chance(0.05) ? UInt8.random(in: 0x41...0x5A, using: &random)
                                                    : UInt8.random(in: 0x61...0x7A, using: &random))
                }
            }
            try expectIdentical(text, "round \(round), \(CollationRandom.replay)")
        }
    }

    /// Where the benchmark's 100k track documents are (`Benchmarks/data/generate.sh 100000`).
    static let trackDataPath = (ProcessInfo.processInfo.environment["SOFA_BENCH_DATA"] ?? "/tmp/sofa-bench-data")
        + "/100000/docs.jsonl"

    /// The benchmark's track documents: every genre, artist, album and title in the data set. Skipped (and
    /// reported as skipped) where the data set has not been generated. Strings the fast path declines (accented
    /// names) are counted.
    @Test(.enabled(if: FileManager.default.fileExists(atPath: trackDataPath),
                   "needs Benchmarks/data/generate.sh 100000"))
    func trackData() throws {
        let data = try #require(FileManager.default.contents(atPath: Self.trackDataPath))
        var checked = 0, declined = 0
        for line in data.split(separator: UInt8(ascii: "\n")).prefix(20_000) {
            guard case .object(let members) = try JSON(parsing: Array(line)) else { continue }
            for field in ["genre", "artist", "album", "title"] {
                guard case .string(let text) = members[field] else { continue }
                let icu = try #require(ICUCollator.icuSortKey(Array(text.utf8)))
                if let fast = try fastKey(Array(text.utf8)) {
                    #expect(fast == icu, "\(field) \(text.debugDescription)")
                    checked += 1
                } else {
                    declined += 1
                }
            }
        }
        #expect(checked > declined, "the fast path took \(checked) strings and declined \(declined)")
    }
}
