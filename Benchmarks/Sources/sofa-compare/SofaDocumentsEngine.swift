import Sofa

/// Sofa's ``Database`` through its public API, durability `.full` (every commit `fdatasync`s), a 256 MiB node
/// cache. D1 is `inBatch { put … }`, D2 one `put` per commit, D3 `document(id:)`, D4 an all-documents query
/// streamed with `Query.forEachRow`.
final class SofaDocumentsEngine: DocumentsEngine {
    static let name = "sofa"
    static var configuration: String {
        "Sofa Database, durability full, \(cacheBytes >> 20) MiB node cache; D4 = createAllDocumentsQuery().forEachRow"
            + " (rows handed out as the scan reads them; run() would keep them all)"
    }

    static let cacheBytes = 256 << 20

    private let db: Database
    private let path: String

    init(directory: String) throws {
        // The engine's directory is the database directory (`NAME.sofa/`): its files sit directly in it.
        path = directory
        db = try Database(path: directory, options: DatabaseOptions(durability: .full, nodeCacheBytes: Self.cacheBytes))
    }

    func putBatch(_ documents: ArraySlice<BenchDocument>) throws {
        try db.inBatch {
            for document in documents {
                try db.put(document.body, id: document.id)
            }
        }
    }

    func putOne(_ document: BenchDocument) throws {
        try db.put(document.body, id: document.id)
    }

    func body(id: String) throws -> JSON? {
        try db.document(id: id)?.userProperties
    }

    func scanIDs(_ visit: (String) -> Void) throws {
        try db.createAllDocumentsQuery().forEachRow { row in
            visit(row.documentID!)
        }
    }

    func scanBodies(_ visit: (String, JSON) -> Void) throws {
        try db.createAllDocumentsQuery().forEachRow { row in
            guard let document = row.document else { throw CompareError("sofa: row \(row.key) has no document") }
            visit(document.id, document.userProperties)
        }
    }

    func settle() throws {}

    func close() throws {
        try db.close()
    }

    var filesOnDisk: [String] {
        [path + "/docs"]
    }
}
