// B+tree layer microbenchmarks on a tree of 100,000 engine-level rows of the track data set (a ~80-byte key
// `[genre, artist, album, title, id]` in tuple encoding, an 8-byte duration, a sum stored in every inner
// pointer), with the engine's defaults: 4 KiB LZ4-compressed nodes, node cache on.
//
//   swift package benchmark --target BTreeBenchmarks
//
// The tree is bulk-loaded and committed once per benchmark, in its setup. Benchmarks that write (insert, bulk
// load) discard their uncommitted nodes after each iteration, outside the measurement, so every iteration
// starts from the same 100k-row tree. Per-operation figures: `insert`, `get` and `reduce` run 1,000
// operations per iteration (the figures are per row, lookup or range); `scan` and `bulkload` are one whole
// pass over the 100k rows per iteration (the figures are per pass).
import Benchmark
import MicrobenchmarkSupport
import SofaStorage

let rowCount = 100_000
let configuration = BTreeConfiguration(reducer: Int64SumReducer())

/// The rows in key order.
let sortedRows: [(key: [UInt8], value: [UInt8])] = Tracks.generate(count: rowCount)
    .map { (Tracks.rowKey($0), withUnsafeBytes(of: Int64($0.duration).littleEndian) { Array($0) }) }
    .sorted { $0.key.lexicographicallyPrecedes($1.key) }

/// 1,000 keys of the tree in random order, for point lookups.
let lookupKeys: [[UInt8]] = {
    var random = SeededRandom(seed: 7)
    return (0..<1_000).map { _ in sortedRows[Int.random(in: 0..<rowCount, using: &random)].key }
}()

/// 1,000 ranges of 1,000 rows (1 % of the tree) each, at random places.
let ranges: [KeyRange] = {
    var random = SeededRandom(seed: 8)
    return (0..<1_000).map { _ in
        let low = Int.random(in: 0..<(rowCount - 1_000), using: &random)
        return KeyRange(lower: KeyBound(sortedRows[low].key), upper: KeyBound(sortedRows[low + 999].key))
    }
}()

/// Ten batches of 1,000 new rows (tracks not in the tree), each sorted as `modified(by:)` requires: random
/// places all over the tree.
let insertBatches: [[BTreeAction]] = {
    let extra = Tracks.generate(count: 10_000, seed: 43).enumerated().map { i, track in
        var t = track
        t.id = Tracks.trackID(rowCount + i)
        return BTreeAction.put(Tracks.rowKey(t), withUnsafeBytes(of: Int64(t.duration).littleEndian) { Array($0) })
    }
    return stride(from: 0, to: extra.count, by: 1_000).map { start in
        extra[start..<(start + 1_000)].sorted { $0.key.lexicographicallyPrecedes($1.key) }
    }
}()

nonisolated(unsafe) var tree: BTree?
nonisolated(unsafe) var scratch: ScratchDirectory?

/// Bulk-loads the 100k rows into a new file and commits them.
func setUpTree() {
    let directory = ScratchDirectory("btree")
    scratch = directory
    tree = orFail("BTreeBenchmarks: build the tree") {
        let file = try StorageFile(path: directory.path + "/tree.sofa", options: StorageOptions(durability: .none))
        let builder = TreeBuilder(file: file, configuration: configuration)
        for row in sortedRows { try builder.add(key: row.key, value: row.value) }
        let built = try builder.finish()
        let header = try file.commit(roots: [built.root], metadata: [])
        return BTree(file: file, commit: header, index: 0, configuration: configuration)
    }
    // Derived data are built here, before the first iteration.
    blackHole(lookupKeys.count + ranges.count + insertBatches.count)
}

func tearDownTree() {
    try? tree?.file.close()
    scratch?.remove()
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = Microbenchmarks.configuration
    let passConfiguration = Microbenchmarks.pass()

    var batch = 0
    // Each of the ten batches once: the same ten inserts every run.
    Benchmark("BTree.insert.random.100k", configuration: Microbenchmarks.fixed(iterations: insertBatches.count)) { benchmark in
        guard let tree else { return }
        precondition(benchmark.scaledIterations.count == insertBatches[0].count, "one row per operation")
        benchmark.startMeasurement()
        blackHole(try tree.modified(by: insertBatches[batch % insertBatches.count]).rowCount)
        benchmark.stopMeasurement()
        tree.file.discardUncommitted()
        batch += 1
    } setup: { setUpTree() } teardown: { tearDownTree() }

    Benchmark("BTree.get.random.100k") { benchmark in
        guard let tree else { return }
        for i in benchmark.scaledIterations {
            blackHole(try tree.get(lookupKeys[i % lookupKeys.count]))
        }
    } setup: { setUpTree() } teardown: { tearDownTree() }

    Benchmark("BTree.scan.cursor.100k", configuration: passConfiguration) { benchmark in
        guard let tree else { return }
        var rows = 0
        try tree.forEach { key, value in
            rows &+= key.count &+ value.count
            return true
        }
        blackHole(rows)
    } setup: { setUpTree() } teardown: { tearDownTree() }

    Benchmark("BTree.reduce.range1pct.100k") { benchmark in
        guard let tree else { return }
        for i in benchmark.scaledIterations {
            blackHole(try tree.reduce(in: ranges[i % ranges.count]).rowCount)
        }
    } setup: { setUpTree() } teardown: { tearDownTree() }

    Benchmark("BTree.bulkload.100k", configuration: passConfiguration) { benchmark in
        guard let tree else { return }
        let builder = TreeBuilder(file: tree.file, configuration: configuration)
        for row in sortedRows { try builder.add(key: row.key, value: row.value) }
        blackHole(try builder.finish().rowCount)
        benchmark.stopMeasurement()
        tree.file.discardUncommitted()
    } setup: { setUpTree() } teardown: { tearDownTree() }
}
