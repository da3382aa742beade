import CSQLite
import Sofa

/// SQLite as a Swift developer would keep JSON documents in it: `docs(id TEXT PRIMARY KEY, seq INTEGER, body
/// BLOB)` with an index on `seq` (the changes feed), WAL with `synchronous=FULL` (every commit fsync'd, as
/// Sofa's `.full`), a 64 MiB page cache, one connection without mutexes, statements prepared once.
///
/// Bodies are the compact JSON text of Sofa's serializer; reads parse them back with Sofa's parser, so both
/// engines turn the same objects into bytes and back. D1 is `BEGIN … COMMIT` around 1,000 INSERTs, D2 one
/// autocommit INSERT, D3 `SELECT body WHERE id = ?`, D4 `SELECT id, body ORDER BY id`.
final class SQLiteDocumentsEngine: DocumentsEngine, SQLiteConnection {
    static let name = "sqlite"

    static var configuration: String {
        sqliteSettings + ", docs(id TEXT PRIMARY KEY, seq INTEGER, body BLOB) + index on seq; "
            + "bodies parsed with Sofa's JSON"
    }

    private let path: String
    private(set) var db: OpaquePointer?
    private var insert: OpaquePointer?
    private var select: OpaquePointer?
    private var scan: OpaquePointer?
    /// The sequence of the last insert: the `seq` column, as Sofa's changes feed numbers writes.
    private var sequence: Int64 = 0

    init(directory: String) throws {
        path = directory + "/docs.sqlite"
        db = try openSQLite(path)
        do {
            try execute("CREATE TABLE IF NOT EXISTS docs(id TEXT PRIMARY KEY, seq INTEGER NOT NULL, body BLOB)")
            try execute("CREATE UNIQUE INDEX IF NOT EXISTS docs_seq ON docs(seq)")
            insert = try prepare("INSERT INTO docs(id, seq, body) VALUES(?1, ?2, ?3)")
            select = try prepare("SELECT body FROM docs WHERE id = ?1")
            scan = try prepare("SELECT id, body FROM docs ORDER BY id")
        } catch {
            try? close()
            throw error
        }
    }

    func putBatch(_ documents: ArraySlice<BenchDocument>) throws {
        try transaction {
            for document in documents {
                try insertRow(document)
            }
        }
    }

    func putOne(_ document: BenchDocument) throws {
        try insertRow(document)
    }

    func body(id: String) throws -> JSON? {
        defer { sqlite3_reset(select) }
        var id = id
        let rc = id.withUTF8 { utf8 in
            sqlite3_bind_text(select, 1, utf8.baseAddress, Int32(utf8.count), sqliteNoCopy)
            return sqlite3_step(select)
        }
        if rc == SQLITE_DONE { return nil }
        guard rc == SQLITE_ROW else { throw error("step") }
        return try JSON(parsing: bytes(select, 0))
    }

    func scanIDs(_ visit: (String) -> Void) throws {
        defer { sqlite3_reset(scan) }
        var rc = sqlite3_step(scan)
        while rc == SQLITE_ROW {
            // The body column is fetched as a pointer, not copied: available, as Sofa's row holds its entry.
            _ = sqlite3_column_blob(scan, 1)
            visit(text(scan, 0))
            rc = sqlite3_step(scan)
        }
        guard rc == SQLITE_DONE else { throw error("step") }
    }

    func scanBodies(_ visit: (String, JSON) -> Void) throws {
        defer { sqlite3_reset(scan) }
        var rc = sqlite3_step(scan)
        while rc == SQLITE_ROW {
            visit(text(scan, 0), try JSON(parsing: bytes(scan, 1)))
            rc = sqlite3_step(scan)
        }
        guard rc == SQLITE_DONE else { throw error("step") }
    }

    func settle() throws {
        try execute("PRAGMA wal_checkpoint(TRUNCATE)")
    }

    func close() throws {
        defer { (insert, select, scan, db) = (nil, nil, nil, nil) }
        try closeSQLite(db, finalizing: [insert, select, scan])
    }

    var filesOnDisk: [String] { sqliteFiles(path) }

    // MARK: - Statements

    private func insertRow(_ document: BenchDocument) throws {
        let body = try document.body.serializedBytes()
        sequence += 1
        defer { sqlite3_reset(insert) }
        var id = document.id
        let rc = id.withUTF8 { utf8 in
            body.withUnsafeBytes { bytes in
                sqlite3_bind_text(insert, 1, utf8.baseAddress, Int32(utf8.count), sqliteNoCopy)
                sqlite3_bind_int64(insert, 2, sequence)
                sqlite3_bind_blob(insert, 3, bytes.baseAddress, Int32(bytes.count), sqliteNoCopy)
                return sqlite3_step(insert)
            }
        }
        guard rc == SQLITE_DONE else { throw error("insert") }
    }
}
