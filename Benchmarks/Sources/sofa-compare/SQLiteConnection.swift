import CSQLite

/// What the SQLite engines of every suite share: opening a connection with the settings the workloads compare
/// against (`synchronous=FULL` on a WAL, Sofa's `.full`), and running, preparing and grouping statements with
/// errors that name SQLite's message.
protocol SQLiteConnection: AnyObject {
    /// The open connection; nil once the engine is closed.
    var db: OpaquePointer? { get }
}

/// `SQLITE_STATIC`: the bound bytes stay valid until the statement is reset, so SQLite need not copy them.
let sqliteNoCopy: sqlite3_destructor_type? = nil

/// The start of an SQLite engine's configuration line: the library's version and what ``openSQLite(_:configure:)``
/// sets.
var sqliteSettings: String {
    "SQLite \(String(cString: sqlite3_libversion())); WAL, synchronous=FULL, cache_size=-65536 (64 MiB)"
}

/// The files of the SQLite database at `path` in WAL mode: the database, its WAL and its shared-memory index.
func sqliteFiles(_ path: String) -> [String] {
    [path, path + "-wal", path + "-shm"]
}

/// Finalizes `statements` and closes the connection `db`; the caller forgets both. Closing the last connection
/// checkpoints the WAL into the database file and deletes it.
///
/// - Throws: ``CompareError`` when SQLite refuses to close.
func closeSQLite(_ db: OpaquePointer?, finalizing statements: [OpaquePointer?]) throws {
    for statement in statements { sqlite3_finalize(statement) }
    guard let db else { return }
    let rc = sqlite3_close_v2(db)
    guard rc == SQLITE_OK else { throw CompareError("sqlite: close failed (\(rc))") }
}

/// Opens or creates the database at `path`, lets `configure` install what must precede any statement (a
/// collation), and sets WAL, `synchronous=FULL` and a 64 MiB page cache.
///
/// - Throws: ``CompareError`` naming the file and SQLite's message; the connection is closed again.
func openSQLite(_ path: String, configure: (OpaquePointer) throws -> Void = { _ in }) throws -> OpaquePointer {
    var db: OpaquePointer?
    let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
    guard sqlite3_open_v2(path, &db, flags, nil) == SQLITE_OK, let handle = db else {
        let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
        sqlite3_close_v2(db)
        throw CompareError("sqlite: cannot open \(path): \(message)")
    }
    do {
        try configure(handle)
        for pragma in ["PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", "PRAGMA cache_size=-65536"] {
            guard sqlite3_exec(handle, pragma, nil, nil, nil) == SQLITE_OK else {
                throw CompareError("sqlite: \(pragma): \(String(cString: sqlite3_errmsg(handle)))")
            }
        }
    } catch {
        sqlite3_close_v2(handle)
        throw error
    }
    return handle
}

extension SQLiteConnection {
    /// Runs `sql` (one or more statements, no results).
    func execute(_ sql: String) throws {
        guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else { throw error(sql) }
    }

    /// A statement kept for the connection's lifetime (finalized by the engine's `close`).
    func prepare(_ sql: String) throws -> OpaquePointer? {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil) == SQLITE_OK
        else { throw error("prepare \(sql)") }
        return statement
    }

    /// Runs `body` in one write transaction, rolled back when it throws.
    func transaction(_ body: () throws -> Void) throws {
        try execute("BEGIN IMMEDIATE")
        do {
            try body()
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
        try execute("COMMIT")
    }

    /// Steps `statement` once, requiring the result code `expected` (`SQLITE_ROW`, `SQLITE_DONE`).
    func step(_ statement: OpaquePointer?, expecting expected: Int32) throws {
        guard sqlite3_step(statement) == expected else { throw error("step") }
    }

    /// Column `index`'s bytes, valid until the statement steps or resets. The pointer is fetched before the size,
    /// as `sqlite3_column_blob`'s documentation requires.
    func bytes(_ statement: OpaquePointer?, _ index: Int32) -> UnsafeRawBufferPointer {
        let start = sqlite3_column_blob(statement, index)
        return UnsafeRawBufferPointer(start: start, count: Int(sqlite3_column_bytes(statement, index)))
    }

    /// Column `index` as a string.
    func text(_ statement: OpaquePointer?, _ index: Int32) -> String {
        String(decoding: bytes(statement, index), as: UTF8.self)
    }

    /// An error for `what`, carrying SQLite's message.
    func error(_ what: String) -> CompareError {
        CompareError("sqlite: \(what): \(String(cString: sqlite3_errmsg(db)))")
    }
}
