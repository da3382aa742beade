import Glibc

/// One music track of the synthetic data set the storage, document, view and query microbenchmarks share.
///
/// It has the shape of gen.py's documents (shared/bench/WORKLOADS.md): a view key `[genre, artist, album,
/// title]` and a `duration` value. The set is generated in memory from a fixed seed rather than read from
/// `/tmp/sofa-bench-data`, so a microbenchmark needs no data set on disk and every run sees the same bytes,
/// which keeps the malloc counts in `Thresholds/` reproducible.
public struct Track: Sendable {
    /// `track-00000042`, as gen.py names documents.
    public var id: String
    /// One of ~40 genre names.
    public var genre: String
    /// A syllable name shared by ~60 tracks.
    public var artist: String
    /// A syllable name shared by ~10 tracks.
    public var album: String
    /// A syllable name; about 1 in 11 ends in a CJK or Hangul word.
    public var title: String
    /// Seconds, 60–599.
    public var duration: Int
    /// 1960–2024.
    public var year: Int
    /// 1–5.
    public var rating: Int
}

/// A deterministic set of tracks: ~40 genres, an artist per ~60 tracks, an album per ~10, syllable names,
/// about 1 in 11 titles with a CJK or Hangul word (the data set's non-ASCII share).
public enum Tracks {
    static let genres = [
        "Acid Jazz", "Ambient", "Bluegrass", "Blues", "Bossa Nova", "Classical", "Country", "Dance", "Disco",
        "Drum and Bass", "Dub", "Electronic", "Folk", "Funk", "Gospel", "Grunge", "Hip Hop", "House", "Indie",
        "Industrial", "Jazz", "K-Pop", "Latin", "Metal", "New Age", "Opera", "Pop", "Punk", "R&B", "Reggae",
        "Rock", "Salsa", "Samba", "Ska", "Soul", "Swing", "Synthpop", "Techno", "Trance", "World",
    ]
    static let syllables = [
        "ba", "be", "bo", "da", "de", "do", "fa", "fe", "ga", "go", "ha", "hi", "jo", "ka", "ke", "ko", "la", "li",
        "lo", "ma", "mi", "mo", "na", "ni", "no", "pa", "pi", "ra", "ri", "ro", "sa", "se", "so", "ta", "ti",
        "to", "va", "vi", "za", "zu", "lai", "nou", "vo", "ku", "dai", "tai", "rai", "hai",
    ]
    static let nonASCIIWords = ["夢", "늘", "あゆ", "사랑", "光", "かぜ", "바다", "星"]

    /// `count` tracks; the same `count` and `seed` always give the same tracks.
    public static func generate(count: Int, seed: UInt64 = 42) -> [Track] {
        var random = SeededRandom(seed: seed)
        func name(_ words: ClosedRange<Int>) -> String {
            (0..<Int.random(in: words, using: &random)).map { _ in
                let syllableCount = Int.random(in: 1...3, using: &random)
                let word = (0..<syllableCount).map { _ in syllables.randomElement(using: &random)! }.joined()
                return word.prefix(1).uppercased() + word.dropFirst()
            }.joined(separator: " ")
        }
        let artists = (0..<max(1, count / 60)).map { _ in name(1...2) }
        let albums = (0..<max(1, count / 10)).map { _ in name(1...3) }
        return (0..<count).map { i in
            var title = name(1...3)
            if Int.random(in: 0..<11, using: &random) == 0 {
                title += " " + nonASCIIWords.randomElement(using: &random)!
            }
            let album = Int.random(in: 0..<albums.count, using: &random)
            return Track(
                id: trackID(i), genre: genres[album % genres.count], artist: artists[album % artists.count],
                album: albums[album], title: title, duration: Int.random(in: 60..<600, using: &random),
                year: Int.random(in: 1960...2024, using: &random), rating: Int.random(in: 1...5, using: &random))
        }
    }

    /// The document ID of track `i`.
    public static func trackID(_ i: Int) -> String {
        let digits = String(i)
        return "track-" + String(repeating: "0", count: max(0, 8 - digits.count)) + digits
    }

    /// The engine-level row key of `track`, as `sofa-compare` encodes it (README.md, "Key"): each of genre,
    /// artist, album, title and the doc ID as `0x02`, its UTF-8 bytes, `0x00`, so `memcmp` order is view order.
    public static func rowKey(_ track: Track) -> [UInt8] {
        var key: [UInt8] = []
        key.reserveCapacity(80)
        for part in [track.genre, track.artist, track.album, track.title, track.id] {
            key.append(0x02)
            key.append(contentsOf: part.utf8)
            key.append(0x00)
        }
        return key
    }

    /// The engine-level row value of `track`: its duration as a 4-byte little-endian integer.
    public static func rowValue(_ track: Track) -> [UInt8] {
        withUnsafeBytes(of: UInt32(track.duration).littleEndian) { Array($0) }
    }
}

/// SplitMix64: a small seeded generator, so the data do not depend on the platform's random source.
public struct SeededRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// A generator whose sequence is fixed by `seed`.
    public init(seed: UInt64) { state = seed }

    /// The next 64 random bits.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A fresh directory under `/tmp` for one benchmark's files, removed with everything in it by ``remove()``.
public final class ScratchDirectory: @unchecked Sendable {
    /// The directory's path.
    public let path: String

    /// Creates `/tmp/sofa-micro-<label>.XXXXXX`; stops the run if that fails, since a benchmark without its
    /// files would measure nothing.
    public init(_ label: String) {
        var template = Array("/tmp/sofa-micro-\(label).XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            fatalError("ScratchDirectory: mkdtemp failed: \(String(cString: strerror(errno)))")
        }
        path = String(cString: made)
    }

    /// Removes the directory and its contents.
    public func remove() { Self.removeTree(path) }

    /// Removes `path`, descending into directories.
    private static func removeTree(_ path: String) {
        if let dir = opendir(path) {
            while let entry = readdir(dir) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) {
                    String(cString: $0.bindMemory(to: CChar.self).baseAddress!)
                }
                if name == "." || name == ".." { continue }
                removeTree(path + "/" + name)
            }
            closedir(dir)
            rmdir(path)
        } else {
            unlink(path)
        }
    }
}

/// Stops the run with `what` and the error: a benchmark whose setup failed would otherwise measure nothing.
public func orFail<T>(_ what: String, _ body: () throws -> T) -> T {
    do {
        return try body()
    } catch {
        fatalError("\(what): \(error)")
    }
}
