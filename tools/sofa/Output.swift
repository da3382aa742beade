import ArgumentParser
import Glibc
import Sofa
import SofaStorage

/// The arguments every database command shares: the directory, and `--json`.
struct DatabaseArguments: ParsableArguments {
    @Argument(help: "The database directory (NAME.sofa).")
    var database: String

    @Flag(help: "Print one JSON object per line instead of tables.")
    var json = false

    /// Opens the database, read-only unless `writable`; a missing directory is reported as such rather than as a
    /// missing `docs` file (unless `create`, which makes a new database).
    func open(writable: Bool = false, create: Bool = false, durability: Durability = .full) throws -> Database {
        var info = stat()
        guard (create && writable) || (stat(database, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR) else {
            throw SofaError(.notFound, "no database directory here", path: database)
        }
        return try Database(path: database, options: DatabaseOptions(readOnly: !writable, durability: durability))
    }
}

/// Buffered standard output (a dump of a million documents should not make a million `write` calls), with
/// the two shapes every command prints: aligned tables and JSON lines.
enum Output {
    nonisolated(unsafe) private static var buffer: [UInt8] = []

    /// Appends `text` and a newline.
    static func line(_ text: String) {
        buffer.append(contentsOf: text.utf8)
        buffer.append(0x0A)
        if buffer.count >= 1 << 16 { flush() }
    }

    /// One JSON object on one line.
    static func json(_ object: JSON) {
        // Cannot fail for the values the commands build (no NaN, shallow nesting); description never throws.
        line(object.description)
    }

    /// Writes out everything buffered.
    static func flush() {
        var written = 0
        while written < buffer.count {
            let n = buffer.withUnsafeBytes { write(1, $0.baseAddress! + written, $0.count - written) }
            if n <= 0 { break }  // stdout closed (a pipe into `head`): nothing more to do
            written += n
        }
        buffer.removeAll(keepingCapacity: true)
    }

    /// A table: left-aligned first column, the others right-aligned unless named in `leftAligned`.
    static func table(_ header: [String], _ rows: [[String]], leftAligned: Set<Int> = [0]) {
        let all = [header] + rows
        let widths = header.indices.map { c in all.map { $0[c].count }.max() ?? 0 }
        for (n, row) in all.enumerated() {
            let cells = row.enumerated().map { c, cell in
                let pad = String(repeating: " ", count: widths[c] - cell.count)
                return leftAligned.contains(c) ? cell + pad : pad + cell
            }
            var text = cells.joined(separator: "  ")
            while text.last == " " { text.removeLast() }
            line(text)
            if n == 0 { line(widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ")) }
        }
    }

    /// Writes one line to standard error at once (warnings, the final error).
    static func error(_ text: String) {
        flush()
        var line = text.hasSuffix("\n") ? text : text + "\n"
        line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    }
}

/// Progress of long work on standard error, only when it is a terminal: redrawn in place at most ten times a
/// second, erased when done.
struct Progress {
    private let label: String
    private let total: Int?
    private let enabled = isatty(2) == 1
    private var lastDraw = 0.0
    private let start = Stopwatch.now()

    /// Progress of `label`, out of `total` units when known.
    init(_ label: String, total: Int? = nil) {
        self.label = label
        self.total = total
    }

    /// Reports `done` units so far.
    mutating func update(_ done: Int) {
        guard enabled else { return }
        let now = Stopwatch.now()
        guard now - lastDraw >= 0.1 else { return }
        lastDraw = now
        let rate = Double(done) / max(now - start, 1e-6)
        var text = "\r\(label): \(grouped(done))"
        if let total, total > 0 { text += " of \(grouped(total)) (\(done * 100 / total) %)" }
        text += ", \(grouped(Int(rate)))/s   "
        text.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    }

    /// Shows a status for work whose progress cannot be counted (a verify or a compaction inside the library).
    func note(_ text: String) {
        guard enabled else { return }
        let line = "\r\(label): \(text)"
        _ = line.withCString { write(2, $0, strlen($0)) }
    }

    /// Erases the progress line.
    func finish() {
        guard enabled else { return }
        let erase = "\r\u{1B}[K"
        _ = erase.withCString { write(2, $0, strlen($0)) }
    }
}

/// Text for a key in a dump: the string when it is printable UTF-8, else hex.
func printableKey(_ bytes: [UInt8]) -> String {
    if let text = String(validating: bytes, as: UTF8.self), text.unicodeScalars.allSatisfy({ $0.value >= 0x20 }) {
        return text
    }
    return "0x" + bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
}

/// A by-sequence key (8 bytes big-endian) as its number, or hex when it is not 8 bytes.
func sequenceKey(_ bytes: [UInt8]) -> String {
    guard bytes.count == 8 else { return printableKey(bytes) }
    return String(bytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
}

/// `0.123` as "12.3 %".
func percent(_ fraction: Double) -> String { format1(fraction * 100) + " %" }

/// A number as JSON.
func number<T: BinaryInteger>(_ n: T) -> JSON { .number(Double(n)) }

/// A ratio as JSON, rounded to three decimals so output is stable.
func ratio(_ x: Double) -> JSON { .number((x * 1000).rounded() / 1000) }
