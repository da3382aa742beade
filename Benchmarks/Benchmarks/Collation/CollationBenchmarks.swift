// Collation layer microbenchmarks: the view key of the W1–W7 data set, `[genre, artist, album, title]`.
//
//   swift package benchmark --target CollationBenchmarks
//
// Keys are rows of gen.py's data set (N = 100k, seed 42): an all-ASCII key and one with a CJK/Hangul title.
// `encode` is what the view indexer pays per emitted row (ICU sort keys for four strings); `collate` is the
// value-level comparison that must agree with the encoded bytes; `compare` is the memcmp the B+tree does on
// encoded keys, for scale.
import Benchmark
import MicrobenchmarkSupport
import Sofa

/// Row of track 0.
let asciiKey: JSON = ["Funk", "Noulopai Ziho", "Gegai Jobena", "Dafa"]
/// Row of track 22.
let nonASCIIKey: JSON = ["Rock", "The Souvoku", "Zuli Raihai Taidomu", "늘夢あゆ夢"]
/// A key equal to `asciiKey` except in its last item, so a comparison walks all four items.
let asciiNeighbour: JSON = ["Funk", "Noulopai Ziho", "Gegai Jobena", "Dafa Lovana"]

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = Microbenchmarks.configuration

    Benchmark("Collation.encode.hierarchyKey") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try CollationKey(asciiKey).bytes)
        }
    }

    Benchmark("Collation.encode.hierarchyKey.nonASCII") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try CollationKey(nonASCIIKey).bytes)
        }
    }

    Benchmark("Collation.collate.hierarchyKey") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(JSON.collate(asciiKey, asciiNeighbour))
        }
    }

    // Encoded once, outside the measurement; a key that does not encode stops the run rather than leaving
    // a benchmark that measures nothing.
    let encoded = encodedOrFail(asciiKey)
    let encodedNeighbour = encodedOrFail(asciiNeighbour)
    precondition(encoded < encodedNeighbour && JSON.collate(asciiKey, asciiNeighbour) < 0, "orders disagree")

    Benchmark("Collation.compare.hierarchyKey") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(encoded < encodedNeighbour)
        }
    }
}

/// The encoded key, or a stop with the encoder's error.
func encodedOrFail(_ key: JSON) -> CollationKey {
    do {
        return try CollationKey(key)
    } catch {
        fatalError("CollationBenchmarks: a benchmark key does not encode: \(error)")
    }
}
