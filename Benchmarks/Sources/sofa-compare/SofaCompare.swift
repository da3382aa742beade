import ArgumentParser
import Glibc

/// `sofa-compare`: W1–W7 of shared/bench/WORKLOADS.md on each engine, same data and operations, one table.
///
/// The parent loads nothing itself: it starts one child per engine (and per repeat), each re-running this
/// executable with `--engine-child NAME`, collects their records, and prints medians and answers.
@main
struct SofaCompare: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sofa-compare",
        abstract: "Runs workloads W1–W7 on Sofa and its peers (LMDB, SQLite) and prints one comparison table.",
        discussion: """
            The data set comes from Benchmarks/data/generate.sh N (gen.py); every engine gets the same \
            pre-encoded byte keys. Each engine runs in its own child process so that peak RSS is its own. \
            Exits with status 1 if any engine's answer differs from expected.json.
            """)

    @Option(help: "Number of documents; selects the data set directory $SOFA_BENCH_DATA/N (/tmp/sofa-bench-data/N).")
    var n = 1_000_000

    @Option(help: "Comma-separated engines to run, in column order. Default: every engine that exists.")
    var engines: String?

    @Option(help: """
        Which suite: `engines` (W1–W7 at the engine level, the default), `docs` (D1–D5, documents on Sofa's \
        Database and SQLite; DocumentsWorkloads.swift) or `views` (V1 V2 V4 VG V6, issue 5's pipeline level: \
        Sofa's Database and View against SQLite as Couchbase Lite 1.x, from docs.jsonl; ViewsWorkloads.swift).
        """)
    var suite = "engines"

    @Option(help: """
        Comma-separated workloads to report (W1 / D1 / V1 always run: they load or build). Default: all of the \
        suite's.
        """)
    var workloads: String?

    @Option(help: "Data set directory (with rows.tsv, q2.tsv, q4.tsv, u6.tsv, expected.json).")
    var data: String?

    @Option(help: """
        Scratch directory for the engines' files (each engine gets a subdirectory, emptied first). \
        Default: a new /tmp/sofa-compare.XXXXXX, deleted afterwards. Must be on the disk to measure, not tmpfs.
        """)
    var db: String?

    @Option(help: "Runs per engine (interleaved engine by engine); figures are medians over the runs.")
    var `repeat` = 1

    @Flag(help: "Print CSV rows (workload,engine,n,metric,value,unit) instead of the Markdown table.")
    var csv = false

    @Flag(inversion: .prefixedNo,
          help: "Attempt W7 with the engine's files evicted from the page cache (engines suite).")
    var cold = true

    @Option(help: """
        C1 (--workloads C1, run alone): single-row durable commits per engine and round (5 interleaved rounds, or \
        --repeat R when R > 1).
        """)
    var commits = 2_000

    @Option(help: .hidden)
    var engineChild: String?

    mutating func validate() throws {
        guard n > 0 else { throw ValidationError("--n must be positive") }
        guard `repeat` > 0 else { throw ValidationError("--repeat must be positive") }
        guard ["engines", "docs", "views"].contains(suite) else {
            throw ValidationError("unknown suite \(suite); known: engines, docs, views")
        }
        // C1 (single-row durable commits) belongs to the engines suite and runs alone.
        let known = suiteWorkloads + (suite == "engines" ? ["C1"] : [])
        for workload in selectedWorkloads where !known.contains(workload) {
            throw ValidationError(
                "unknown workload \(workload) in suite \(suite); known: \(known.joined(separator: ", "))")
        }
        if selectedWorkloads.contains("C1") && selectedWorkloads.count > 1 {
            throw ValidationError("C1 runs alone: --workloads C1")
        }
        if selectedWorkloads == ["C1"] && csv {
            throw ValidationError("C1 prints its own latency table; --csv is not supported with it")
        }
        for name in selectedEngines where !suiteEngines.contains(name) {
            throw ValidationError("unknown engine \(name); available: \(suiteEngines.joined(separator: ", "))")
        }
    }

    func run() throws {
        if let name = engineChild {
            try runChild(engineNamed: name)
        } else if selectedWorkloads == ["C1"] {
            let scratch = try ScratchDirectory(path: db)
            defer { scratch.removeContents(engines: selectedEngines.map { "c1-" + $0 }) }
            print(try CommitLatency.run(data: try DataSet.load(from: dataDirectory), engines: selectedEngines,
                                        scratch: scratch.path, commits: commits, rounds: `repeat` > 1 ? `repeat` : 5))
        } else {
            try runParent()
        }
    }

    // MARK: - Parent

    private func runParent() throws {
        let directory = dataDirectory
        guard access(directory + (suite == "engines" ? "/expected.json" : "/docs.jsonl"), R_OK) == 0 else {
            throw CompareError("no data set in \(directory); make it with: Benchmarks/data/generate.sh \(n)")
        }
        let scratch = try ScratchDirectory(path: db)
        defer { scratch.removeContents(engines: selectedEngines) }
        var report = Report(engines: selectedEngines, n: n)
        var collected: [String: [[ChildRecord]]] = [:]
        let loadBefore = SystemProbe.loadAverage()
        for run in 1 ... `repeat` {
            for engine in selectedEngines {
                log("sofa-compare: n=\(n) engine=\(engine) run \(run)/\(`repeat`)")
                let arguments = [
                    "--engine-child", engine, "--n", String(n), "--data", directory, "--db", scratch.path,
                    "--workloads", selectedWorkloads.joined(separator: ","), cold ? "--cold" : "--no-cold",
                    "--suite", suite,
                ]
                // The previous child's files may still be going to disk (the kernel writes dirty pages back
                // for ~30 s): flushed first, so that no engine's timed workloads share the disk with that.
                sync()
                let output = try ChildProcess.run(arguments)
                collected[engine, default: []].append(output.split(separator: "\n").compactMap(ChildRecord.init(line:)))
            }
        }
        // The views suite checks some answers against the reference engine's, known once every child has run.
        if suite == "views" { collected = ViewsSuite.crossCheck(collected) }
        for engine in selectedEngines {
            for records in collected[engine] ?? [] {
                for case .check(let check) in records where !check.ok {
                    log("MISMATCH \(engine) \(check.workload): got \(check.got), expected \(check.expected)")
                }
                report.add(engine: engine, records: records)
            }
        }
        let cores = sysconf(Int32(_SC_NPROCESSORS_ONLN))
        report.notes.append("1-minute load average at start / end: \(loadBefore) / \(SystemProbe.loadAverage()) "
            + "on \(cores) cores (above the core count, other processes competed for the CPUs)")
        let title = "## sofa-compare\(suite == "engines" ? "" : " --suite " + suite), N = \(NumberFormat.grouped(n))"
        print(csv ? report.csv() : title + "\n\n" + report.markdown())
        guard report.allChecksPassed else {
            log("sofa-compare: some answers differ from expected.json (see MISMATCH above)")
            throw ExitCode(1)
        }
    }

    // MARK: - Child

    private func runChild(engineNamed name: String) throws {
        if suite == "docs" {
            return try runDocumentsChild(engineNamed: name)
        }
        if suite == "views" {
            guard let engineType = ViewsEngineRegistry.engine(named: name) else {
                throw CompareError("unknown views engine \(name)")
            }
            guard let db else { throw CompareError("--engine-child needs --db") }
            let runner = ViewsRunner(
                directory: db + "/" + name, dataDirectory: dataDirectory, engineType: engineType,
                selected: Set(selectedWorkloads),
                emit: { record in
                    var line = record.line + "\n"
                    line.withUTF8 { _ = write(STDOUT_FILENO, $0.baseAddress, $0.count) }
                })
            return try runner.run()
        }
        guard let engineType = EngineRegistry.engine(named: name) else {
            throw CompareError("unknown engine \(name)")
        }
        let loadStart = SystemProbe.now()
        let dataSet = try DataSet.load(from: dataDirectory)
        log("sofa-compare: \(name): loaded \(dataSet.rows.count) rows in "
            + NumberFormat.fixed(Double(SystemProbe.now() - loadStart) / 1e9, decimals: 1) + " s")
        // The parent made and locked the scratch directory and passes it explicitly.
        guard let db else { throw CompareError("--engine-child needs --db") }
        let runner = WorkloadRunner(
            data: dataSet, engineType: engineType, directory: db + "/" + name,
            selected: Set(selectedWorkloads), cold: cold,
            emit: { record in
                // Straight to the pipe, unbuffered: a child that dies mid-run still delivers what it measured.
                var line = record.line + "\n"
                line.withUTF8 { _ = write(STDOUT_FILENO, $0.baseAddress, $0.count) }
            })
        try runner.run()
    }

    private func runDocumentsChild(engineNamed name: String) throws {
        guard let engineType = DocumentsEngineRegistry.engine(named: name) else {
            throw CompareError("unknown documents engine \(name)")
        }
        guard let db else { throw CompareError("--engine-child needs --db") }
        let loadStart = SystemProbe.now()
        let documents = try DocumentSet.load(from: dataDirectory + "/docs.jsonl", limit: n).documents
        log("sofa-compare: \(name): parsed \(documents.count) documents in "
            + NumberFormat.fixed(Double(SystemProbe.now() - loadStart) / 1e9, decimals: 1) + " s")
        guard documents.count == n else {
            throw CompareError("\(dataDirectory)/docs.jsonl has \(documents.count) documents, not \(n)")
        }
        let runner = DocumentsWorkloads(
            documents: documents, engineType: engineType, directory: db + "/" + name,
            selected: Set(selectedWorkloads),
            emit: { record in
                var line = record.line + "\n"
                line.withUTF8 { _ = write(STDOUT_FILENO, $0.baseAddress, $0.count) }
            })
        try runner.run()
    }

    // MARK: - Options

    /// `--data`, else `N` under the root generate.sh wrote to (`SOFA_BENCH_DATA`, default /tmp/sofa-bench-data).
    private var dataDirectory: String {
        if let data { return data }
        let root = getenv("SOFA_BENCH_DATA").map { String(cString: $0) } ?? "/tmp/sofa-bench-data"
        return root + "/\(n)"
    }

    private var selectedWorkloads: [String] {
        guard let workloads else { return suiteWorkloads }
        return workloads.split(separator: ",").map { $0.trimmingPrefix(" ").uppercased() }
    }

    /// Every workload of the chosen suite.
    private var suiteWorkloads: [String] {
        switch suite {
        case "docs": DocumentsWorkloads.workloads
        case "views": ViewsSuite.workloads
        default: ["W1", "W2", "W3", "W4", "W5", "W6", "W7"]
        }
    }

    /// Every engine of the chosen suite, in column order.
    private var suiteEngines: [String] {
        switch suite {
        case "docs": DocumentsEngineRegistry.all.map { $0.name }
        case "views": ViewsEngineRegistry.all.map { $0.name }
        default: EngineRegistry.all.map { $0.name }
        }
    }

    private var selectedEngines: [String] {
        guard let engines else { return suiteEngines }
        return engines.split(separator: ",").map { $0.trimmingPrefix(" ").lowercased() }
    }

    private func log(_ message: String) {
        var line = message + "\n"
        line.withUTF8 { _ = write(STDERR_FILENO, $0.baseAddress, $0.count) }
    }
}
