import Benchmark
import Glibc

/// What every layer's microbenchmarks share: the metrics, the scaling and the regression tolerances.
///
/// Only counts that do not depend on the machine's load are gated by `swift package benchmark thresholds
/// check` against the static thresholds in `Thresholds/`; wall clock and throughput are reported, never gated,
/// because the machines these run on are shared and noisy.
public enum Microbenchmarks {
    /// The metrics reported: time, throughput, and the counts that are stable from run to run (mallocs, bytes
    /// allocated, and instructions where the CPU's performance counters can be read: not on a VM without a PMU,
    /// where package-benchmark leaves the metric out of its output).
    public static var metrics: [BenchmarkMetric] {
        [.wallClock, .throughput, .mallocCountTotal, .mallocBytesCount, .instructions]
    }

    /// Tolerances for the deterministic metrics.
    public static var tolerances: [BenchmarkMetric: BenchmarkThresholds] {
        [
            // One malloc more per thousand operations is noise from the harness; more is a regression.
            .mallocCountTotal: .init(relative: [.p90: 1.0], absolute: [.p90: 1]),
            // Bytes move with the sizes a buffer happens to grow to; 2 % more is a real change.
            .mallocBytesCount: .init(relative: [.p90: 2.0]),
            // Instruction counts move a little with code layout and the toolchain; 5 % is a real change.
            .instructions: .init(relative: [.p90: 5.0]),
        ]
    }

    /// Tolerances for benchmarks whose work is spread over threads (a view update maps on every core): how
    /// the work is split, and so a few allocations, depends on scheduling. 2 % either way is noise there.
    public static var parallelTolerances: [BenchmarkMetric: BenchmarkThresholds] {
        [
            .mallocCountTotal: .init(relative: [.p90: 2.0]),
            .mallocBytesCount: .init(relative: [.p90: 2.0]),
            .instructions: .init(relative: [.p90: 5.0]),
        ]
    }

    /// Whether this is a quick run (`SOFA_BENCH_QUICK=1`, set by `make bench-quick`): benchmarks that only
    /// read stop after 0.25 s instead of 2 s. Benchmarks that change their data run their fixed count anyway.
    public static let isQuick = getenv("SOFA_BENCH_QUICK") != nil

    /// The default configuration of a layer's benchmarks: 1,000 operations per measured iteration (one
    /// operation is often well under a microsecond, too little to time on its own), at most 2 s (0.25 s quick)
    /// or 1,000 iterations per benchmark. For benchmarks that read: every iteration does the same work, so
    /// their malloc counts do not depend on how many iterations fit in the time.
    public static var configuration: Benchmark.Configuration {
        .init(
            metrics: metrics,
            timeUnits: .nanoseconds,
            scalingFactor: .kilo,
            maxDuration: isQuick ? .milliseconds(250) : .seconds(2),
            maxIterations: isQuick ? 100 : 1_000,
            thresholds: tolerances)
    }

    /// A benchmark whose one operation is a whole pass (a scan of every row, a bulk load, a grouped query):
    /// like ``configuration`` with the figures per iteration, timed in `timeUnits`.
    public static func pass(timeUnits: BenchmarkTimeUnits = .microseconds) -> Benchmark.Configuration {
        var c = configuration
        c.scalingFactor = .one
        c.timeUnits = timeUnits
        return c
    }

    /// A benchmark that changes its data (puts, index updates): exactly `iterations` measured iterations
    /// after one warm-up, in quick and full runs alike, however long they take. The database goes through
    /// the same states every run, so the malloc counts checked against `Thresholds/` are the same too (within
    /// ``parallelTolerances`` when `parallel`: the work is spread over threads).
    public static func fixed(iterations: Int, scalingFactor: BenchmarkScalingFactor = .kilo,
                             timeUnits: BenchmarkTimeUnits = .nanoseconds,
                             parallel: Bool = false) -> Benchmark.Configuration {
        var c = configuration
        if parallel { c.thresholds = parallelTolerances }
        c.scalingFactor = scalingFactor
        c.timeUnits = timeUnits
        c.warmupIterations = 1
        c.maxIterations = iterations
        c.maxDuration = .seconds(600)
        return c
    }
}
