#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing

@testable import Sofa
@testable import SofaStorage

/// Golden files (RELIABILITY.md R12): a database of each released format version, kept under
/// `Tests/Fixtures/golden/vN/`, must open, answer queries with the answers written down when it was made, and
/// verify. A change that stops an old file from opening, or changes what it answers, fails here.
///
/// `v1/music.sofa` was made by ``GoldenV1/generate(at:)`` (format 1, the first release). To make it again after
/// changing the generator — which only a new format version should need, as `v2/` — run
/// `SOFA_GOLDEN_WRITE=1 swift test --filter GoldenFileTests/writeV1`; the expected answers below are written
/// by hand from the generator's data (see the comments), not read from the file.
@Suite struct GoldenFileTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fixtures/golden").path

    /// A copy of `fixtures/version/music.sofa` in a fresh temporary directory (the fixture is never opened in
    /// place: a bug that wrote to a read-only database must not damage it).
    static func copy(_ version: String, into dir: TemporaryDatabaseDirectory) throws -> String {
        let path = dir.database("music")
        try FileManager.default.copyItem(atPath: fixtures + "/\(version)/music.sofa", toPath: path)
        return path
    }

    @Test(arguments: ["v1", "v2", "v2-log"])
    func opensReadOnlyAnswersQueriesAndVerifies(version: String) throws {
        let dir = TemporaryDatabaseDirectory("sofa-golden")
        let path = try Self.copy(version, into: dir)
        let hashes = try Self.hashes(path)
        let db = try Database(path: path, options: DatabaseOptions(readOnly: true))
        try GoldenV1.check(db)
        try db.close()
        #expect(try Self.hashes(path) == hashes, "a read-only open changed the files")
    }

    @Test func v1OpensWritableAndTakesWrites() throws {
        let dir = TemporaryDatabaseDirectory("sofa-golden")
        let path = try Self.copy("v1", into: dir)
        let db = try Database(path: path, options: testOptions())
        try GoldenV1.check(db)
        // An old file takes new commits in today's format, and its views update incrementally.
        try db.put(["type": "track", "title": "Song 26", "genre": "Pop", "artist": "Artist 2", "year": 2001,
                    "duration": 126], id: "track-26")
        let byYear = GoldenV1.byYear(db)
        var query = byYear.createQuery()
        query.keys = [2001]
        query.mapOnly = true
        #expect(try query.run().map { $0.documentID ?? "?" } == ["track-01", "track-06", "track-11", "track-16",
                                                                    "track-21", "track-26"])
        try db.compact()
        // Compaction keeps the storage format version: builds that read only version 1 still open the copy.
        #expect(db.documents.storage.formatVersion == 1)
        #expect(try #require(try byYear.index()).storage.formatVersion == 1)
        expectSound(db)
        expectSound(byYear)
        try db.close()
    }

    /// Today's generator still makes a database with the same answers (the hand-written expectations and the
    /// generator agree).
    @Test func generatorMakesTheSameAnswers() throws {
        let dir = TemporaryDatabaseDirectory("sofa-golden")
        let path = dir.database("music")
        try GoldenV1.generate(at: path)
        let db = try Database(path: path, options: DatabaseOptions(readOnly: true))
        try GoldenV1.check(db)
        try db.close()
    }

    /// v2 is what format version 2 writes: one-sync commits with a data check, a zero tail after the newest
    /// commit, view headers of version 2 with a materialized group level (the groups tree).
    @Test func v2HasTheVersionTwoStructures() throws {
        let dir = TemporaryDatabaseDirectory("sofa-golden")
        let path = try Self.copy("v2", into: dir)
        let db = try Database(path: path, options: DatabaseOptions(readOnly: true))
        let docs = db.documents.storage
        #expect(docs.formatVersion == 2)
        let onDisk = try FileManager.default.attributesOfItem(atPath: path + "/docs")[.size] as? Int ?? 0
        #expect(UInt64(onDisk) > docs.latestCommit.endOffset, "a zero tail follows the newest commit")
        let byGenre = try #require(try db.existingView(named: "byGenre")?.index())
        #expect(byGenre.storage.formatVersion == 2)
        #expect(try byGenre.header.groupLevels == [1])
        var query = try #require(db.existingView(named: "byGenre")).createQuery()
        query.groupLevel = 1
        query.indexUpdateMode = .never
        // Genres of the live tracks with their summed durations (GoldenV1.check lists the rows behind them).
        #expect(try query.run().map { "\($0.key)" } == ["[\"Jazz\"]", "[\"Pop\"]", "[\"Rock\"]"])
        try db.close()
    }

    /// v2-log is format version 2 whose newest docs commit has a commit log (docs metadata version 2, FORMAT.md
    /// §10.1.4, §10.1.7): the generator's last writes are single-document commits.
    @Test func v2LogHasACommitLog() throws {
        let dir = TemporaryDatabaseDirectory("sofa-golden")
        let path = try Self.copy("v2-log", into: dir)
        let db = try Database(path: path, options: DatabaseOptions(readOnly: true))
        #expect(db.documents.storage.latestCommit.metadata.first == 2)
        let pending = try db.readSnapshot().pending
        #expect(pending.length > 0 && !pending.entries.isEmpty)
        try db.close()
        // Writable: compaction folds the log, and the answers stay.
        let writer = try Database(path: path, options: testOptions())
        _ = try writer.compact()
        #expect(try writer.readSnapshot().pending.isEmpty)
        try GoldenV1.check(writer)
        expectSound(writer)
        try writer.close()
    }

    /// Writes `v2-log/music.sofa`: the v1 generator's data made by a build with the docs commit log, whose last
    /// single-document commits leave a log chain in the newest commit.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["SOFA_GOLDEN_WRITE"] == "2-log"))
    func writeV2Log() throws {
        try Self.generateFixture("v2-log")
    }

    /// Makes `fixtures/version/music.sofa` with the v1 generator, refusing to overwrite it, and returns its path.
    @discardableResult
    static func generateFixture(_ version: String) throws -> String {
        let path = fixtures + "/\(version)/music.sofa"
        #expect(!FileManager.default.fileExists(atPath: path), "\(version)/ exists: golden files are never regenerated")
        try FileManager.default.createDirectory(atPath: fixtures + "/\(version)", withIntermediateDirectories: true)
        try GoldenV1.generate(at: path)
        return path
    }

    /// Writes `v2/music.sofa`: the v1 generator's data, made by format version 2, plus a grouped query on a
    /// writable database so the declarative view's index holds group level 1.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["SOFA_GOLDEN_WRITE"] == "2"))
    func writeV2() throws {
        let path = try Self.generateFixture("v2")
        let db = try Database(path: path)
        var query = try #require(db.existingView(named: "byGenre")).createQuery()
        query.groupLevel = 1
        query.indexUpdateMode = .never
        _ = try query.run()
        try db.close()
    }

    @Test(.enabled(if: ProcessInfo.processInfo.environment["SOFA_GOLDEN_WRITE"] == "1"))
    func writeV1() throws {
        let path = Self.fixtures + "/v1/music.sofa"
        try? FileManager.default.removeItem(atPath: path)
        try FileManager.default.createDirectory(atPath: Self.fixtures + "/v1", withIntermediateDirectories: true)
        try GoldenV1.generate(at: path)
    }

    /// Every file's bytes under `path`, by relative path.
    static func hashes(_ path: String) throws -> [String: Data] {
        var out: [String: Data] = [:]
        for case let name as String in FileManager.default.enumerator(atPath: path)! {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: path + "/" + name, isDirectory: &isDirectory),
               !isDirectory.boolValue {
                out[name] = try Data(contentsOf: URL(fileURLWithPath: path + "/" + name))
            }
        }
        return out
    }
}

