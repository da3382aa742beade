import Foundation
import Sofa

/// A seeded SplitMix64 generator for the collation tests, and random JSON built to stress ICU.
///
/// Every test derives its own stream from ``seed`` (set `SOFA_SEED` to replay a failure) and names the seed
/// in every failure message through ``replay``.
struct CollationRandom: RandomNumberGenerator {
    /// The run's seed: `SOFA_SEED` from the environment (decimal or 0x-hex), else a fixed default.
    static let seed: UInt64 = {
        guard let text = ProcessInfo.processInfo.environment["SOFA_SEED"] else { return 0x5EED_C011_A7E5 }
        let parsed = text.hasPrefix("0x") ? UInt64(text.dropFirst(2), radix: 16) : UInt64(text)
        return parsed ?? 0x5EED_C011_A7E5
    }()

    /// How to replay this run, for failure messages.
    static var replay: String { "SOFA_SEED=\(seed)" }

    private var state: UInt64

    /// A generator for one test: the run's seed mixed with a per-test `stream` number, so tests do not share
    /// a sequence and adding a draw to one test leaves the others alone.
    init(stream: UInt64) {
        state = Self.seed &+ stream &* 0x9E37_79B9_7F4A_7C15
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// True with probability `p`.
    mutating func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &self) < p }

    // MARK: - Strings that stress ICU

    /// Pieces of text chosen for how ICU treats them: case and accent variants that tie on letters, ignorable
    /// code points (U+0000 has no weight at all), combining marks in and out of canonical order (not FCD),
    /// contractions and expansions (ß, æ, U+FDFA expands to 18 collation elements), symbols, digits, CJK,
    /// Hangul, emoji, and characters outside the BMP.
    static let fragments: [String] = [
        "a", "A", "á", "Á", "à", "ä", "aa", "b", "B", "e", "é", "e\u{301}", "è", "E", "z", "Z",
        "1", "2", "9", "10", "0.5", "~", " ", "-", "_", "!", "$", "€", "/", "\\", "\"",
        "\u{0}", "\u{1}", "\u{7F}", "\u{200B}", "\u{FEFF}",
        "\u{301}", "\u{316}", "a\u{301}\u{316}", "a\u{316}\u{301}", "\u{F71}\u{F72}",
        "ß", "ss", "æ", "ae", "ø", "o", "Ω", "ω", "ı", "İ", "i", "ﬁ", "fi",
        "日", "本", "中", "文", "一", "한", "국", "ア", "あ", "ｱ",
        "🎸", "𝄞", "\u{FDFA}", "\u{FFFD}", "\u{FFFF}", "\u{10FFFF}",
        "Led Zeppelin", "résumé", "Résumé", "RESUME",
    ]

    /// A string of 0 to 6 fragments, now and then a long one (past the C shim's 512-unit stack buffer and the
    /// encoder's first capacity guess).
    mutating func string() -> String {
        if chance(0.01) {
            let piece = Self.fragments.randomElement(using: &self)!
            return String(repeating: piece, count: Int.random(in: 100...700, using: &self))
        }
        var text = ""
        for _ in 0..<Int.random(in: 0...6, using: &self) { text += Self.fragments.randomElement(using: &self)! }
        return text
    }

    // MARK: - Numbers and JSON values

    static let specialNumbers: [Double] = [
        0, -0.0, 1, -1, 0.1, -0.1, 0.5, 2, 3, 10, 1e300, -1e300, .leastNonzeroMagnitude, -.leastNonzeroMagnitude,
        2.2250738585072014e-308,
        -2.2250738585072014e-308, .greatestFiniteMagnitude, -.greatestFiniteMagnitude,
        9007199254740992, 9007199254740994,
    ]

    /// A finite number: often a special one or a small integer (so that equal numbers meet), else any double.
    mutating func number() -> Double {
        switch Int.random(in: 0..<4, using: &self) {
        case 0: return Self.specialNumbers.randomElement(using: &self)!
        case 1: return Double(Int.random(in: -5...5, using: &self))
        case 2: return Double.random(in: -1000...1000, using: &self)
        default:
            while true {
                let number = Double(bitPattern: next())
                if number.isFinite { return number }
            }
        }
    }

    /// A random JSON value nested at most `depth` more levels.
    mutating func json(depth: Int = 4) -> JSON {
        let kinds = depth > 0 ? 7 : 5
        switch Int.random(in: 0..<kinds, using: &self) {
        case 0: return .null
        case 1: return .bool(chance(0.5))
        case 2: return .number(number())
        case 3, 4: return .string(string())
        case 5: return .array((0..<Int.random(in: 0...4, using: &self)).map { _ in json(depth: depth - 1) })
        default:
            var members = JSONObject()
            for _ in 0..<Int.random(in: 0...3, using: &self) { members[string()] = json(depth: depth - 1) }
            return .object(members)
        }
    }

    /// A value near `value`: the same with one leaf replaced, an item added or dropped, or a case/accent variant
    /// of a string, so that pairs often share long prefixes and differ late or not at all.
    mutating func variant(of value: JSON) -> JSON {
        switch value {
        case .array(var items) where !items.isEmpty:
            let index = Int.random(in: 0..<items.count, using: &self)
            switch Int.random(in: 0..<4, using: &self) {
            case 0: items[index] = variant(of: items[index])
            case 1: items.removeLast()
            case 2: items.append(json(depth: 1))
            default: break
            }
            return .array(items)
        case .object(var members) where !members.isEmpty:
            let index = Int.random(in: 0..<members.count, using: &self)
            members.values[index] = variant(of: members.values[index])
            if chance(0.3) { members[string()] = json(depth: 1) }
            return .object(members)
        case .string(let text):
            switch Int.random(in: 0..<4, using: &self) {
            case 0: return .string(text.uppercased())
            case 1: return .string(text + Self.fragments.randomElement(using: &self)!)
            case 2: return .string(String(text.dropLast()))
            default: return .string(text.decomposedStringWithCanonicalMapping)
            }
        case .number(let number):
            return chance(0.5) || !number.nextUp.isFinite ? .number(number) : .number(number.nextUp)
        default:
            return chance(0.5) ? value : json(depth: 2)
        }
    }
}

