/// Runs W1–W7 of shared/bench/WORKLOADS.md on one engine, in the child process dedicated to that engine,
/// and emits a ``ChildRecord`` per figure and per answer.
///
/// Order: W1 (always: everything else reads the index it builds), W5, W3, W2, W4, W6, W7. W6 runs before
/// W7 because gen.py's W7 answer includes W6's new values; selecting W7 therefore runs W6 too (reported
/// only if selected). Only the engine calls are inside the timed regions; the checksum work done per row
/// visited is identical for every engine.
struct WorkloadRunner {
    let data: DataSet
    let engineType: any Engine.Type
    /// The engine's own directory; emptied before W1.
    let directory: String
    /// The workloads to report, e.g. ["W1", "W2"].
    let selected: Set<String>
    /// Whether to attempt the cold-cache W7.
    let cold: Bool
    /// Receives each record as soon as it is known.
    let emit: (ChildRecord) -> Void

    /// Runs the selected workloads; throws only on engine errors (a wrong answer is a ``Check``, not an error).
    func run() throws {
        emit(.configuration(engineType.configuration))
        try SystemProbe.emptyDirectory(directory)
        // The data set is loaded; from here on the peak resident set is the engine's (plus the loaded rows).
        let baseline = Double(SystemProbe.statusKB("VmRSS") ?? 0) / 1024
        let peakReset = SystemProbe.resetPeakRSS()

        var engine = try engineType.init(directory: directory)
        try build(engine)
        if selected.contains("W5") { try countAll(engine) }
        if selected.contains("W3") { try scan(engine) }
        if selected.contains("W2") { try ranges(engine) }
        if selected.contains("W4") { try reduces(engine) }
        if selected.contains("W6") || selected.contains("W7") { try update(engine) }
        if selected.contains("W7") {
            engine = try reopen(engine, cold: false)
            if cold {
                engine = try reopen(engine, cold: true)
            }
        }
        try engine.close()

        emit(.measurement(Measurement(workload: "RSS", metric: "data set loaded", value: baseline, unit: "MiB")))
        if peakReset, let peak = SystemProbe.statusKB("VmHWM") {
            emit(.measurement(Measurement(workload: "RSS", metric: "peak", value: Double(peak) / 1024, unit: "MiB")))
        }
    }

    // MARK: - Workloads

    private func build(_ engine: any Engine) throws {
        let rows = data.rows
        let start = SystemProbe.now()
        try engine.build(rows: rows)
        let seconds = elapsed(since: start)
        guard selected.contains("W1") else { return }
        record("W1", "build", Double(rows.count) / seconds, "rows/s")
        record("W1", "build time", seconds, "s")
        let files = SystemProbe.sizes(of: engine.filesOnDisk)
        record("W1", "size on disk (st_size)", mebibytes(files.logical), "MiB")
        record("W1", "size on disk (allocated)", mebibytes(files.allocated), "MiB")
        record("W1", "main file", mebibytes(SystemProbe.sizes(of: [engine.filesOnDisk[0]]).logical), "MiB")
    }

    private func countAll(_ engine: any Engine) throws {
        // A single call is ~0.1 µs for a stored count, near the clock's resolution: take the median of 11.
        var times: [Double] = []
        var count = 0
        for _ in 0 ..< 11 {
            let start = SystemProbe.now()
            count = try engine.countAll()
            times.append(elapsed(since: start) * 1e6)
        }
        record("W5", "count all (median of 11)", times.sorted()[times.count / 2], "µs")
        check("W5", "rows=\(count)")
    }

    private func scan(_ engine: any Engine) throws {
        var rows = 0
        var sum = 0
        var bytes = 0
        var touched = 0
        let start = SystemProbe.now()
        try engine.scan { key, value in
            rows += 1
            sum += Int(value)
            bytes += key.count
            // The doc ID's last byte: reading it makes every engine deliver the key's bytes, not just its length.
            touched &+= Int(key[key.count - 2])
        }
        record("W3", "scan", Double(rows) / elapsed(since: start), "rows/s")
        keepAlive(touched)
        check("W3", "rows=\(rows) sum=\(sum) bytes=\(bytes)")
    }

