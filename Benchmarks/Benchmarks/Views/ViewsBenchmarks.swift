// Views layer microbenchmarks through the public API: building the index of WORKLOADS.md's view (key
// `[genre, artist, album, title]`, value `duration`, `.sum`) over 100,000 track documents, and bringing it up
// to date after 1,000 of them changed.
//
//   swift package benchmark --target ViewsBenchmarks
//
// `build.100k`: each iteration deletes the index (outside the measurement) and measures `updateIndex()`, which
// maps every document, encodes the ICU keys, sorts and bulk-loads the index and commits: the figures are per
// build. `update.incremental.1000`: each iteration changes the duration of 1,000 random documents (outside
// the measurement) and measures `updateIndex()`: the figures are per changed document.
import Benchmark
import MicrobenchmarkSupport
import Sofa

let documentCount = 100_000
let tracks = Tracks.generate(count: documentCount)

nonisolated(unsafe) var database: Database?
nonisolated(unsafe) var hierarchy: View?
nonisolated(unsafe) var scratch: ScratchDirectory?
/// Each document's current revision, for the incremental update's edits.
nonisolated(unsafe) var revisions: [String] = []

/// 100k documents and the view, indexed once.
func setUp() {
    let directory = ScratchDirectory("views")
    scratch = directory
    let loaded = TrackDatabase.loaded(tracks, in: directory)
    let defined = TrackDatabase.hierarchyView(in: loaded)
    orFail("ViewsBenchmarks: first index build") { try defined.updateIndex() }
    revisions = tracks.map { track in
        orFail("ViewsBenchmarks: read \(track.id)") { try loaded.document(id: track.id)!.revisionID }
    }
    database = loaded
    hierarchy = defined
}

func tearDown() {
    try? database?.close()
    scratch?.remove()
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = Microbenchmarks.configuration
    Benchmark("Views.build.100k",
              configuration: Microbenchmarks.fixed(iterations: 3, scalingFactor: .one, timeUnits: .milliseconds,
                                                   parallel: true)) { benchmark in
        guard let view = hierarchy else { return }
        try view.deleteIndex()
        benchmark.startMeasurement()
        try view.updateIndex()
        benchmark.stopMeasurement()
        precondition(view.totalRows == documentCount, "the index has every track")
    } setup: { setUp() } teardown: { tearDown() }

    var random = SeededRandom(seed: 10)
    var round = 0
    Benchmark("Views.update.incremental.1000",
              configuration: Microbenchmarks.fixed(iterations: 5, parallel: true)) { benchmark in
        guard let database, let view = hierarchy else { return }
        round += 1
        try database.inBatch {
            for _ in benchmark.scaledIterations {
                let i = Int.random(in: 0..<documentCount, using: &random)
                var changed = tracks[i]
                changed.duration = 60 + (changed.duration + round) % 540
                revisions[i] = try database.put(TrackDatabase.document(changed), id: changed.id,
                                                rev: revisions[i]).revisionID
            }
        }
        benchmark.startMeasurement()
        try view.updateIndex()
        benchmark.stopMeasurement()
    } setup: { setUp() } teardown: { tearDown() }
}
