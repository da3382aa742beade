import Glibc
import Sofa

/// Runs the documents suite, D1–D5, on one ``DocumentsEngine`` in the child process dedicated to it, and emits
/// a ``ChildRecord`` per figure and per answer.
///
///  - D1 batched puts: every document of the data set, 1,000 per durable commit, in file order.
///  - D5 size: the engine's files right after D1 (SQLite's WAL checkpointed first), in MiB and bytes/doc.
///  - D2 single-document durable commits: ``singleCommits`` new documents, one commit each (p50, p99, commits/s).
///  - D3 random `document(id:)`: ``lookups`` IDs drawn with a fixed seed, each body parsed.
///  - D4 all-documents scan in ID order: rows with IDs (bodies held, not decoded), then rows with parsed bodies.
///
/// D1 always runs (everything else reads what it stores). The answers are computed from the input documents,
/// so a wrong or missing document shows as a MISMATCH; only engine calls are inside the timed regions.
struct DocumentsWorkloads {
    let documents: [BenchDocument]
    let engineType: any DocumentsEngine.Type
    /// The engine's own directory; emptied before D1.
    let directory: String
    /// The workloads to report, e.g. ["D1", "D3"].
    let selected: Set<String>
    /// Receives each record as soon as it is known.
    let emit: (ChildRecord) -> Void

    /// Documents per D1 commit.
    static let batchSize = 1_000
    /// D2's commits: enough for a stable p99 at ~100 µs–1 ms each.
    static let singleCommits = 2_000
    /// D3's lookups.
    static let lookups = 200_000

    static let workloads = ["D1", "D2", "D3", "D4", "D5"]

    /// Runs the selected workloads; throws only on engine errors.
    func run() throws {
        emit(.configuration(engineType.configuration))
        try SystemProbe.emptyDirectory(directory)
        let baseline = Double(SystemProbe.statusKB("VmRSS") ?? 0) / 1024
        let peakReset = SystemProbe.resetPeakRSS()

        let engine = try engineType.init(directory: directory)
        try load(engine)
        if selected.contains("D5") { try size(engine) }
        // Documents in the database from here on: the loaded ones and D2's.
        var stored = documents
        if selected.contains("D2") { stored += try singles(engine) }
        if selected.contains("D3") { try lookUp(engine) }
        if selected.contains("D4") { try scan(engine, expecting: stored) }
        try engine.close()

        emit(.measurement(Measurement(workload: "RSS", metric: "data set loaded", value: baseline, unit: "MiB")))
        if peakReset, let peak = SystemProbe.statusKB("VmHWM") {
            emit(.measurement(Measurement(workload: "RSS", metric: "peak", value: Double(peak) / 1024, unit: "MiB")))
        }
    }

    // MARK: - Workloads

    private func load(_ engine: any DocumentsEngine) throws {
        let start = SystemProbe.now()
        let cpuStart = DocumentsWorkloads.cpuTime()
        var i = 0
        while i < documents.count {
            let end = min(documents.count, i + DocumentsWorkloads.batchSize)
            try engine.putBatch(documents[i ..< end])
            i = end
        }
        let seconds = elapsed(since: start)
        let cpu = DocumentsWorkloads.cpuTime() - cpuStart
        guard selected.contains("D1") else { return }
        record("D1", "batched puts (1,000 per commit)", Double(documents.count) / seconds, "docs/s")
        record("D1", "time per document", seconds / Double(documents.count) * 1e6, "µs")
        record("D1", "CPU time per document", cpu / Double(documents.count) * 1e6, "µs")
    }

    private func size(_ engine: any DocumentsEngine) throws {
        try engine.settle()
        let files = SystemProbe.sizes(of: engine.filesOnDisk)
        record("D5", "size on disk after D1 (st_size)", mebibytes(files.logical), "MiB")
        record("D5", "bytes per document", Double(files.logical) / Double(documents.count), "B")
    }

    /// D2; returns the documents it stored.
    private func singles(_ engine: any DocumentsEngine) throws -> [BenchDocument] {
        let count = DocumentsWorkloads.singleCommits
        // New IDs ("single-000042"), bodies of the first documents: every commit adds one document.
        let added = (0 ..< count).map { j in
            let digits = String(j)
            return BenchDocument(id: "single-" + String(repeating: "0", count: max(0, 6 - digits.count)) + digits,
                                 body: documents[j % documents.count].body)
        }
        var latencies = [UInt64](repeating: 0, count: count)
        let begin = SystemProbe.now()
        let cpuStart = DocumentsWorkloads.cpuTime()
        for j in 0 ..< count {
            let start = SystemProbe.now()
            try engine.putOne(added[j])
            latencies[j] = SystemProbe.now() - start
        }
        let seconds = elapsed(since: begin)
        let cpu = DocumentsWorkloads.cpuTime() - cpuStart
        latencies.sort()
        record("D2", "single-document durable commits", Double(count) / seconds, "commits/s")
        record("D2", "commit p50", Double(latencies[count / 2]) / 1000, "µs")
        record("D2", "commit p99", Double(latencies[count * 99 / 100]) / 1000, "µs")
        // User + system time of the engine's process: the kernel's share of a sync counts, the wait does not.
        record("D2", "CPU time per commit", cpu / Double(count) * 1e6, "µs")
        return added
    }

