import ArgumentParser
import Glibc
import Sofa
import SofaStorage

/// `sofa demo`: the main job in one command — make a music library, index it, query it, with timings.
///
/// Until the View layer lands, the index is built directly on the engine the views will use: rows keyed by the
/// collation encoding of `[genre, artist, album, title]` plus the document ID, the sum of durations stored with
/// every subtree, and grouped queries answered from those stored sums.
struct DemoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Generate a music library, index it by genre/artist/album/title, and run grouped queries.")

    @Argument(help: "Directory for the demo database (replaced if it exists).")
    var directory = "music.sofa"

    @Option(help: "Number of tracks to generate.")
    var docs = 100_000

    func validate() throws {
        guard docs > 0 else { throw ValidationError("--docs must be positive") }
    }

    func run() throws {
        print("Sofa demo: \(grouped(docs)) tracks into \(directory)\n")
        try prepare(directory)

        var clock = Stopwatch()
        var library = MusicLibrary(seed: 42)
        let tracks = library.tracks(count: docs)
        var text: [UInt8] = []
        for t in tracks {
            try t.serialize(into: &text)
            text.append(0x0A)
        }
        step("1. Generated \(grouped(docs)) track documents, \(megabytes(text.count)) of JSON lines", clock.lap())

        var parsed: [JSON] = []
        parsed.reserveCapacity(docs)
        try text.withUnsafeBytes { all in
            var start = 0
            for i in 0..<all.count where all[i] == 0x0A {
                parsed.append(try JSON(parsing: UnsafeRawBufferPointer(rebasing: all[start..<i])))
                start = i + 1
            }
        }
        let parseTime = clock.lap()
        precondition(parsed == tracks, "parse(serialize(x)) must equal x")
        step("2. Parsed them back (\(Int(Double(text.count) / parseTime / 1e6)) MB/s)", parseTime)

        let index = try TrackIndex.build(path: directory + "/byHierarchy", tracks: parsed)
        let buildTime = clock.lap()
        let problems = index.tree.verify().problems
        step("3. Indexed by [genre, artist, album, title] with the sum of durations: \(grouped(docs)) rows " +
             "(\(grouped(Int(Double(docs) / buildTime))) rows/s), \(megabytes(index.fileSize)) on disk, " +
             "verify \(problems.isEmpty ? "clean" : "found \(problems.count) problems")", buildTime)
        print("")
        try queries(index, tracks: parsed)
        print("\nThe index is in \(directory)/byHierarchy; FORMAT.md describes every byte of it.")
    }

    private func queries(_ index: TrackIndex, tracks: [JSON]) throws {
        var clock = Stopwatch()
        let genres = try index.groups(level: 1)
        let t1 = clock.lap()
        table("groupLevel 1: play time per genre (first 10 of \(genres.count), in collation order)", t1,
              ["genre", "tracks", "hours"],
              genres.prefix(10).map { [$0.key[0]?.stringValue ?? "", grouped($0.count), hours($0.sum)] })

        let genre = genres.max { $0.count < $1.count }!.key[0]!
        let artists = try index.groups(level: 2, prefix: [genre])
        let t2 = clock.lap()
        table("groupLevel 2: artists of \(genre.stringValue!) (startKey [genre], endKey [genre, {}]; " +
              "first 8 of \(artists.count))", t2, ["artist", "tracks", "hours"],
              artists.prefix(8).map { [$0.key[1]?.stringValue ?? "", grouped($0.count), hours($0.sum)] })

        let artist = artists.max { $0.count < $1.count }!.key[1]!
        let albums = try index.groups(level: 3, prefix: [genre, artist])
        let t3 = clock.lap()
        table("groupLevel 3: albums of \(artist.stringValue!)", t3, ["album", "tracks", "minutes"],
              albums.prefix(8).map { [$0.key[2]?.stringValue ?? "", grouped($0.count), String($0.sum / 60)] })

        let last = try index.rows(prefix: [genre, artist], descending: true, limit: 5)
        let t4 = clock.lap()
        table("descending: the last 5 tracks of \(artist.stringValue!) by key", t4, ["album", "title", "seconds"],
              last.map { [$0.key[2]?.stringValue ?? "", $0.key[3]?.stringValue ?? "", String($0.duration)] })

        let whole = try index.reduce(prefix: [genre])
        let t5 = clock.lap()
        let naive = tracks.filter { $0["genre"] == genre }.reduce(0) { $0 + ($1["duration"]?.intValue ?? 0) }
        table("reduce over a range: all of \(genre.stringValue!), from stored subtree sums (a scan agrees: " +
              "\(naive == whole.sum ? "yes" : "NO"))", t5, ["tracks", "hours"],
              [[grouped(whole.count), hours(whole.sum)]])

        let samples: [JSON] = ["~", "1", "a", "A", "aa", "á", "b", "B", "東京", 2, 10, nil, true, ["a"], [:]]
        let sorted = try samples.sorted { try CollationKey($0) < CollationKey($1) }
        print("Collation: \(sorted.map(\.description).joined(separator: " < "))")
    }

    private func prepare(_ directory: String) throws {
        let index = directory + "/byHierarchy"
        if access(index, F_OK) == 0 { unlink(index) }
        if access(directory, F_OK) != 0 && mkdir(directory, 0o755) != 0 {
            throw SofaError(.ioError, "cannot create directory \(directory): \(String(cString: strerror(errno)))")
        }
    }
}

/// Wall-clock laps.
struct Stopwatch {
    private var last = Stopwatch.now()

    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// Seconds since the previous lap (or since creation).
    mutating func lap() -> Double {
        let t = Stopwatch.now()
        defer { last = t }
        return t - last
    }
}

func step(_ text: String, _ seconds: Double) {
    print("\(text)  [\(formatTime(seconds))]")
}

func formatTime(_ seconds: Double) -> String {
    seconds < 1e-3 ? "\(Int(seconds * 1e6)) µs" : seconds < 1 ? String(format1(seconds * 1e3)) + " ms"
        : format1(seconds) + " s"
}

func format1(_ x: Double) -> String {
    let tenths = Int((x * 10).rounded())
    return "\(tenths / 10).\(tenths % 10)"
}

func grouped(_ n: Int) -> String {
    let digits = Array(String(n))
    var out = ""
    for (i, d) in digits.enumerated() {
        if i > 0 && (digits.count - i) % 3 == 0 { out.append(",") }
        out.append(d)
    }
    return out
}

func megabytes(_ bytes: Int) -> String { format1(Double(bytes) / 1_048_576) + " MiB" }

func hours(_ seconds: Int) -> String { format1(Double(seconds) / 3600) }

/// Prints a titled table with aligned columns.
func table(_ title: String, _ seconds: Double, _ header: [String], _ rows: [[String]]) {
    print("\(title)  [\(formatTime(seconds))]")
    let all = [header] + rows
    let widths = header.indices.map { c in all.map { $0[c].count }.max() ?? 0 }
    for (n, row) in all.enumerated() {
        let cells = row.enumerated().map { c, cell in
            c == 0 ? cell.padding(toLength: widths[c]) : String(repeating: " ", count: widths[c] - cell.count) + cell
        }
        print("  " + cells.joined(separator: "  "))
        if n == 0 { print("  " + widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ")) }
    }
    print("")
}

extension String {
    func padding(toLength n: Int) -> String { count >= n ? self : self + String(repeating: " ", count: n - count) }
}
