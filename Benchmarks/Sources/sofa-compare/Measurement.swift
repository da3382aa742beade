/// One figure from one engine: what a child process reports and the parent tabulates.
struct Measurement {
    /// "W1" … "W7", or "RSS".
    let workload: String
    /// What was measured, e.g. `rows/s` of `build`, `p50`: see ``metric``.
    let metric: String
    /// The figure, in ``unit``.
    let value: Double
    /// `rows/s`, `queries/s`, `ranges/s`, `µs`, `MiB`, `s` or `%`.
    let unit: String

    /// Whether a larger value is better (throughputs) or worse (times, sizes, memory).
    var higherIsBetter: Bool {
        unit.hasSuffix("/s")
    }
}

/// An engine's answer to one workload compared with gen.py's.
struct Check {
    /// "W2" … "W7" (W7 has a warm and a cold answer: "W7 warm", "W7 cold").
    let workload: String
    /// The engine's answer in expected.json's format.
    let got: String
    /// gen.py's answer.
    let expected: String

    /// Whether the engine answered correctly.
    var ok: Bool {
        got == expected
    }
}

/// The line protocol between the child (`--engine-child`) and the parent: one record per line, fields
/// separated by tabs (no field contains a tab: names are fixed, answers are `rows=… h=…` text).
enum ChildRecord {
    case measurement(Measurement)
    case check(Check)
    /// The engine's one-line configuration.
    case configuration(String)

    /// The line the child prints.
    var line: String {
        switch self {
        case .measurement(let m):
            return ["M", m.workload, m.metric, String(m.value), m.unit].joined(separator: "\t")
        case .check(let c):
            return ["C", c.workload, c.got, c.expected].joined(separator: "\t")
        case .configuration(let text):
            return "I\t" + text
        }
    }

    /// Parses a line the child printed; nil for anything else (the child's own diagnostics go to stderr).
    init?(line: Substring) {
        let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
        switch fields.first {
        case "M" where fields.count == 5:
            guard let value = Double(fields[3]) else { return nil }
            self = .measurement(Measurement(workload: fields[1], metric: fields[2], value: value, unit: fields[4]))
        case "C" where fields.count == 4:
            self = .check(Check(workload: fields[1], got: fields[2], expected: fields[3]))
        case "I" where fields.count == 2:
            self = .configuration(fields[1])
        default:
            return nil
        }
    }
}

/// Formats numbers for the Markdown table without Foundation: thousands separators for large values,
/// three significant digits for small ones.
enum NumberFormat {
    /// `1234567.8` → `1,234,568`; `12.345` → `12.3`; `0.01234` → `0.0123`.
    static func figure(_ value: Double) -> String {
        guard value.isFinite else { return String(value) }
        let magnitude = abs(value)
        if magnitude >= 100 || magnitude == 0 {
            return grouped(Int(value.rounded()))
        }
        var decimals = 1
        var scaled = magnitude
        while scaled < 10 && decimals < 6 {
            scaled *= 10
            decimals += 1
        }
        return fixed(value, decimals: decimals)
    }

    /// A ratio with two decimals (`0.87`), or three significant digits if smaller.
    static func ratio(_ value: Double) -> String {
        guard value.isFinite else { return "—" }
        return value >= 0.1 ? fixed(value, decimals: 2) : figure(value)
    }

    /// `value` rounded to `decimals` places.
    static func fixed(_ value: Double, decimals: Int) -> String {
        var scale = 1.0
        for _ in 0 ..< decimals {
            scale *= 10
        }
        let scaled = Int((abs(value) * scale).rounded())
        let whole = scaled / Int(scale)
        let fraction = String(scaled % Int(scale))
        let sign = value < 0 && scaled != 0 ? "-" : ""
        guard decimals > 0 else { return sign + grouped(whole) }
        return sign + grouped(whole) + "." + String(repeating: "0", count: decimals - fraction.count) + fraction
    }

    /// `1234567` → `1,234,567`.
    static func grouped(_ value: Int) -> String {
        let digits = String(abs(value))
        var out = ""
        for (i, digit) in digits.enumerated() {
            if i > 0 && (digits.count - i) % 3 == 0 {
                out.append(",")
            }
            out.append(digit)
        }
        return (value < 0 ? "-" : "") + out
    }
}
