import Benchmark

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

    /// The default configuration of a layer's benchmarks: 1,000 operations per measured iteration (one
    /// operation is often well under a microsecond, too little to time on its own), at most 2 s or 1,000
    /// iterations per benchmark.
    public static var configuration: Benchmark.Configuration {
        .init(
            metrics: metrics,
            timeUnits: .nanoseconds,
            scalingFactor: .kilo,
            maxDuration: .seconds(2),
            maxIterations: 1_000,
            thresholds: tolerances)
    }
}
