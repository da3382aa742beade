import Glibc
import Sofa
import SofaStorage

/// Wall-clock laps for the timings the demo prints.
struct Stopwatch {
    private var last = Stopwatch.now()

    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// Seconds since the previous lap (or since creation).
    mutating func lap() -> Double {
        let t = Stopwatch.now()
        defer { last = t }
        return t - last
    }
}

/// How the demo prints: text (default) or, with `--json`, one JSON object per step, query and note.
enum DemoOutput {
    /// Set once by `sofa demo --json` before anything is printed (under a lock: the demo's queries run on
    /// other threads too).
    static var json: Bool {
        get { mode.withLock { $0 } }
        set { mode.withLock { $0 = newValue } }
    }
    private static let mode = Lock(false)

    /// A line of text, or in JSON mode `object` (nothing when nil).
    static func say(_ text: String, _ object: JSONObject?) {
        if json {
            if let object { Output.json(.object(object)) }
        } else {
            Output.line(text)
        }
        Output.flush()  // each step shows as it finishes
    }
}

/// One line of progress with its time.
func step(_ text: String, _ seconds: Double) {
    DemoOutput.say("\(text)  [\(formatTime(seconds))]", ["step": JSON(text), "seconds": ratio(seconds)])
}

func formatTime(_ seconds: Double) -> String {
    seconds < 1e-3 ? "\(Int(seconds * 1e6)) µs" : seconds < 1 ? format1(seconds * 1e3) + " ms" : format1(seconds) + " s"
}

/// `x` with one decimal.
func format1(_ x: Double) -> String {
    let tenths = Int((x * 10).rounded())
    return "\(tenths / 10).\(abs(tenths % 10))"
}

/// `n` with thousands separators.
func grouped(_ n: Int) -> String {
    let digits = Array(String(n))
    var out = ""
    for (i, d) in digits.enumerated() {
        if i > 0 && (digits.count - i) % 3 == 0 { out.append(",") }
        out.append(d)
    }
    return out
}

/// Seconds (a reduced JSON number) as hours with one decimal.
func hours(_ seconds: JSON?) -> String { format1((seconds?.doubleValue ?? 0) / 3600) }

/// Prints a titled table with aligned columns (the first left-aligned, the others right-aligned); in JSON mode
/// one object with the title, the time, the column names and the rows' cells.
func table(_ title: String, _ seconds: Double, _ header: [String], _ rows: [[String]]) {
    if DemoOutput.json {
        Output.json(["query": JSON(title), "seconds": ratio(seconds), "columns": .array(header.map { JSON($0) }),
                     "rows": .array(rows.map { .array($0.map { JSON($0) }) })])
        Output.flush()
        return
    }
    Output.line("\(title)  [\(formatTime(seconds))]")
    let all = [header] + rows
    let widths = header.indices.map { c in all.map { $0[c].count }.max() ?? 0 }
    for (n, row) in all.enumerated() {
        let cells = row.enumerated().map { c, cell in
            let pad = String(repeating: " ", count: widths[c] - cell.count)
            return c == 0 ? cell + pad : pad + cell
        }
        Output.line("  " + cells.joined(separator: "  "))
        if n == 0 { Output.line("  " + widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ")) }
    }
    Output.line("")
    Output.flush()
}
