// Documents layer microbenchmarks through the public `Database` API: putting track documents (batched and one
// durable commit each) and reading them back by ID.
//
//   swift package benchmark --target DocumentsBenchmarks
//
// `put.batched` puts 1,000 new documents in one `inBatch` (one commit, durability `.full`) per iteration: the
// figures are per document. `put.single` is one `put`, one durable commit (data fsync + header fsync), per
// iteration. `get.random` reads 1,000 random documents of a 100k-document database per iteration.
import Benchmark
import MicrobenchmarkSupport
import Sofa

/// 10,000 track bodies cycled through by the put benchmarks (each put gets a new ID).
let putBodies: [JSON] = Tracks.generate(count: 10_000, seed: 44).map(TrackDatabase.document)

nonisolated(unsafe) var database: Database?
nonisolated(unsafe) var scratch: ScratchDirectory?
/// IDs of the loaded documents, in random order, for `get`.
nonisolated(unsafe) var lookupIDs: [String] = []

/// A new, empty database with durable commits.
func setUpEmpty() {
    let directory = ScratchDirectory("documents")
    scratch = directory
    database = orFail("DocumentsBenchmarks: create the database") {
        try Database(path: directory.path + "/db.sofa", options: DatabaseOptions(durability: .full))
    }
    blackHole(putBodies.count)
}

/// A database holding 100,000 track documents.
func setUpLoaded() {
    let directory = ScratchDirectory("documents")
    scratch = directory
    database = TrackDatabase.loaded(Tracks.generate(count: 100_000), in: directory)
    var random = SeededRandom(seed: 9)
    lookupIDs = (0..<1_000).map { _ in Tracks.trackID(Int.random(in: 0..<100_000, using: &random)) }
}

func tearDown() {
    try? database?.close()
    scratch?.remove()
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = Microbenchmarks.configuration

    var next = 0
    Benchmark("Documents.put.batched1000", configuration: Microbenchmarks.fixed(iterations: 20)) { benchmark in
        guard let database else { return }
        try database.inBatch {
            for _ in benchmark.scaledIterations {
                try database.put(putBodies[next % putBodies.count], id: Tracks.trackID(next))
                next += 1
            }
        }
    } setup: { setUpEmpty() } teardown: { tearDown() }

    Benchmark("Documents.put.single",
              configuration: Microbenchmarks.fixed(iterations: 100, scalingFactor: .one, timeUnits: .microseconds)) { _ in
        guard let database else { return }
        try database.put(putBodies[next % putBodies.count], id: Tracks.trackID(next))
        next += 1
    } setup: { setUpEmpty() } teardown: { tearDown() }

    Benchmark("Documents.get.random.100k") { benchmark in
        guard let database else { return }
        for i in benchmark.scaledIterations {
            blackHole(try database.document(id: lookupIDs[i % lookupIDs.count]))
        }
    } setup: { setUpLoaded() } teardown: { tearDown() }
}
