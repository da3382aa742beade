@testable import Sofa

/// Random `JSON` values for property tests: nested arrays and objects, numbers across the whole double range
/// (integers up to ±2^53, subnormals, negative zero), and strings mixing ASCII, control characters, quotes,
/// backslashes and 2-, 3- and 4-byte UTF-8.
struct RandomJSON {
    var random: SeededRandom
    /// Containers stop being chosen below this depth.
    var maximumDepth = 6

    init(seed: UInt64) {
        random = SeededRandom(seed: seed)
    }

    mutating func value(depth: Int = 0) -> JSON {
        let kinds = depth < maximumDepth ? 7 : 5
        switch Int.random(in: 0..<kinds, using: &random) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &random))
        case 2: return .number(number())
        case 3, 4: return .string(string())
        case 5:
            let count = Int.random(in: 0...6, using: &random)
            return .array((0..<count).map { _ in value(depth: depth + 1) })
        default:
            var members = JSONObject()
            for _ in 0..<Int.random(in: 0...6, using: &random) { members[string()] = value(depth: depth + 1) }
            return .object(members)
        }
    }

    /// A finite double, drawn from several distributions that stress different serializer and parser paths.
    mutating func number() -> Double {
        switch Int.random(in: 0..<7, using: &random) {
        case 0: return Double(Int.random(in: -1000...1000, using: &random))
        case 1: return Double(Int64.random(in: -(1 << 53)...(1 << 53), using: &random))
        case 2: return Double.random(in: -1...1, using: &random)
        case 3: return [0.0, -0.0, 0.1, 1e-7, 1e21, Double.leastNonzeroMagnitude, -Double.greatestFiniteMagnitude,
                        Double.leastNormalMagnitude, 9_007_199_254_740_992, -9_007_199_254_740_992]
            .randomElement(using: &random)!
        case 4:
            // A short decimal, like the numbers people write: up to 6 digits and a small exponent.
            let digits = Double(Int.random(in: 0...999_999, using: &random))
            return digits * [1e-6, 1e-3, 1e-2, 1, 1e3, 1e10].randomElement(using: &random)!
        default:
            // Any finite bit pattern: subnormals, huge magnitudes, 17-digit mantissas.
            while true {
                let candidate = Double(bitPattern: random.next())
                if candidate.isFinite { return candidate }
            }
        }
    }

    mutating func string() -> String {
        var scalars = String.UnicodeScalarView()
        for _ in 0..<Int.random(in: 0...12, using: &random) { scalars.append(scalar()) }
        return String(scalars)
    }

    mutating func scalar() -> Unicode.Scalar {
        let value: UInt32
        switch Int.random(in: 0..<10, using: &random) {
        case 0: value = UInt32.random(in: 0...0x1F, using: &random)  // control characters
        case 1: value = [0x22, 0x5C, 0x2F, 0x7F].randomElement(using: &random)!  // " \ / DEL
        case 2: value = UInt32.random(in: 0x80...0x7FF, using: &random)
        case 3: value = UInt32.random(in: 0x800...0xD7FF, using: &random)
        case 4: value = UInt32.random(in: 0xE000...0xFFFF, using: &random)
        case 5: value = UInt32.random(in: 0x10000...0x10FFFF, using: &random)
        default: value = UInt32.random(in: 0x20...0x7E, using: &random)
        }
        return Unicode.Scalar(value)!
    }
}
