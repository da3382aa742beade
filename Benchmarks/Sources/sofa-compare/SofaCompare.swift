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
        Which suite: `engines` (W1–W7 at the engine level) or `views` (V1 V2 V4 VG V6, issue 5's pipeline level: \
        Sofa's Database and View against SQLite as Couchbase Lite 1.x, from docs.jsonl; ViewsWorkloads.swift).
        """)
    var suite = "engines"

    @Option(help: """
        Comma-separated workloads to report (W1 / V1 always runs: it builds the index). Default: all of the suite's.
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

    @Flag(inversion: .prefixedNo, help: "Attempt W7 with the engine's files evicted from the page cache (engines suite).")
    var cold = true

    @Option(help: .hidden)
    var engineChild: String?

    mutating func validate() throws {
        guard n > 0 else { throw ValidationError("--n must be positive") }
        guard `repeat` > 0 else { throw ValidationError("--repeat must be positive") }
        guard ["engines", "views"].contains(suite) else { throw ValidationError("unknown suite \(suite); known: engines, views") }
        let known = Set(suiteWorkloads)
        for workload in selectedWorkloads where !known.contains(workload) {
            throw ValidationError("unknown workload \(workload); known: \(suiteWorkloads.joined(separator: " "))")
        }
        for name in selectedEngines where !suiteEngines.contains(name) {
            let available = suiteEngines.joined(separator: ", ")
            throw ValidationError("unknown engine \(name); available: \(available)")
        }
    }

    func run() throws {
        if let name = engineChild {
            try runChild(engineNamed: name)
        } else {
            try runParent()
        }
    }

    // MARK: - Parent

    private func runParent() throws {
        let directory = dataDirectory
        guard access(directory + "/expected.json", R_OK) == 0 else {
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
        let title = suite == "views" ? "sofa-compare --suite views" : "sofa-compare"
        print(csv ? report.csv() : "## \(title), N = \(NumberFormat.grouped(n))\n\n" + report.markdown())
        guard report.allChecksPassed else {
            log("sofa-compare: some answers differ from expected.json (see MISMATCH above)")
            throw ExitCode(1)
        }
    }

    // MARK: - Child

    private func runChild(engineNamed name: String) throws {
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

    /// Every workload of the selected suite.
    private var suiteWorkloads: [String] {
        suite == "views" ? ViewsSuite.workloads : ["W1", "W2", "W3", "W4", "W5", "W6", "W7"]
    }

    /// Every engine of the selected suite, in column order.
    private var suiteEngines: [String] {
        suite == "views" ? ViewsEngineRegistry.all.map { $0.name } : EngineRegistry.all.map { $0.name }
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
