import Sofa
import SofaStorage

/// A deterministic music library in the shape of the benchmark data set (shared/bench/WORKLOADS.md):
/// tracks with a genre, an artist, an album, a title, a duration, a year and a rating; skewed cardinalities
/// (40 genres, about one artist per 50 tracks, one album per 10) and a few percent of non-ASCII names, so
/// that the collation of accents and CJK shows.
struct MusicLibrary {
    static let genres = [
        "Rock", "Pop", "Hip-Hop", "Electronic", "Jazz", "Classical", "Country", "R&B", "Metal", "Indie",
        "Alternative", "Blues", "Folk", "Soul", "Reggae", "Punk", "Latin", "Soundtrack", "House", "Techno",
        "Funk", "Ambient", "Disco", "Gospel", "World", "Trance", "K-Pop", "J-Pop", "Ska", "Grunge",
        "Drum and Bass", "Dubstep", "Opera", "Swing", "Bluegrass", "Bossa Nova", "Chanson Française",
        "Música Popular Brasileira", "Trip-Hop", "Enka",
    ]
    static let syllables = ["ba", "ko", "ri", "ta", "mel", "son", "dra", "vi", "lu", "ne", "po", "sha", "gor",
                            "fen", "da", "mi", "ro", "qui", "zen", "la", "tor", "wen", "ka", "el"]
    static let cjk = Array("東京大阪音楽愛夜空星月光雨風花海山川心夢歌恋青春時間世界한국사랑노래별바다하늘꿈ひかりさくらうたそら")
    static let accents: [Character: Character] = ["a": "á", "e": "é", "i": "í", "o": "ö", "u": "ü", "c": "ç", "n": "ñ"]

    private var random: SplitMix64

    init(seed: UInt64) { random = SplitMix64(seed: seed) }

    private mutating func next() -> UInt64 { random.next() }

    private mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }

    /// An index skewed toward small values (roughly Zipf): popular genres and artists get most tracks.
    private mutating func skewed(_ n: Int) -> Int {
        let u = Double(next() >> 11) / Double(1 << 53)
        return min(n - 1, Int(Double(n) * u * u * u))
    }

    private mutating func word() -> String {
        var w = ""
        for _ in 0..<(1 + below(3)) { w += MusicLibrary.syllables[below(MusicLibrary.syllables.count)] }
        return w.prefix(1).uppercased() + w.dropFirst()
    }

    private mutating func name(words: Int) -> String {
        var text = (0..<words).map { _ in word() }.joined(separator: " ")
        let roll = below(100)
        if roll < 3 {
            text = String(text.map { MusicLibrary.accents[$0] ?? $0 })
        } else if roll < 5 {
            text = String((0..<(2 + below(4))).map { _ in MusicLibrary.cjk[below(MusicLibrary.cjk.count)] })
        }
        return text
    }

    /// `count` track documents, `_id` "track-00000000" onward.
    mutating func tracks(count: Int) -> [JSON] {
        let artistCount = max(1, count / 50), albumCount = max(1, count / 10)
        var artists: [(name: String, genre: String)] = []
        for _ in 0..<artistCount {
            var artist = name(words: 1 + below(2))
            if below(100) < 15 { artist = "The " + artist }
            artists.append((artist, MusicLibrary.genres[skewed(MusicLibrary.genres.count)]))
        }
        var albums: [(title: String, artist: Int, year: Int)] = []
        for _ in 0..<albumCount {
            albums.append((name(words: 1 + below(3)), skewed(artistCount), 2024 - min(74, skewed(75))))
        }
        return (0..<count).map { i in
            let album = albums[below(albumCount)]
            let artist = artists[album.artist]
            let id = "track-" + String(repeating: "0", count: max(0, 8 - String(i).count)) + String(i)
            return [
                "_id": .string(id), "type": "track", "genre": .string(artist.genre), "artist": .string(artist.name),
                "album": .string(album.title), "title": .string(name(words: 1 + below(4))),
                "duration": JSON(60 + below(420)), "year": JSON(album.year), "rating": JSON(below(6)),
            ]
        }
    }
}