/// The data of the v1 golden database and the answers it must give.
///
/// Tracks `track-01` … `track-25`: track i is `{"type":"track","title":"Song i","genre":G[i % 3],
/// "artist":"Artist (i % 4)","year":2000 + i % 5,"duration":100 + i}` with G = [Jazz, Rock, Pop]; `track-25`
/// also has 1,800 bytes of lyrics (a body stored as a chunk of its own). Then: a note `note-1`; tracks 4, 8 and
/// 12 updated to duration 1000 + i; tracks 5, 10 and 15 deleted; conflicts force-inserted on tracks 4 and 8
/// (generation 1, losing to the updated winner); track 15 recreated with duration 515. Views: `byYear` (code:
/// tracks → year, duration; sum), `byGenre` (declarative: [genre, artist] → duration, sum, type track),
/// indexed after the first 24 tracks and again at the end. 35 changes in all.
enum GoldenV1 {
    static let genres = ["Jazz", "Rock", "Pop"]

    static func track(_ i: Int, duration: Int? = nil) -> JSON {
        var body: JSONObject = ["type": "track", "title": .string("Song \(i)"), "genre": .string(genres[i % 3]),
                                "artist": .string("Artist \(i % 4)"), "year": .number(Double(2000 + i % 5)),
                                "duration": .number(Double(duration ?? 100 + i))]
        if i == 25 { body["lyrics"] = .string(String(repeating: "la ", count: 600)) }
        return .object(body)
    }

