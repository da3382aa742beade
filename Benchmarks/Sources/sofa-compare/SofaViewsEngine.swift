import Glibc
import Sofa

/// Sofa's whole view pipeline through its public API: a ``Database`` holding the documents, a ``View`` with
/// the "by hierarchy" map and `.sum`, ``Query`` for every read. The index is brought up to date the way an app
/// gets it: ``View/updateIndex()`` for V1, and the default `indexUpdateMode = .before` of the first query
/// after the change for V6. Durability full (every commit `fdatasync`ed), the default 64 MiB node cache.
final class SofaViewsEngine: ViewsEngine {
    static let name = "sofa"
    static var configuration: String {
        "Sofa Database + View (map on every core, ICU collation keys, external sort, bulk load); "
            + "durability full, 64 MiB node cache; queries with indexUpdateMode .before"
    }

    private let path: String
    private var db: Database?
    private let view: View

    init(directory: String) throws {
        path = directory + "/tracks.sofa"
        removeTree(path)
        let db = try Database(path: path, options: DatabaseOptions(durability: .full))
        self.db = db
        view = db.view(named: TrackView.name)
        view.setMapReduce(version: "1", map: { doc, emit in
            if let row = TrackView.row(of: doc) { emit(row.key, row.value) }
        }, reduce: .sum)
    }

    private var database: Database {
        get throws {
            guard let db else { throw CompareError("sofa: database closed") }
            return db
        }
    }

    func load(_ documents: TrackDocuments) throws {
        let db = try database
        var batch: [JSON] = []
        batch.reserveCapacity(50_000)
        func flush() throws {
            try db.inBatch {
                for doc in batch { try db.put(doc) }
            }
            batch.removeAll(keepingCapacity: true)
        }
        try documents.forEach { text in
            batch.append(try JSON(parsing: text))
            if batch.count == 50_000 { try flush() }
        }
        try flush()
    }

    func buildIndex() throws -> Int {
        try view.updateIndex()
        return view.totalRows
    }

    func query(from startKey: JSON, limit: Int) throws -> [ViewRow] {
        var query = view.createQuery()
        query.startKey = startKey
        query.limit = limit
        query.mapOnly = true
        return try query.run().map { ViewRow(key: $0.key, value: $0.value, docID: $0.documentID) }
    }

    func rangeSum(low: JSON, high: JSON) throws -> Double {
        var query = view.createQuery()
        query.startKey = low
        query.endKey = high
        return try query.run().first?.value?.doubleValue ?? 0
    }

    func total() throws -> (rows: Int, sum: Double) {
        let sum = try view.createQuery().run().first?.value?.doubleValue ?? 0
        return (view.totalRows, sum)
    }

    func group(level: Int) throws -> [ViewRow] {
        var query = view.createQuery()
        query.groupLevel = level
        return try query.run().map { ViewRow(key: $0.key, value: $0.value, docID: nil) }
    }

    func change(_ changes: [(docID: String, duration: Int)]) throws {
        let db = try database
        try db.inBatch {
            for change in changes {
                guard let doc = try db.document(id: change.docID) else {
                    throw CompareError("sofa: no document \(change.docID)")
                }
                var properties = doc.userProperties
                properties["duration"] = JSON(change.duration)
                try db.put(properties, id: change.docID, rev: doc.revisionID)
            }
        }
    }

    func close() throws {
        try db?.close()
        db = nil
        removeTree(path)
    }
}
