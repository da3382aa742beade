import Glibc
import Sofa

/// The views suite (`--suite views`): issue 5's pipeline-level benchmark. Documents are stored first
/// (untimed), then each engine does a view's whole job — map every stored document, collate keys, write the
/// index, answer queries — against SQLite doing the same job the way Couchbase Lite 1.x did.
///
/// The view is WORKLOADS.md's "by hierarchy": key `[genre, artist, album, title]`, value `duration`, reduce
/// `.sum`. Workloads (each engine in its own child process, as for the engine suite):
///
/// - V1: build the index from the stored documents, one durable commit (rows/s);
/// - V2: W2's 100,000 range queries, 20 rows from a q2.tsv key on, into result rows with key, value and doc ID;
/// - V4: W4's 1,000 ranges of q4.tsv (inclusive), each reduced to its sum;
/// - VG: `groupLevel` 1 and 2 over the whole index, into (group key, sum) rows;
/// - V6: u6.tsv's 1 % of the documents changed (untimed), then the first range query, which brings the index up
///   to date first (the incremental update W6 measures at the engine level): wall time, and CPU time over all
///   threads;
/// - RSS: the child's peak resident set from after the documents were stored.
///
/// Rows sort in CouchDB's collation (ICU for strings), not in gen.py's code-point order, so expected.json's
/// W2/W4 checksums do not apply: those answers are checked across engines instead (every engine must give
/// SQLite's answer, the reference implementation of the order); totals that do not depend on the order
/// (row count, sum of durations before and after V6, the number of genres) are checked against expected.json.
enum ViewsSuite {
    /// The workloads of the suite, in run order.
    static let workloads = ["V1", "V2", "V4", "VG", "V6"]

    /// The engine whose answers the others must reproduce where expected.json has none.
    static let referenceEngine = "sqlite"

    /// The `expected` text of a check that is decided across engines (``crossCheck(_:)``).
    static let sameAsReference = "=sqlite"

    /// Replaces every ``sameAsReference`` expectation by the reference engine's answer from the same run
    /// number (or marks it unanswered when the reference did not run).
    static func crossCheck(_ runs: [String: [[ChildRecord]]]) -> [String: [[ChildRecord]]] {
        let reference = runs[referenceEngine] ?? []
        var answers: [[String: String]] = reference.map { records in
            var byLabel: [String: String] = [:]
            for case .check(let check) in records {
                byLabel[check.workload] = check.got
            }
            return byLabel
        }
        if answers.isEmpty { answers = [[:]] }
        return runs.mapValues { engineRuns in
            engineRuns.enumerated().map { run, records in
                records.map { record in
                    guard case .check(let check) = record, check.expected == sameAsReference else { return record }
                    let expected = answers[min(run, answers.count - 1)][check.workload]
                        ?? "(no \(referenceEngine) answer)"
                    return .check(Check(workload: check.workload, got: check.got, expected: expected))
                }
            }
        }
    }
}

/// An engine that stores documents and maintains the "by hierarchy" view over them.
///
/// One instance is one open database in `directory`, used from one thread. Keys and values cross this
/// interface as ``JSON``: both engines hand out what an app would get from a query.
protocol ViewsEngine: AnyObject {
    /// The lowercase name used on the command line and in reports.
    static var name: String { get }

    /// A one-line description of what is measured.
    static var configuration: String { get }

    /// Opens (creating) the database in `directory`, which exists and is empty.
    init(directory: String) throws

    /// Stores every document of `documents` (untimed), in one or a few durable transactions.
    func load(_ documents: TrackDocuments) throws

    /// V1: brings the view's index up to date with every stored document (durably); returns its row count.
    func buildIndex() throws -> Int

    /// V2 (and V6's first query, with the index brought up to date first): the first `limit` rows with
    /// key ≥ `startKey`, in key then doc ID order.
    func query(from startKey: JSON, limit: Int) throws -> [ViewRow]

    /// V4: the sum of the values of the rows with `low` ≤ key ≤ `high`.
    func rangeSum(low: JSON, high: JSON) throws -> Double

    /// The number of rows and the sum of all values (the reduce of the whole index).
    func total() throws -> (rows: Int, sum: Double)

    /// VG: the rows grouped by the first `level` items of their keys, each with its sum, in key order.
    func group(level: Int) throws -> [ViewRow]

    /// V6's untimed part: sets the `duration` of each named document and stores it (one durable transaction).
    func change(_ changes: [(docID: String, duration: Int)]) throws