    static func id(_ i: Int) -> String { i < 10 ? "track-0\(i)" : "track-\(i)" }

    /// The map/reduce view, registered (its map is code, so every opener registers it).
    static func byYear(_ db: Database) -> View {
        let view = db.view(named: "byYear")
        view.setMapReduce(version: "1", map: { doc, emit in
            if doc["type"] == "track", let year = doc["year"] { emit(year, doc["duration"]) }
        }, reduce: .sum)
        return view
    }

    static func generate(at path: String) throws {
        let db = try Database(path: path)
        try db.inBatch { for i in 1...24 { try db.put(track(i), id: id(i)) } }
        let byYear = byYear(db)
        let byGenre = try db.defineView(named: "byGenre", keyPaths: ["genre", "artist"], valuePath: "duration",
                                        reduce: .sum, documentType: "track")
        try byYear.updateIndex()
        try byGenre.updateIndex()
        try db.put(["type": "note", "text": "not a track"], id: "note-1")
        try db.put(track(25), id: id(25))
        for i in [4, 8, 12] {
            try db.put(track(i, duration: 1000 + i), id: id(i), rev: try db.document(id: id(i))!.revisionID)
        }
        for i in [5, 10, 15] { try db.delete(id: id(i), rev: try db.document(id: id(i))!.revisionID) }
        try db.forceInsert(["type": "track", "title": "Theirs 4"], id: id(4),
                           revisionHistory: ["1-" + String(repeating: "a", count: 32)])
        try db.forceInsert(["type": "track", "title": "Theirs 8"], id: id(8),
                           revisionHistory: ["1-" + String(repeating: "b", count: 32)])
        try db.put(track(15, duration: 515), id: id(15))
        try byYear.updateIndex()
        try byGenre.updateIndex()
        try db.close()
    }

    /// Checks every answer written down for the v1 data.
    static func check(_ db: Database) throws {
        // Documents: 23 live tracks (25 − tracks 5 and 10) and the note; 2 tombstones; 35 changes.
        #expect(db.documentCount == 24)
        #expect(db.deletedDocumentCount == 2)
        #expect(db.lastSequence == 35)
        var all = db.createAllDocumentsQuery()
        all.allDocsMode = .includeDeleted
        #expect(try all.run().map { $0.documentID ?? "?" } == ["note-1"] + (1...25).map(id))
        let tombstone = try db.document(id: id(5), includeDeleted: true)
        #expect(try db.document(id: id(5)) == nil && tombstone?.isDeleted == true)
        let four = try #require(try db.document(id: id(4)))
        #expect(four["duration"] == 1004 && four["title"] == "Song 4")
        #expect(four.revisionID.hasPrefix("2-")
                && four.conflictingRevisions == ["1-" + String(repeating: "a", count: 32)])
        let theirs = try #require(try db.document(id: id(4), rev: "1-" + String(repeating: "a", count: 32)))
        #expect(theirs["title"] == "Theirs 4")
        let fifteen = try #require(try db.document(id: id(15)))
        #expect(fifteen["duration"] == 515 && fifteen.revisionID.hasPrefix("3-"))
        #expect(try db.document(id: id(25))?["lyrics"]?.stringValue?.count == 1800)
        #expect(try db.document(id: "note-1")?["text"] == "not a track")
        expectSound(db, "golden v1")

