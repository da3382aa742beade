// Query layer microbenchmarks through the public `Query` API, on WORKLOADS.md's view (key `[genre, artist,
// album, title]`, value `duration`, `.sum`) indexed over 100,000 track documents in the setup.
//
//   swift package benchmark --target QueryBenchmarks
//
// Per operation: `range.20rows` (W2's query: 20 rows from a random key, into `QueryRow`s) and
// `reduce.genre` (the sum over one genre, ~2.5 % of the rows, from stored reductions) run 1,000 queries per
// iteration; the figures are per query. `group.level1` (40 genres) and `group.level2` (one row per artist)
// reduce the whole index by group, and `allDocs` lists every document: one query per iteration.
import Benchmark
import MicrobenchmarkSupport
import Sofa

let documentCount = 100_000
let tracks = Tracks.generate(count: documentCount)

nonisolated(unsafe) var database: Database?
nonisolated(unsafe) var hierarchy: View?
nonisolated(unsafe) var scratch: ScratchDirectory?

/// Start keys of the range queries: the keys of 1,000 random tracks.
let rangeStarts: [JSON] = {
    var random = SeededRandom(seed: 11)
    return (0..<1_000).map { _ in
        let t = tracks[Int.random(in: 0..<documentCount, using: &random)]
        return [.string(t.genre), .string(t.artist), .string(t.album), .string(t.title)]
    }
}()

/// The genres of the data set, sorted.
let genres: [String] = Array(Set(tracks.map(\.genre))).sorted()

/// 100k documents and the view, indexed.
func setUp() {
    let directory = ScratchDirectory("query")
    scratch = directory
    let loaded = TrackDatabase.loaded(tracks, in: directory)
    let defined = TrackDatabase.hierarchyView(in: loaded)
    orFail("QueryBenchmarks: index build") { try defined.updateIndex() }
    database = loaded
    hierarchy = defined
    blackHole(rangeStarts.count + genres.count)
}

func tearDown() {
    try? database?.close()
    scratch?.remove()
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = Microbenchmarks.configuration
    let wholeConfiguration = Microbenchmarks.pass()

    Benchmark("Query.range.20rows.100k") { benchmark in
        guard let view = hierarchy else { return }
        var query = view.createQuery()
        query.mapOnly = true
        query.limit = 20
        for i in benchmark.scaledIterations {
            query.startKey = rangeStarts[i % rangeStarts.count]
            blackHole(try query.run().rows.count)
        }
    } setup: { setUp() } teardown: { tearDown() }

    Benchmark("Query.reduce.genre.100k") { benchmark in
        guard let view = hierarchy else { return }
        var query = view.createQuery()
        for i in benchmark.scaledIterations {
            let genre = genres[i % genres.count]
            query.startKey = [.string(genre)]
            query.endKey = [.string(genre), .object([:])]
            let rows = try query.run()
            precondition(rows.count == 1, "a reduce without grouping gives one row")
            blackHole(rows[0].value)
        }
    } setup: { setUp() } teardown: { tearDown() }

    for level in [1, 2] {
        Benchmark("Query.group.level\(level).100k", configuration: wholeConfiguration) { _ in
            guard let view = hierarchy else { return }
            var query = view.createQuery()
            query.groupLevel = level
            blackHole(try query.run().rows.count)
        } setup: { setUp() } teardown: { tearDown() }
    }

    Benchmark("Query.allDocs.100k", configuration: wholeConfiguration) { _ in
        guard let database else { return }
        let rows = try database.createAllDocumentsQuery().run()
        precondition(rows.count == documentCount, "all-docs lists every document")
        blackHole(rows.count)
    } setup: { setUp() } teardown: { tearDown() }
}