    private func ranges(_ engine: any Engine) throws {
        let starts = data.rangeStarts
        // The timed pass touches each row's key length, last doc-ID byte and value, a few ns per row; the
        // CRC-32 of every doc ID that gen.py's checksum needs (~15 ns per row) would be a tenth of a fast
        // engine's query time, so the answer is computed in a second, untimed pass over the same queries.
        var touched = 0
        var latencies = [UInt64](repeating: 0, count: starts.count)
        let begin = SystemProbe.now()
        for q in 0 ..< starts.count {
            let start = SystemProbe.now()
            try engine.range(from: starts.key(q), limit: 20) { key, value in
                touched &+= key.count &+ Int(key[key.count - 2]) &+ Int(value)
            }
            latencies[q] = SystemProbe.now() - start
        }
        let seconds = elapsed(since: begin)
        latencies.sort()
        record("W2", "range query (20 rows)", Double(starts.count) / seconds, "queries/s")
        record("W2", "p50", Double(latencies[latencies.count / 2]) / 1000, "µs")
        record("W2", "p99", Double(latencies[latencies.count * 99 / 100]) / 1000, "µs")

        var hash = RowHash()
        var checkTouched = 0
        for q in 0 ..< starts.count {
            try engine.range(from: starts.key(q), limit: 20) { key, value in
                checkTouched &+= key.count &+ Int(key[key.count - 2]) &+ Int(value)
                hash.add(key: key, value: value)
            }
        }
        // Both passes must have seen the same rows; otherwise the timed pass measured something else.
        check("W2", checkTouched == touched ? hash.text : hash.text + " (timed pass differs)")
    }

    private func reduces(_ engine: any Engine) throws {
        var rows = 0
        var sum = 0
        let start = SystemProbe.now()
        for r in 0 ..< data.reduceLows.count {
            let result = try engine.rangeReduce(low: data.reduceLows.key(r), high: data.reduceHighs.key(r))
            rows += result.count
            sum += result.sum
        }
        record("W4", "range reduce (~1% each)", Double(data.reduceLows.count) / elapsed(since: start), "ranges/s")
        check("W4", "rows=\(rows) sum=\(sum)")
    }

    private func update(_ engine: any Engine) throws {
        let changes = data.updates
        let start = SystemProbe.now()
        try engine.update(changes)
        let seconds = elapsed(since: start)
        guard selected.contains("W6") else { return }
        record("W6", "update (1% of rows)", Double(changes.count) / seconds, "rows/s")
        // The answer is the whole index after the update, read back outside the timed region.
        var rows = 0
        var sum = 0
        try engine.scan { _, value in
            rows += 1
            sum += Int(value)
        }
        check("W6", "rows=\(rows) sum=\(sum)")
    }

    /// W7: closes `engine`, optionally evicts its files from the page cache, reopens it and runs the first
    /// W2 query; returns the reopened engine.
    private func reopen(_ engine: any Engine, cold: Bool) throws -> any Engine {
        let label = cold ? "cold" : "warm"
        try engine.close()
        let files = engine.filesOnDisk
        if cold {
            SystemProbe.evictFromPageCache(files)
            record("W7", "resident after eviction", SystemProbe.residentFraction(files) * 100, "%")
        }
        let openStart = SystemProbe.now()
        let reopened = try engineType.init(directory: directory)
        let openTime = elapsed(since: openStart)
        var hash = RowHash()
        let queryStart = SystemProbe.now()
        try reopened.range(from: data.rangeStarts.key(0), limit: 20) { key, value in
            hash.add(key: key, value: value)
        }
        let queryTime = elapsed(since: queryStart)
        record("W7", "open (\(label))", openTime * 1e6, "µs")
        record("W7", "first query (\(label))", queryTime * 1e6, "µs")
        check("W7", hash.text, label: "W7 \(label)")
        return reopened
    }

    // MARK: - Records

    private func record(_ workload: String, _ metric: String, _ value: Double, _ unit: String) {
        emit(.measurement(Measurement(workload: workload, metric: metric, value: value, unit: unit)))
    }

    private func check(_ workload: String, _ got: String, label: String? = nil) {
        emit(.check(Check(workload: label ?? workload, got: got, expected: data.expected.answers[workload] ?? "?")))
    }

    /// Consumes a value so that the optimizer cannot drop the work that produced it.
    @inline(never)
    private func keepAlive(_ value: Int) {
        if value == Int.min {
            emit(.configuration("unreachable"))
        }
    }

    private func elapsed(since start: UInt64) -> Double {
        Double(SystemProbe.now() - start) / 1e9
    }

    private func mebibytes(_ bytes: Int) -> Double {
        Double(bytes) / 1_048_576
    }
}