    /// Releases everything. Called once.
    func close() throws
}

/// One result row as both engines deliver it: key, value and (for map rows) the doc ID.
struct ViewRow {
    /// The emitted key, or the group key.
    let key: JSON
    /// The emitted value, or the group's sum.
    let value: JSON?
    /// The emitting document; nil for grouped rows.
    let docID: String?
}

/// The views engines in report order (Sofa first, so the ratios are Sofa over SQLite).
enum ViewsEngineRegistry {
    /// Every views engine.
    static var all: [any ViewsEngine.Type] { [SofaViewsEngine.self, SQLiteViewsEngine.self] }

    /// The engine named `name`, if there is one.
    static func engine(named name: String) -> (any ViewsEngine.Type)? {
        all.first { $0.name == name }
    }
}

/// The map function of "by hierarchy", shared by every engine so that all map exactly the same way.
enum TrackView {
    /// The view's name.
    static let name = "byHierarchy"

    /// The row a track document emits: key `[genre, artist, album, title]`, value `duration`; nil for
    /// documents of another type.
    @inline(__always)
    static func row(of doc: JSON) -> (key: JSON, value: JSON?)? {
        guard doc["type"] == "track" else { return nil }
        return ([doc["genre"] ?? nil, doc["artist"] ?? nil, doc["album"] ?? nil, doc["title"] ?? nil], doc["duration"])
    }
}

/// docs.jsonl: one JSON object per line, each with its `_id`, in doc order (line i is rows.tsv's row i).
struct TrackDocuments {
    /// The file's bytes.
    let bytes: [UInt8]
    /// The byte range of each line, without its newline.
    let lines: [Range<Int>]

    /// Reads `directory/docs.jsonl`.
    /// - Throws: ``CompareError`` when it is missing or does not end with a newline.
    init(directory: String) throws {
        bytes = try readFile(directory + "/docs.jsonl")
        var lines: [Range<Int>] = []
        var start = 0
        for i in 0 ..< bytes.count where bytes[i] == UInt8(ascii: "\n") {
            lines.append(start ..< i)
            start = i + 1
        }
        guard start == bytes.count else { throw CompareError("docs.jsonl does not end with a newline") }
        self.lines = lines
    }

    /// The number of documents.
    var count: Int { lines.count }

    /// Calls `body` with each document's JSON text, in doc order.
    func forEach(_ body: (UnsafeRawBufferPointer) throws -> Void) rethrows {
        try bytes.withUnsafeBytes { file in
            for line in lines {
                try body(UnsafeRawBufferPointer(rebasing: file[line]))
            }
        }
    }

    /// The ID of the document on line `index`, as gen.py writes it.
    static func documentID(ofLine index: Int) -> String {
        let digits = String(index)
        return "track-" + String(repeating: "0", count: max(0, 8 - digits.count)) + digits
    }
}

/// Runs the views workloads on one engine in its child process and emits records as the engine suite does.
struct ViewsRunner {
    let directory: String
    let dataDirectory: String
    let engineType: any ViewsEngine.Type
    /// The workloads to report (V1 always runs: the others read its index).
    let selected: Set<String>
    let emit: (ChildRecord) -> Void

