import Testing

@testable import Sofa

/// Every example of the Couchbase Lite 1.x View and Query guides, as tests.
@Suite struct ViewGuideTests {
    /// View guide: phone numbers; count reduce written as the guide does, rereduce-correct.
    @Test func phoneNumbersCountReduce() throws {
        let dir = TemporaryDatabaseDirectory("sofa-views")
        let db = try Database(path: dir.database(), options: testOptions())
        try db.inBatch {
            for i in 0..<3000 {
                let phones: [JSON] = [.string("617-555-\(1000 + i)"), .string("\(600 + i % 7)-555-0000")]
                try db.put(["name": .string("person \(i)"), "phones": .array(phones)], id: "p\(i)")
            }
        }
        let phones = db.view(named: "phones")
        phones.setMapReduce(version: "2", map: { doc, emit in
            for phone in doc["phones"]?.arrayValue ?? [] { emit(phone, doc["name"]) }
        }, reduce: .custom { _, values, rereduce in
            rereduce ? .number(View.totalValues(values)) : .number(Double(values.count))
        })
        let all = try run(phones)
        #expect(all.count == 1 && all[0].value == 6000 && all[0].key == .null && all[0].documentID == nil)
        // The number in one area code: a key range.
        let area = try run(phones) {
            $0.startKey = "617-"
            $0.endKey = "617-"
            $0.prefixMatchLevel = 1
        }
        #expect(area.first?.value == .number(3000))
        let mapped = try run(phones) {
            $0.mapOnly = true
            $0.limit = 2
        }
        #expect(mapped.count == 2 && mapped[0].key == "600-555-0000" && mapped[0].value == "person 0")
        #expect(phones.totalRows == 6000 && !phones.isStale && phones.lastSequenceIndexed == db.lastSequence)
        // A built-in count agrees with the custom one, group by group.
        let builtIn = db.view(named: "phones2")
        builtIn.setMapReduce(version: "1", map: { doc, emit in
            for phone in doc["phones"]?.arrayValue ?? [] { emit(phone, doc["name"]) }
        }, reduce: .count)
        let a = try run(phones) { $0.groupLevel = 1 }
        let b = try run(builtIn) { $0.groupLevel = 1 }
        #expect(a.count == 3007 && a == b)
        expectSound(phones)
        expectSound(builtIn)
    }

    /// Query guide: `[color, model]` keys, all the red ones with `["red", {}]` as the end key.
    @Test func carsByColorAndModel() throws {
        let dir = TemporaryDatabaseDirectory("sofa-views")
        let db = try Database(path: dir.database(), options: testOptions())
        let cars: [(String, String)] = [("red", "Mini"), ("blue", "Golf"), ("red", "Alfa"), ("reddish", "Zed"),
                                        ("red", "Zonda"), ("green", "Golf")]
        for (i, car) in cars.enumerated() {
            try db.put(["color": .string(car.0), "model": .string(car.1)], id: "car\(i)")
        }
        let view = db.view(named: "carsByColorAndModel")
        view.setMap(version: "1") { doc, emit in emit([doc["color"] ?? nil, doc["model"] ?? nil], nil) }
        let red = try run(view) {
            $0.startKey = ["red"]
            $0.endKey = ["red", [:]]
        }
        #expect(keys(red) == [["red", "Alfa"], ["red", "Mini"], ["red", "Zonda"]])
        #expect(red.map(\.documentID) == ["car2", "car0", "car4"] && red.totalRows == 6)
        #expect(red[0].value == nil && red[0].key(at: 1) == "Alfa")
        #expect(red[0].document?.userProperties["model"] == "Alfa")
        // The same with prefix matching on ["red"].
        let prefixed = try run(view) {
            $0.startKey = ["red"]
            $0.endKey = ["red"]
            $0.prefixMatchLevel = 1
        }
        #expect(prefixed == red)
        expectSound(view)
    }