        // byYear: year = 2000 + i % 5 over the 23 live tracks. Durations: 100 + i, but 1004, 1008, 1012 for
        // tracks 4, 8, 12 and 515 for track 15.
        let byYear = byYear(db)
        var rows = byYear.createQuery()
        rows.mapOnly = true
        rows.keys = [2000]  // i = 15 (515), 20 (120), 25 (125); 5 and 10 are deleted
        #expect(try rows.run().map { "\($0.documentID ?? "?")=\($0.value.map { "\($0)" } ?? "-")" } ==
                ["track-15=515", "track-20=120", "track-25=125"])
        rows.keys = nil
        let allRows = try rows.run()
        #expect(byYear.totalRows == 23 && allRows.count == 23)
        var sums = byYear.createQuery()
        sums.groupLevel = 1
        // 2000: 515+120+125 = 760; 2001: i = 1, 6, 11, 16, 21 → 101+106+111+116+121 = 555;
        // 2002: 2, 7, 12, 17, 22 → 102+107+1012+117+122 = 1460; 2003: 3, 8, 13, 18, 23 → 103+1008+113+118+123 =
        // 1465; 2004: 4, 9, 14, 19, 24 → 1004+109+114+119+124 = 1470.
        #expect(try sums.run().map { "\($0.key)=\($0.value.map { "\($0)" } ?? "-")" } ==
                ["2000=760", "2001=555", "2002=1460", "2003=1465", "2004=1470"])
        var total = byYear.createQuery()
        total.startKey = 2001
        total.endKey = 2003
        #expect(try total.run().first?.value == 3480)  // 555 + 1460 + 1465
        expectSound(byYear, "golden v1 byYear")

        // byGenre: genre G[i % 3] — Jazz: 3, 6, 9, 12, 15, 18, 21, 24; Rock: 1, 4, 7, 13, 16, 19, 22, 25
        // (10 deleted); Pop: 2, 8, 11, 14, 17, 20, 23 (5 deleted).
        let byGenre = try #require(db.existingView(named: "byGenre"))
        #expect(byGenre.definition?.keyPaths == ["genre", "artist"] && byGenre.reduce?.name == "sum")
        var genres = byGenre.createQuery()
        genres.groupLevel = 1
        // Jazz: 103+106+109+1012+515+118+121+124 = 2208; Rock: 101+1004+107+113+116+119+122+125 = 1807;
        // Pop: 102+1008+111+114+117+120+123 = 1695.
        #expect(try genres.run().map { "\($0.key)=\($0.value.map { "\($0)" } ?? "-")" } ==
                ["[\"Jazz\"]=2208", "[\"Pop\"]=1695", "[\"Rock\"]=1807"])
        var artists = byGenre.createQuery()
        artists.groupLevel = 2
        artists.startKey = ["Rock"]
        artists.endKey = ["Rock", [:]]
        // Rock by artist (i % 4): 0: 4, 16 → 1004+116 = 1120; 1: 1, 13, 25 → 101+113+125 = 339;
        // 2: 22 → 122; 3: 7, 19 → 107+119 = 226.
        #expect(try artists.run().map { "\($0.key)=\($0.value.map { "\($0)" } ?? "-")" } ==
                ["[\"Rock\",\"Artist 0\"]=1120", "[\"Rock\",\"Artist 1\"]=339", "[\"Rock\",\"Artist 2\"]=122",
                 "[\"Rock\",\"Artist 3\"]=226"])
        var mapped = byGenre.createQuery()
        mapped.mapOnly = true
        mapped.startKey = ["Pop", "Artist 0"]
        mapped.endKey = ["Pop", "Artist 0", [:]]
        // Pop and i % 4 == 0: 8, 20.
        #expect(try mapped.run().map { $0.documentID ?? "?" } == ["track-08", "track-20"])
        expectSound(byGenre, "golden v1 byGenre")
    }
}
