import Foundation
import Testing

@testable import Sofa

/// The README's five-minute tour, as written there, on a small library: it must compile and answer.
@Suite struct ReadmeTourTests {
    @Test func tourRunsAsWritten() throws {
        let dir = NSTemporaryDirectory() + "sofa-readme-\(UUID().uuidString.prefix(8)).sofa"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let tracks: [JSON] = [
            ["_id": "t1", "type": "track", "genre": "Mope-Rock", "artist": "Radiohead", "album": "OK Computer",
             "title": "Airbag", "duration": 284],
            ["_id": "t2", "type": "track", "genre": "Mope-Rock", "artist": "Radiohead", "album": "OK Computer",
             "title": "Lucky", "duration": 259],
            ["_id": "t3", "type": "track", "genre": "Mope-Rock", "artist": "Radiohead", "album": "Kid A",
             "title": "Idioteque", "duration": 309],
            ["_id": "t4", "type": "track", "genre": "Mope-Rock", "artist": "Travis", "album": "The Man Who",
             "title": "Why Does It Always Rain on Me?", "duration": 265],
        ]

        let db = try Database(path: dir)
        defer { try? db.close() }
        try db.inBatch {
            for track in tracks { _ = try db.put(track, id: track["_id"]?.stringValue) }
        }
        let byHierarchy = db.view(named: "byHierarchy")
        byHierarchy.setMapReduce(version: "1", map: { doc, emit in
            guard doc["type"] == "track" else { return }
            emit([doc["genre"] ?? nil, doc["artist"] ?? nil, doc["album"] ?? nil, doc["title"] ?? nil], doc["duration"])
        }, reduce: .sum)

        var query = byHierarchy.createQuery()
        query.groupLevel = 3
        query.startKey = ["Mope-Rock", "Radiohead"]
        query.endKey = ["Mope-Rock", "Radiohead", [:]]
        let rows = try query.run()
        #expect(rows.map { $0.key(at: 2) } == ["Kid A", "OK Computer"])
        #expect(rows.map { $0.value } == [309, 543])

        let live = query.asLiveQuery()
        let seen = LockedBox<[Int]>([])
        _ = live.addChangeListener { rows in seen.withValue { $0.append(rows.count) } }
        live.start()
        _ = try live.waitForRows()
        _ = try db.put(["type": "track", "genre": "Mope-Rock", "artist": "Radiohead", "album": "Amnesiac",
                        "title": "Knives Out", "duration": 254], id: "t5")
        let deadline = Date().addingTimeInterval(10)
        while !seen.withValue({ $0.contains(3) }) && Date() < deadline { usleep(20_000) }
        live.stop()
        #expect(seen.withValue { $0.contains(3) }, "the live query never published the new album")
        #expect(try byHierarchy.verify().isEmpty)
    }
}

/// A value shared with a `@Sendable` listener.
final class LockedBox<Value>: @unchecked Sendable {
    private var value: Value
    private let lock = NSLock()

    init(_ value: Value) { self.value = value }

    func withValue<R>(_ body: (inout Value) -> R) -> R {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}