    /// Query guide: the music library drilled down to Mope-Rock / Radiohead, albums with running times.
    @Test func hierarchyGroupLevel3() throws {
        let dir = TemporaryDatabaseDirectory("sofa-views")
        let db = try Database(path: dir.database(), options: testOptions())
        let tracks: [(String, String, String, String, Double)] = [
            ("Mope-Rock", "Radiohead", "OK Computer", "Airbag", 284),
            ("Mope-Rock", "Radiohead", "OK Computer", "Lucky", 259),
            ("Mope-Rock", "Radiohead", "Kid A", "Idioteque", 309),
            ("Mope-Rock", "Radiohead", "Amnesiac", "Knives Out", 255),
            ("Mope-Rock", "Radiohead", "Kid A", "Everything", 251), ("Mope-Rock", "Portishead", "Dummy", "Roads", 305),
            ("Jazz", "Miles Davis", "Kind of Blue", "So What", 562), ("Mope-Rock", "Radiohead2", "X", "Y", 1),
        ]
        try db.inBatch {
            for (i, t) in tracks.enumerated() {
                try db.put(["type": "track", "genre": .string(t.0), "artist": .string(t.1), "album": .string(t.2),
                            "title": .string(t.3), "duration": .number(t.4)], id: "t\(i)")
            }
        }
        let view = db.view(named: "byHierarchy")
        view.setMapReduce(version: "1", map: { doc, emit in
            guard doc["type"] == "track" else { return }
            emit(.array([doc["genre"], doc["artist"], doc["album"], doc["title"]].map { $0 ?? .null }), doc["duration"])
        }, reduce: .sum)
        var query = view.createQuery()
        query.groupLevel = 3
        query.startKey = ["Mope-Rock", "Radiohead"]
        query.endKey = ["Mope-Rock", "Radiohead", [:]]
        var albumTitles: [String] = []
        var albumTimes: [Double] = []
        for row in try query.run() {
            albumTitles.append(row.key(at: 2)?.stringValue ?? "?")
            albumTimes.append(row.value?.doubleValue ?? -1)
        }
        #expect(albumTitles == ["Amnesiac", "Kid A", "OK Computer"])
        #expect(albumTimes == [255, 560, 543])
        query.groupLevel = 1
        query.startKey = nil
        query.endKey = nil
        let genres = try query.run()
        #expect(keys(genres) == [["Jazz"], ["Mope-Rock"]] && genres.map(\.value) == [562, 1664])
        query.groupLevel = 2
        query.descending = true
        #expect(try query.run().map(\.key) == [["Mope-Rock", "Radiohead2"], ["Mope-Rock", "Radiohead"],
                                               ["Mope-Rock", "Portishead"], ["Jazz", "Miles Davis"]])
        expectSound(view)
    }

    /// Query guide: descending from 100 down to 90.
    @Test func descendingStartAboveEnd() throws {
        let dir = TemporaryDatabaseDirectory("sofa-views")
        let db = try Database(path: dir.database(), options: testOptions())
        try db.inBatch { for i in 0..<120 { try db.put(["rating": .number(Double(i))], id: "m\(i)") } }
        let view = db.view(named: "postsByDate")
        view.setMap(version: "1") { doc, emit in emit(doc["rating"] ?? nil, nil) }
        let down = try run(view) {
            $0.descending = true
            $0.startKey = 100
            $0.endKey = 90
        }
        #expect(keys(down) == (90...100).reversed().map { .number(Double($0)) })
        let wrongWay = try run(view) {
            $0.descending = true
            $0.startKey = 90
            $0.endKey = 100
        }
        #expect(wrongWay.isEmpty)
        let latest = try run(view) {
            $0.descending = true
            $0.limit = 20
        }
        #expect(latest.count == 20 && latest[0].key == 119)
        let widgets = try run(view) {
            $0.startKey = 50
            $0.limit = 3
            $0.skip = 2
        }
        #expect(keys(widgets) == [52, 53, 54])
        expectSound(view)
    }

    /// Query guide: orders of January 2014 (`inclusiveEnd = false`), map only, then an average reduce.
    @Test func ordersByDateAverage() throws {
        let dir = TemporaryDatabaseDirectory("sofa-views")
        let db = try Database(path: dir.database(), options: testOptions())
        let orders: [(String, Double)] = [("2013-12-31", 1000), ("2014-01-01", 10), ("2014-01-15", 20),
                                          ("2014-01-31", 60), ("2014-02-01", 500), ("2014-02-02", 700)]
        for (i, o) in orders.enumerated() { try db.put(["date": .string(o.0), "price": .number(o.1)], id: "o\(i)") }
        let view = db.view(named: "ordersByDate")
        view.setMapReduce(version: "1", map: { doc, emit in emit(doc["date"] ?? nil, doc["price"]) },
                          reduce: .custom { _, values, rereduce in
            // An average must rereduce from (sum, count) pairs, not from averages.
            if rereduce {
                return ["sum": .number(values.reduce(0) { $0 + ($1["sum"]?.doubleValue ?? 0) }),
                        "count": .number(values.reduce(0) { $0 + ($1["count"]?.doubleValue ?? 0) })]
            }
            return ["sum": .number(View.totalValues(values)), "count": .number(Double(values.count))]
        })
        var query = view.createQuery()
        query.startKey = "2014-01-01"
        query.endKey = "2014-02-01"
        query.inclusiveEnd = false
        query.mapOnly = true
        let january = try query.run()
        #expect(keys(january) == ["2014-01-01", "2014-01-15", "2014-01-31"] && january.map(\.value) == [10, 20, 60])
        query.mapOnly = false
        let aggregate = try #require(try query.run().first?.value)
        #expect((aggregate["sum"]?.doubleValue ?? 0) / (aggregate["count"]?.doubleValue ?? 1) == 30)
        expectSound(view)
    }

    /// View guide: "likes" rows redirected to the liked post with `_id`.
    @Test func likesRedirect() throws {
        let dir = TemporaryDatabaseDirectory("sofa-views")
        let db = try Database(path: dir.database(), options: testOptions())
        try db.put(["type": "post", "text": "hello"], id: "post1")
        try db.put(["type": "like", "creator": "ann", "date": "2015-01-02", "likedPostID": "post1"], id: "like1")
        let view = db.view(named: "likes")
        view.setMap(version: "1") { doc, emit in
            guard doc["type"] == "like" else { return }
            emit([doc["creator"] ?? nil, doc["date"] ?? nil], ["_id": doc["likedPostID"] ?? nil])
        }
        let rows = try run(view)
        #expect(rows.count == 1 && rows[0].documentID == "post1" && rows[0].sourceDocumentID == "like1")
        #expect(rows[0].document?.userProperties["text"] == "hello")
        #expect(rows[0].toJSON() == ["id": "post1", "key": ["ann", "2015-01-02"], "value": ["_id": "post1"]])
        expectSound(view)
    }
}
