import ArgumentParser
import Glibc
import Sofa

/// `sofa demo`: the main job in one command — make a music library, load it, define views, query them.
///
/// The views are declarative (stored in their index files), so after the demo the database can be explored with
/// the other verbs and from code without redefining them: `byHierarchy` (`[genre, artist, album, title]` →
/// duration, sum), `byYear` (year → duration, stats) and `byArtist` (artist, count).
struct DemoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Load a generated music library, index it with three views, and run the Couchbase Lite guide queries.")

    @Argument(help: "Directory of the demo database (replaced if it exists).")
    var directory = "music.sofa"

    @Option(help: "Number of tracks to generate.")
    var docs = 100_000

    @Flag(help: "Print one JSON object per line (each step, query and the result) instead of text.")
    var json = false

    func validate() throws {
        guard docs > 0 else { throw ValidationError("--docs must be positive") }
        guard directory.hasSuffix(".sofa") else { throw ValidationError("the directory must end in .sofa") }
    }

    func run() throws {
        DemoOutput.json = json
        defer { Output.flush() }
        DemoOutput.say("Sofa demo: \(grouped(docs)) tracks into \(directory)\n",
                       ["demo": JSON(directory), "tracks": number(docs)])
        try removeDatabase(directory)
        var clock = Stopwatch()
        var library = MusicLibrary(seed: 42)
        let tracks = library.tracks(count: docs)
        step("1. Generated \(grouped(docs)) track documents", clock.lap())

        let db = try Database(path: directory)
        defer { try? db.close() }
        for start in stride(from: 0, to: tracks.count, by: 5_000) {
            try db.inBatch {
                for track in tracks[start..<min(start + 5_000, tracks.count)] {
                    _ = try db.put(track, id: track["_id"]?.stringValue)
                }
            }
        }
        let loadTime = clock.lap()
        step("2. Stored them in batches of 5,000 durable commits (\(grouped(Int(Double(docs) / loadTime))) docs/s)",
             loadTime)

        let hierarchy = try db.defineView(named: "byHierarchy", keyPaths: ["genre", "artist", "album", "title"],
                                          valuePath: "duration", reduce: .sum, documentType: "track")
        let byYear = try db.defineView(named: "byYear", keyPaths: ["year"], valuePath: "duration", reduce: .stats,
                                       documentType: "track")
        let byArtist = try db.defineView(named: "byArtist", keyPaths: ["artist"], reduce: .count,
                                         documentType: "track")
        for view in [hierarchy, byYear, byArtist] { try view.updateIndex() }
        let indexTime = clock.lap()
        step("3. Indexed three views: \(grouped(3 * docs)) rows (\(grouped(Int(Double(3 * docs) / indexTime))) rows/s)",
             indexTime)
        DemoOutput.say("", nil)
        try queries(hierarchy: hierarchy, byYear: byYear, byArtist: byArtist, tracks: tracks)

        let problems = try db.verify()  // the document file and every view's index file
        step("Verified the document file and every index: " +
             (problems.isEmpty ? "clean" : "\(problems.count) problems: \(problems.prefix(3))"), clock.lap())
        DemoOutput.say("\nThe database is in \(directory); FORMAT.md describes every byte of it.",
                       ["database": JSON(directory), "problems": number(problems.count)])
        if !problems.isEmpty {
            Output.flush()
            throw ExitCode(1)
        }
    }

    private func queries(hierarchy: View, byYear: View, byArtist: View, tracks: [JSON]) throws {
        var clock = Stopwatch()
        var query = hierarchy.createQuery()
        query.groupLevel = 1
        let genres = try query.run()
        table("groupLevel 1 on byHierarchy: play time per genre (first 10 of \(genres.count))", clock.lap(),
              ["genre", "hours"], genres.prefix(10).map { [$0.key(at: 0)?.stringValue ?? "", hours($0.value)] })

        let genre = try largestGroup(hierarchy, groupLevel: 1, prefix: [])
        query.groupLevel = 2
        query.startKey = [genre]
        query.endKey = [genre, [:]]
        let artists = try query.run()
        table("groupLevel 2, startKey [\"\(genre.stringValue!)\"], endKey [\"\(genre.stringValue!)\", {}]: its artists " +
              "(first 8 of \(artists.count))", clock.lap(), ["artist", "hours"],
              artists.prefix(8).map { [$0.key(at: 1)?.stringValue ?? "", hours($0.value)] })

        let artist = try largestGroup(hierarchy, groupLevel: 2, prefix: [genre])
        query.groupLevel = 3
        query.startKey = [genre, artist]
        query.endKey = [genre, artist, [:]]
        let albums = try query.run()
        table("groupLevel 3: the albums of \(artist.stringValue!) (the Mope-Rock/Radiohead drill-down)", clock.lap(),
              ["album", "minutes"],
              albums.prefix(8).map { [$0.key(at: 2)?.stringValue ?? "", String(Int(($0.value?.doubleValue ?? 0) / 60))] })

        var recent = byYear.createQuery()
        recent.mapOnly = true
        recent.descending = true
        recent.startKey = 2024
        recent.endKey = 2020
        recent.limit = 5
        let latest = try recent.run()
        table("descending byYear from 2024 to 2020, limit 5 (map only)", clock.lap(), ["year", "track", "seconds"],
              latest.map { [$0.key.description, $0.documentID ?? "", $0.value?.description ?? ""] })

        var perYear = byYear.createQuery()
        perYear.groupLevel = 1
        perYear.startKey = 2015
        perYear.endKey = 2019
        let stats = try perYear.run()
        table("stats reduce per year, 2015…2019 (sum, count, min, max, sumsqr)", clock.lap(),
              ["year", "tracks", "min", "max", "avg"],
              stats.map { row in
                  let s = row.value
                  let count = s?["count"]?.doubleValue ?? 0
                  return [row.key.description, grouped(Int(count)), s?["min"]?.description ?? "",
                          s?["max"]?.description ?? "", String(Int((s?["sum"]?.doubleValue ?? 0) / max(count, 1)))]
              })

        var prefix = byArtist.createQuery()
        prefix.startKey = "The B"
        prefix.endKey = "The B"
        prefix.prefixMatchLevel = 1
        prefix.groupLevel = 1
        let theB = try prefix.run()
        table("prefixMatchLevel 1: artists starting with \"The B\", with their track counts (first 6 of \(theB.count))",
              clock.lap(), ["artist", "tracks"],
              theB.prefix(6).map { [$0.key.stringValue ?? "", $0.value?.description ?? ""] })

        var total = hierarchy.createQuery()
        total.startKey = [genre]
        total.endKey = [genre, [:]]
        let sum = try total.run().first?.value?.doubleValue ?? 0
        let naive = tracks.filter { $0["genre"] == genre }.reduce(0) { $0 + ($1["duration"]?.doubleValue ?? 0) }
        table("reduce over a range: all of \(genre.stringValue!), from stored subtree sums (a scan agrees: " +
              "\(naive == sum ? "yes" : "NO"))", clock.lap(), ["hours"], [[hours(.number(sum))]])

        let samples: [JSON] = ["~", "1", "a", "A", "aa", "á", "b", "B", "東京", 2, 10, nil, true, ["a"], [:]]
        let sorted = samples.sorted { JSON.collate($0, $1) < 0 }
        DemoOutput.say("Collation: \(sorted.map(\.description).joined(separator: " < "))\n",
                       ["collation": .array(sorted.map { JSON($0.description) })])
    }

    /// The key item at `groupLevel` whose group has the largest reduced value (play time) under `prefix`.
    private func largestGroup(_ view: View, groupLevel: Int, prefix: [JSON]) throws -> JSON {
        var query = view.createQuery()
        query.groupLevel = groupLevel
        if !prefix.isEmpty {
            query.startKey = .array(prefix)
            query.endKey = .array(prefix + [[:]])
        }
        let best = try query.run().max { ($0.value?.doubleValue ?? 0) < ($1.value?.doubleValue ?? 0) }
        return best?.key(at: groupLevel - 1) ?? nil
    }

    private func removeDatabase(_ directory: String) throws {
        guard access(directory, F_OK) == 0 else { return }
        for sub in ["views", ""] {
            let dir = sub.isEmpty ? directory : directory + "/" + sub
            guard let handle = opendir(dir) else { continue }
            while let entry = readdir(handle) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                if name != "." && name != ".." && name != "views" { unlink(dir + "/" + name) }
            }
            closedir(handle)
            if !sub.isEmpty { rmdir(dir) }
        }
        if rmdir(directory) != 0 {
            throw SofaError(.ioError, "cannot replace \(directory): \(String(cString: strerror(errno)))")
        }
    }
}