    /// Loads the documents and queries, stores the documents, then runs the selected workloads.
    func run() throws {
        emit(.configuration(engineType.configuration))
        try SystemProbe.emptyDirectory(directory)
        let expected = try Expected(json: try readFile(dataDirectory + "/expected.json"))
        let documents = try TrackDocuments(directory: dataDirectory)
        guard documents.count == expected.n else {
            throw CompareError("docs.jsonl has \(documents.count) lines but expected.json says n=\(expected.n)")
        }
        let starts = try Self.keys(dataDirectory + "/q2.tsv", fields: 4, parts: [0 ..< 4])
        let bounds = try Self.keys(dataDirectory + "/q4.tsv", fields: 8, parts: [0 ..< 4, 4 ..< 8])
        let changes = try Self.changes(dataDirectory + "/u6.tsv", documents: documents.count)

        let engine = try engineType.init(directory: directory)
        let loadStart = SystemProbe.now()
        try engine.load(documents)
        log("sofa-compare: \(engineType.name): stored \(documents.count) documents in "
            + NumberFormat.fixed(elapsed(since: loadStart), decimals: 1) + " s (untimed)")
        let baseline = Double(SystemProbe.statusKB("VmRSS") ?? 0) / 1024
        let peakReset = SystemProbe.resetPeakRSS()

        // V1
        let buildStart = SystemProbe.now()
        let cpuStart = ViewsRunner.cpuSeconds()
        let rowCount = try engine.buildIndex()
        let buildTime = elapsed(since: buildStart)
        let cpuTime = ViewsRunner.cpuSeconds() - cpuStart
        record("V1", "index build", Double(rowCount) / buildTime, "rows/s")
        record("V1", "build time", buildTime, "s")
        // CPU time over all threads: what the build costs, less exposed than wall time to other processes.
        record("V1", "CPU time (user + system, all threads)", cpuTime, "s")
        record("V1", "rows per CPU-second", Double(rowCount) / cpuTime, "rows/s")
        let total = try engine.total()
        check("V1", "rows=\(total.rows) sum=\(Int(total.sum))", expected: expected.answers["W3"].map(rowsAndSum))

        if selected.contains("V2") { try ranges(engine, starts: starts[0]) }
        if selected.contains("V4") { try reduces(engine, lows: bounds[0], highs: bounds[1]) }
        if selected.contains("VG") {
            try group(engine, level: 1)
            try group(engine, level: 2)
        }
        if selected.contains("V6") {
            try update(engine, changes: changes, firstQuery: starts[0][0], expected: expected)
        }
        try engine.close()

        record("RSS", "documents stored", baseline, "MiB")
        if peakReset, let peak = SystemProbe.statusKB("VmHWM") {
            record("RSS", "peak from the build on", Double(peak) / 1024, "MiB")
        }
    }

    // MARK: - Workloads

    private func ranges(_ engine: any ViewsEngine, starts: [JSON]) throws {
        var latencies = [UInt64](repeating: 0, count: starts.count)
        var touched = 0
        let begin = SystemProbe.now()
        for q in 0 ..< starts.count {
            let start = SystemProbe.now()
            let rows = try engine.query(from: starts[q], limit: 20)
            latencies[q] = SystemProbe.now() - start
            touched &+= rows.count
        }
        let seconds = elapsed(since: begin)
        latencies.sort()
        record("V2", "range query (20 rows)", Double(starts.count) / seconds, "queries/s")
        record("V2", "p50", Double(latencies[latencies.count / 2]) / 1000, "µs")
        record("V2", "p99", Double(latencies[latencies.count * 99 / 100]) / 1000, "µs")
        // The answer: every row of every query folded into a hash, from an untimed second pass.
        var hash = ViewRowHash()
        for start in starts {
            for row in try engine.query(from: start, limit: 20) {
                hash.add(row)
            }
        }
        check("V2", hash.rows == touched ? hash.text : hash.text + " (timed pass differs)", expected: nil)
    }

    private func reduces(_ engine: any ViewsEngine, lows: [JSON], highs: [JSON]) throws {
        var sum = 0.0
        let start = SystemProbe.now()
        for r in 0 ..< lows.count {
            sum += try engine.rangeSum(low: lows[r], high: highs[r])
        }
        record("V4", "range reduce (~1% each)", Double(lows.count) / elapsed(since: start), "ranges/s")
        check("V4", "ranges=\(lows.count) sum=\(Int(sum))", expected: nil)
    }

    private func group(_ engine: any ViewsEngine, level: Int) throws {
        // Sofa answers in milliseconds, SQLite in seconds: repeat until 0.5 s have passed (3 to 11 runs), median.
        var times: [Double] = []
        var rows: [ViewRow] = []
        let begin = SystemProbe.now()
        repeat {
            let start = SystemProbe.now()
            rows = try engine.group(level: level)
            times.append(elapsed(since: start) * 1000)
        } while times.count < 11 && (times.count < 3 || elapsed(since: begin) < 0.5)
        record("VG", "groupLevel \(level) (median of 3–11 runs)", times.sorted()[times.count / 2], "ms")
        var hash = ViewRowHash()
        rows.forEach { hash.add($0) }
        check("VG\(level)", "groups=\(rows.count) " + hash.text, expected: nil)
    }