    private func lookUp(_ engine: any DocumentsEngine) throws {
        var random = SplitMix64(seed: 4)
        let picks = (0 ..< DocumentsWorkloads.lookups).map { _ in
            Int(random.next() % UInt64(documents.count))
        }
        let ids = picks.map { documents[$0].id }
        var found = 0
        var durations = 0
        let start = SystemProbe.now()
        let cpuStart = DocumentsWorkloads.cpuTime()
        for id in ids {
            guard let body = try engine.body(id: id) else { continue }
            found += 1
            durations += body["duration"]?.intValue ?? 0
        }
        record("D3", "random document(id:), body parsed", Double(ids.count) / elapsed(since: start), "gets/s")
        record("D3", "CPU time per get", (DocumentsWorkloads.cpuTime() - cpuStart) / Double(ids.count) * 1e6, "µs")
        let expected = picks.reduce(0) { $0 + (documents[$1].body["duration"]?.intValue ?? 0) }
        check("D3", "found=\(found) durations=\(durations)", expected: "found=\(ids.count) durations=\(expected)")
    }

    private func scan(_ engine: any DocumentsEngine, expecting stored: [BenchDocument]) throws {
        var rows = 0
        var idBytes = 0
        var ordered = true
        var previous: [UInt8] = []
        previous.reserveCapacity(64)
        var start = SystemProbe.now()
        var cpuStart = DocumentsWorkloads.cpuTime()
        try engine.scanIDs { id in
            rows += 1
            // Comparing the ID's bytes with the previous ID's checks the order and makes every engine deliver
            // the whole ID; memcmp keeps this shared per-row work small next to the engines' own.
            var id = id
            id.withUTF8 { utf8 in
                idBytes += utf8.count
                if ordered {
                    let common = min(previous.count, utf8.count)
                    let c = common == 0
                        ? 0 : previous.withUnsafeBytes { memcmp($0.baseAddress!, utf8.baseAddress!, common) }
                    ordered = c < 0 || (c == 0 && previous.count < utf8.count)
                }
                previous.removeAll(keepingCapacity: true)
                previous.append(contentsOf: utf8)
            }
        }
        record("D4", "all-docs scan, rows with ID", Double(rows) / elapsed(since: start), "rows/s")
        record("D4", "CPU time per row (ID)", (DocumentsWorkloads.cpuTime() - cpuStart) / Double(rows) * 1e9, "ns")
        let expectedBytes = stored.reduce(0) { $0 + $1.id.utf8.count }
        check("D4", "rows=\(rows) idBytes=\(idBytes) ordered=\(ordered)",
              expected: "rows=\(stored.count) idBytes=\(expectedBytes) ordered=true")

        rows = 0
        var durations = 0
        start = SystemProbe.now()
        cpuStart = DocumentsWorkloads.cpuTime()
        try engine.scanBodies { _, body in
            rows += 1
            durations += body["duration"]?.intValue ?? 0
        }
        record("D4", "all-docs scan, rows with parsed body", Double(rows) / elapsed(since: start), "rows/s")
        record("D4", "CPU time per row (body)", (DocumentsWorkloads.cpuTime() - cpuStart) / Double(rows) * 1e9, "ns")
        let expectedDurations = stored.reduce(0) { $0 + ($1.body["duration"]?.intValue ?? 0) }
        check("D4", "rows=\(rows) durations=\(durations)",
              expected: "rows=\(stored.count) durations=\(expectedDurations)", label: "D4 bodies")
    }

    // MARK: - Records

    private func record(_ workload: String, _ metric: String, _ value: Double, _ unit: String) {
        emit(.measurement(Measurement(workload: workload, metric: metric, value: value, unit: unit)))
    }

    private func check(_ workload: String, _ got: String, expected: String, label: String? = nil) {
        emit(.check(Check(workload: label ?? workload, got: got, expected: expected)))
    }

    /// User + system CPU seconds of this process. On a machine shared with other work, wall-clock rates fall
    /// with the load while CPU time per operation mostly does not; it leaves out time waiting for `fdatasync`.
    static func cpuTime() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        let user = Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
        return user + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
    }

    private func elapsed(since start: UInt64) -> Double {
        Double(SystemProbe.now() - start) / 1e9
    }

    private func mebibytes(_ bytes: Int) -> Double {
        Double(bytes) / 1_048_576
    }
}

/// SplitMix64 (Steele, Lea, Flood 2014): a seeded generator, so every engine looks up the same IDs.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
