/// The deterministic workload the crash tests run in a child process and replay as a model in the parent
/// (RELIABILITY.md R1, R2): commit k applies `batch(seed:commit:)`, so the expected content after any number
/// of commits can be recomputed without the file.
package enum CrashWorkload {
    package static let configuration = BTreeConfiguration(nodeSize: 512, compress: true, reducer: Int64SumReducer())

    /// The actions of workload commit `commit` (1-based): puts and removes over a 4,000-key space, sorted.
    package static func batch(seed: UInt64, commit: Int) -> [BTreeAction] {
        var random = SplitMix64(seed: seed &* 0x9E37_79B9_7F4A_7C15 &+ UInt64(commit))
        func next() -> UInt64 { random.next() }
        let size = [1, 3, 20, 200, 1000][Int(next() % 5)]
        var chosen: [UInt32: BTreeAction] = [:]
        for _ in 0..<size {
            let n = UInt32(next() % 4000)
            let key = withUnsafeBytes(of: n.bigEndian) { Array($0) }
            chosen[n] = next() % 4 == 0 ? .remove(key) : .put(key, Int64SumReducer.encode(Int64(next() % 1000)))
        }
        return chosen.keys.sorted().map { chosen[$0]! }
    }

    /// The metadata committed with workload commit `commit`: its number, so the recovered commit is known.
    package static func metadata(commit: Int) -> [UInt8] {
        var out: [UInt8] = []
        out.appendLittleEndian(UInt64(commit))
        return out
    }

    /// The rows after workload commits 1 through `commits`, in key order.
    package static func model(seed: UInt64, commits: Int) -> [(key: [UInt8], value: [UInt8])] {
        var rows: [[UInt8]: [UInt8]] = [:]
        if commits >= 1 {
            for k in 1...commits {
                for a in batch(seed: seed, commit: k) { rows[a.key] = a.value }
            }
        }
        return rows.keys.sorted { compareArrays($0, $1) < 0 }.map { ($0, rows[$0]!) }
    }
}
