import Sofa

/// The Sofa databases of track documents that the document, view and query microbenchmarks run against.
public enum TrackDatabase {
    /// The JSON body of a track, as gen.py writes it (the ID is passed to `put` separately).
    public static func document(_ track: Track) -> JSON {
        ["type": "track", "genre": .string(track.genre), "artist": .string(track.artist),
         "album": .string(track.album), "title": .string(track.title), "duration": JSON(track.duration),
         "year": JSON(track.year), "rating": JSON(track.rating)]
    }

    /// Opens a new database in `directory` with durable commits and puts `tracks` into it, 10,000 per batch.
    public static func loaded(_ tracks: [Track], in directory: ScratchDirectory) -> Database {
        orFail("TrackDatabase: load \(tracks.count) documents") {
            let database = try Database(path: directory.path + "/tracks.sofa",
                                        options: DatabaseOptions(durability: .full))
            for start in stride(from: 0, to: tracks.count, by: 10_000) {
                try database.inBatch {
                    for track in tracks[start..<min(tracks.count, start + 10_000)] {
                        try database.put(document(track), id: track.id)
                    }
                }
            }
            return database
        }
    }

    /// The view of shared/bench/WORKLOADS.md: key `[genre, artist, album, title]`, value `duration`, `.sum`,
    /// over documents of type `track`. Defined, not yet indexed.
    public static func hierarchyView(in database: Database) -> View {
        orFail("TrackDatabase: define the view") {
            try database.defineView(named: "hierarchy", keyPaths: ["genre", "artist", "album", "title"],
                                    valuePath: "duration", reduce: .sum, documentType: "track")
        }
    }
}
