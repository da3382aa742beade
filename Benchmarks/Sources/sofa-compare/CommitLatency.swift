import Glibc

/// C1: the latency of single-row durable commits, the cost a document store pays per `put` outside a batch
/// (issue 4's "single-document durable commits ≥ 1× SQLite").
///
/// Every engine is first loaded with the data set's rows in one transaction (as W1), then takes one
/// transaction per row of the data set's W6 updates: Sofa one ``Engine/update(_:)`` of one row (a
/// `BTree.modified(by:)` and a ``Durability/full`` commit), SQLite a DELETE + INSERT transaction in WAL mode
/// with `synchronous=FULL`, LMDB an `mdb_del` + `mdb_put` write transaction with default (synced) flags. Each
/// commit is durable when it returns.
///
/// The engines run in one process, interleaved in rounds (a slice of each engine's commits in turn), so that
/// the load of other processes on this shared machine falls on all of them alike; the figures are latency
/// percentiles over every commit, and the ratios are Sofa's speed-up over each peer (above 1: Sofa faster).
enum CommitLatency {
    /// One engine's commit latencies in microseconds, in the order measured.
    private struct Samples {
        let name: String
        var microseconds: [Double] = []

        func percentile(_ p: Double) -> Double {
            let sorted = microseconds.sorted()
            return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
        }

        var mean: Double { microseconds.reduce(0, +) / Double(microseconds.count) }
    }

    /// Runs C1 on `engines` (names from ``EngineRegistry``) in subdirectories `c1-NAME` of `scratch`, with up to
    /// `commits` single-row commits per engine in `rounds` interleaved rounds; returns the Markdown report.
    static func run(data: DataSet, engines: [String], scratch: String, commits: Int, rounds: Int) throws -> String {
        let changes = (0 ..< min(commits, data.updates.count)).map { i -> RowSet in
            var builder = RowSetBuilder(reservingRows: 1, bytesPerRow: data.updates.key(i).count)
            builder.appendBytes(data.updates.key(i))
            builder.endRow(value: data.updates.value(i))
            return builder.build()
        }
        guard !changes.isEmpty else { throw CompareError("C1: the data set has no updates (u6.tsv)") }
        var opened: [(engine: any Engine, samples: Samples)] = []
        defer {
            for (engine, _) in opened { try? engine.close() }
        }
        for name in engines {
            guard let type = EngineRegistry.engine(named: name) else { throw CompareError("unknown engine \(name)") }
            let directory = scratch + "/c1-" + name
            try SystemProbe.emptyDirectory(directory)
            let engine = try type.init(directory: directory)
            opened.append((engine, Samples(name: name)))
            try engine.build(rows: data.rows)
        }
        let loadBefore = SystemProbe.loadAverage()
        let perRound = (changes.count + rounds - 1) / rounds
        for round in 0 ..< rounds {
            let slice = (round * perRound) ..< min(changes.count, (round + 1) * perRound)
            for e in opened.indices {
                for i in slice {
                    let start = SystemProbe.now()
                    try opened[e].engine.update(changes[i])
                    opened[e].samples.microseconds.append(Double(SystemProbe.now() - start) / 1e3)
                }
            }
        }
        let loadAfter = SystemProbe.loadAverage()
        // Each update must have reached the index: the sum of values after them is checked against the
        // engine's own scan (the same for every engine, since every engine applied the same changes).
        var sums: [String: Int] = [:]
        for (engine, samples) in opened {
            var sum = 0
            try engine.scan { _, value in sum += Int(value) }
            sums[samples.name] = sum
        }
        guard Set(sums.values).count == 1 else {
            throw CompareError("C1: the engines disagree on the index after the commits: \(sums)")
        }

        let subject = opened.first { $0.samples.name == EngineRegistry.subject }?.samples
        var out = "## C1: single-row durable commits, \(NumberFormat.grouped(data.rows.count)) rows loaded, "
            + "\(NumberFormat.grouped(changes.count)) commits per engine in \(rounds) interleaved rounds\n\n"
        out += "| engine | p50 µs | p90 µs | p99 µs | mean µs | commits/s | sofa speed-up (commits/s) "
            + "| sofa speed-up (p50) |\n"
        out += "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"
        for (_, s) in opened {
            let perSecond = 1e6 / s.mean
            let throughputRatio = subject.map { (1e6 / $0.mean) / perSecond }
            let latencyRatio = subject.map { s.percentile(0.5) / $0.percentile(0.5) }
            out += "| \(s.name) | \(NumberFormat.figure(s.percentile(0.5))) | "
                + "\(NumberFormat.figure(s.percentile(0.9))) | "
                + "\(NumberFormat.figure(s.percentile(0.99))) | \(NumberFormat.figure(s.mean)) | "
                + "\(NumberFormat.grouped(Int(perSecond.rounded()))) | "
                + "\(throughputRatio.map(NumberFormat.ratio) ?? "—") | "
                + "\(latencyRatio.map(NumberFormat.ratio) ?? "—") |\n"
        }
        out += "\nsum of values after the commits: \(sums.values.first ?? 0) (all engines agree). "
            + "1-minute load average at start / end of the commits: \(loadBefore) / \(loadAfter).\n"
        for (_, s) in opened {
            if let type = EngineRegistry.engine(named: s.name) { out += "- \(s.name): \(type.configuration)\n" }
        }
        return out
    }
}