    private func update(_ engine: any ViewsEngine, changes: [(docID: String, duration: Int)], firstQuery: JSON,
                        expected: Expected) throws {
        try engine.change(changes)
        let start = SystemProbe.now()
        let cpuStart = ViewsRunner.cpuSeconds()
        _ = try engine.query(from: firstQuery, limit: 20)
        let seconds = elapsed(since: start)
        let cpuTime = ViewsRunner.cpuSeconds() - cpuStart
        record("V6", "changed docs → first query", Double(changes.count) / seconds, "docs/s")
        record("V6", "first query after the change", seconds * 1000, "ms")
        // As for V1: CPU time over all threads is less exposed to other processes than wall time.
        record("V6", "CPU time (user + system, all threads)", cpuTime * 1000, "ms")
        let total = try engine.total()
        check("V6", "rows=\(total.rows) sum=\(Int(total.sum))", expected: expected.answers["W6"].map(rowsAndSum))
    }

    // MARK: - Input

    /// JSON array keys made of the tab-separated fields in each range of `parts`, one array per range per line.
    private static func keys(_ path: String, fields: Int, parts: [Range<Int>]) throws -> [[JSON]] {
        let text = String(decoding: try readFile(path), as: UTF8.self)
        var keys = parts.map { _ in [JSON]() }
        for (number, line) in text.split(separator: "\n").enumerated() {
            let items = line.split(separator: "\t", omittingEmptySubsequences: false)
            guard items.count == fields else { throw CompareError("\(path) line \(number + 1): not \(fields) fields") }
            for (p, range) in parts.enumerated() {
                keys[p].append(.array(items[range].map { .string(String($0)) }))
            }
        }
        return keys
    }

    /// u6.tsv's (row index, new duration) lines as (doc ID, new duration).
    private static func changes(_ path: String, documents: Int) throws -> [(docID: String, duration: Int)] {
        let text = String(decoding: try readFile(path), as: UTF8.self)
        return try text.split(separator: "\n").map { line in
            let items = line.split(separator: "\t")
            guard items.count == 2, let row = Int(items[0]), let duration = Int(items[1]), row >= 0, row < documents
            else { throw CompareError("\(path): bad line \(line)") }
            return (TrackDocuments.documentID(ofLine: row), duration)
        }
    }

    // MARK: - Records

    /// expected.json's `rows=N sum=S…` prefix (W3 and W6 carry more after it for other workloads).
    private func rowsAndSum(_ answer: String) -> String {
        answer.split(separator: " ").prefix(2).joined(separator: " ")
    }

    private func record(_ workload: String, _ metric: String, _ value: Double, _ unit: String) {
        emit(.measurement(Measurement(workload: workload, metric: metric, value: value, unit: unit)))
    }

    /// An answer, checked against `expected` or, when nil, against the reference engine's.
    private func check(_ workload: String, _ got: String, expected: String?) {
        emit(.check(Check(workload: workload, got: got, expected: expected ?? ViewsSuite.sameAsReference)))
    }

    /// User plus system CPU time of this process (every thread) so far, in seconds.
    static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
            + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }

    private func elapsed(since start: UInt64) -> Double {
        Double(SystemProbe.now() - start) / 1e9
    }

    private func log(_ message: String) {
        var line = message + "\n"
        line.withUTF8 { _ = write(STDERR_FILENO, $0.baseAddress, $0.count) }
    }
}

/// An FNV-1a fold of result rows (key text, doc ID, value): equal for two engines that return the same rows in
/// the same order.
struct ViewRowHash {
    private(set) var rows = 0
    private var value: UInt64 = 0xCBF2_9CE4_8422_2325

    /// Folds in one row.
    mutating func add(_ row: ViewRow) {
        fold(row.key.description)
        fold(row.docID ?? "-")
        // Values are whole numbers (durations and their sums); render them as integers on every engine.
        fold(row.value?.doubleValue.map { String(Int($0)) } ?? row.value?.description ?? "none")
        rows += 1
    }

    private mutating func fold(_ text: String) {
        for byte in text.utf8 {
            value = (value ^ UInt64(byte)) &* 0x100_0000_01B3
        }
        value = (value ^ 0xFF) &* 0x100_0000_01B3
    }

    /// `rows=N h=<16 hex digits>`.
    var text: String {
        let hex = String(value, radix: 16)
        return "rows=\(rows) h=" + String(repeating: "0", count: 16 - hex.count) + hex
    }
}

/// Deletes `path` and everything under it (the Sofa database is a directory with a `views/` subdirectory).
func removeTree(_ path: String) {
    if let dir = opendir(path) {
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(cString: $0.bindMemory(to: CChar.self).baseAddress!)
            }
            guard name != "." && name != ".." else { continue }
            removeTree(path + "/" + name)
        }
        closedir(dir)
        rmdir(path)
    } else {
        unlink(path)
    }
}
