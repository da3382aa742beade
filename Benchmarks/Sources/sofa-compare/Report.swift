/// The parent's view of all runs: figures per engine, aggregated over repeats, printed as Markdown or CSV.
struct Report {
    /// Engine names in column order.
    let engines: [String]
    let n: Int
    /// Lines printed under the Markdown table (e.g. the machine's load during the run).
    var notes: [String] = []
    /// Each engine's records, one array per run.
    private var runs: [String: [[ChildRecord]]] = [:]

    init(engines: [String], n: Int) {
        self.engines = engines
        self.n = n
    }

    /// Adds one child run's records for `engine`.
    mutating func add(engine: String, records: [ChildRecord]) {
        runs[engine, default: []].append(records)
    }

    /// Whether every answer of every run of every engine matched gen.py's.
    var allChecksPassed: Bool {
        runs.values.joined().joined().allSatisfy { record in
            if case .check(let check) = record { return check.ok }
            return true
        }
    }

    // MARK: - Aggregation

    /// (workload, metric, unit) in first-seen order across engines, so rows follow the run order.
    private var rowKeys: [(workload: String, metric: String, unit: String)] {
        var seen = Set<String>()
        var keys: [(String, String, String)] = []
        for engine in engines {
            for record in runs[engine]?.first ?? [] {
                if case .measurement(let m) = record, seen.insert(m.workload + "\t" + m.metric).inserted {
                    keys.append((m.workload, m.metric, m.unit))
                }
            }
        }
        return keys
    }

    /// The median over runs of `engine`'s figure, or nil if it has none.
    func median(_ engine: String, _ workload: String, _ metric: String) -> Double? {
        let values = figures(engine, workload, metric)
        guard !values.isEmpty else { return nil }
        let mid = values.count / 2
        return values.count % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2
    }

    /// Half the range of `engine`'s figure over the runs, relative to its median: how much to trust it.
    func spread(_ engine: String, _ workload: String, _ metric: String) -> Double? {
        let values = figures(engine, workload, metric)
        guard values.count > 1, let median = median(engine, workload, metric), median != 0 else { return nil }
        return (values[values.count - 1] - values[0]) / 2 / abs(median)
    }

    /// `engine`'s figure from every run, sorted.
    private func figures(_ engine: String, _ workload: String, _ metric: String) -> [Double] {
        (runs[engine] ?? []).compactMap { records in
            records.lazy.compactMap { record -> Double? in
                guard case .measurement(let m) = record, m.workload == workload, m.metric == metric else { return nil }
                return m.value
            }.first
        }.sorted()
    }

    /// A table cell: the median, and with several runs `±` half their range in percent.
    private func cell(_ engine: String, _ workload: String, _ metric: String) -> String {
        guard let value = median(engine, workload, metric) else { return "—" }
        guard let spread = spread(engine, workload, metric) else { return NumberFormat.figure(value) }
        return NumberFormat.figure(value) + " ±" + String(Int((spread * 100).rounded())) + "%"
    }

    /// Each answer label with, per engine, whether every run got it right.
    private var checkRows: [(label: String, results: [String: Bool])] {
        var order: [String] = []
        var results: [String: [String: Bool]] = [:]
        for engine in engines {
            for record in (runs[engine] ?? []).joined() {
                guard case .check(let check) = record else { continue }
                if results[check.workload] == nil { order.append(check.workload) }
                results[check.workload, default: [:]][engine] = (results[check.workload]?[engine] ?? true) && check.ok
            }
        }
        return order.map { ($0, results[$0] ?? [:]) }
    }

    private func configuration(_ engine: String) -> String? {
        for record in runs[engine]?.first ?? [] {
            if case .configuration(let text) = record { return text }
        }
        return nil
    }

    // MARK: - Output

    /// The Markdown table: one row per figure, one column per engine, then Sofa/peer ratios when Sofa ran.
    func markdown() -> String {
        let subject = EngineRegistry.subject
        let ratioPeers = engines.contains(subject) ? EngineRegistry.peers.filter(engines.contains) : []
        var header = ["workload", "metric", "unit"] + engines + ratioPeers.map { "\(subject)/\($0)" }
        var lines = [row(header), row(header.map { _ in "---" })]
        for key in rowKeys {
            var cells = [key.workload, key.metric, key.unit]
            cells += engines.map { cell($0, key.workload, key.metric) }
            for peer in ratioPeers {
                let mine = median(subject, key.workload, key.metric)
                let theirs = median(peer, key.workload, key.metric)
                cells.append(mine.flatMap { m in theirs.map { NumberFormat.ratio(m / $0) } } ?? "—")
            }
            lines.append(row(cells))
        }
        header = ["answer"] + engines
        lines += ["", row(header), row(header.map { _ in "---" })]
        for check in checkRows {
            lines.append(row([check.label] + engines.map { check.results[$0].map { $0 ? "OK" : "MISMATCH" } ?? "—" }))
        }
        lines.append("")
        for engine in engines {
            lines.append("- \(engine): \(configuration(engine) ?? "?")")
        }
        if runs.values.contains(where: { $0.count > 1 }) {
            lines.append("- figures are medians over \(runs.values.map(\.count).max() ?? 1) runs per engine; "
                + "±p% is half the range of the runs relative to the median")
        }
        lines += notes.map { "- " + $0 }
        if ratioPeers.isEmpty {
            lines.append("- ratios (\(subject)/peer) appear once the \(subject) engine exists and is selected")
        } else {
            lines.append("- ratios are \(subject)/peer of the figures: > 1 is better for \(subject) on /s rows, "
                + "worse on µs, MiB and s rows")
        }
        return lines.joined(separator: "\n")
    }

    /// CSV rows `workload,engine,n,metric,value,unit`; answers are rows with metric `answer` and value
    /// `OK` or `MISMATCH`. Figures are medians over the runs.
    func csv() -> String {
        var lines = ["workload,engine,n,metric,value,unit"]
        for key in rowKeys {
            for engine in engines {
                guard let value = median(engine, key.workload, key.metric) else { continue }
                lines.append([key.workload, engine, String(n), quoted(key.metric), String(value), key.unit]
                    .joined(separator: ","))
            }
        }
        for check in checkRows {
            for engine in engines {
                guard let ok = check.results[engine] else { continue }
                let fields = [check.label, engine, String(n), "answer", ok ? "OK" : "MISMATCH", ""]
                lines.append(fields.joined(separator: ","))
            }
        }
        return lines.joined(separator: "\n")
    }

    private func row(_ cells: [String]) -> String {
        "| " + cells.joined(separator: " | ") + " |"
    }

    private func quoted(_ field: String) -> String {
        field.contains(",") || field.contains("\"") ? "\"" + field.replacing("\"", with: "\"\"") + "\"" : field
    }
}