// MARK: - Helpers shared by the collation tests

/// Byte order computed independently of the code under test: -1, 0 or 1, a proper prefix first.
func byteOrder(_ a: [UInt8], _ b: [UInt8]) -> Int {
    if a == b { return 0 }
    return a.lexicographicallyPrecedes(b) ? -1 : 1
}

/// A value as JSON-ish text for failure messages (strings with their scalars spelled out, so that invisible
/// differences such as U+0000 or a combining mark show).
func describe(_ value: JSON) -> String {
    switch value {
    case .null: return "null"
    case .bool(let flag): return flag ? "true" : "false"
    case .number(let number): return "\(number)"
    case .string(let text):
        let scalars = text.unicodeScalars.map { scalar in
            scalar.isASCII && scalar.value >= 0x20 ? String(scalar) : "\\u{\(String(scalar.value, radix: 16))}"
        }
        return "\"" + scalars.joined() + "\""
    case .array(let items): return "[" + items.map(describe).joined(separator: ", ") + "]"
    case .object(let members):
        return "{" + members.map { describe(.string($0.key)) + ": " + describe($0.value) }.joined(separator: ", ") + "}"
    }
}

/// "SOFA_SEED=…", to end every failure message of a randomized test.
let seedNote = CollationRandom.replay

/// An error from code under test in a randomized test, with the seed to replay it.
struct SeededFailure: Error, CustomStringConvertible {
    let underlying: any Error
    var description: String { "\(underlying) [replay with \(CollationRandom.replay)]" }
}

/// Runs `body`, adding the run's seed to any error it throws, so that a randomized test's thrown failures name
/// the seed as its expectation failures do.
func seeded<T>(_ body: @autoclosure () throws -> T) throws -> T {
    do { return try body() } catch { throw SeededFailure(underlying: error) }
}
