// JSON layer microbenchmarks: parsing and serializing the documents of the W1–W7 data set.
//
//   swift package benchmark --target JSONBenchmarks
//
// The documents are lines of gen.py's docs.jsonl (N = 100k, seed 42, built-in syllables): one all-ASCII track
// and one with CJK/Hangul in its title, since ~9 % of the data set's rows are non-ASCII and string decoding is
// where parsers differ.
import Benchmark
import MicrobenchmarkSupport
import Sofa

/// Track 0 of the data set: ASCII only.
let asciiTrack = Array(
    (#"{"_id":"track-00000000","type":"track","genre":"Funk","artist":"Noulopai Ziho","album":"Gegai Jobena","#
        + #""title":"Dafa","duration":255,"year":2012,"rating":2}"#).utf8)

/// Track 22 of the data set: a title in Hangul and kana.
let nonASCIITrack = Array(
    (#"{"_id":"track-00000022","type":"track","genre":"Rock","artist":"The Souvoku","#
        + #""album":"Zuli Raihai Taidomu","title":"늘夢あゆ夢","duration":193,"year":2016,"rating":3}"#).utf8)

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = Microbenchmarks.configuration

    Benchmark("JSON.parse.track") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try JSON(parsing: asciiTrack))
        }
    }

    Benchmark("JSON.parse.track.nonASCII") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try JSON(parsing: nonASCIITrack))
        }
    }

    // Parsed once, outside the measurement; a document that does not parse stops the run rather than
    // leaving a benchmark that measures nothing.
    let asciiDocument = parsedOrFail(asciiTrack)
    let nonASCIIDocument = parsedOrFail(nonASCIITrack)

    Benchmark("JSON.serialize.track") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try asciiDocument.serializedBytes())
        }
    }

    Benchmark("JSON.serialize.track.nonASCII") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try nonASCIIDocument.serializedBytes())
        }
    }
}

/// The parsed document, or a stop with the parser's error.
func parsedOrFail(_ bytes: [UInt8]) -> JSON {
    do {
        return try JSON(parsing: bytes)
    } catch {
        fatalError("JSONBenchmarks: a benchmark document does not parse: \(error)")
    }
}
