import CSQLite

/// SQLite as a competent developer would use it for this index: a `WITHOUT ROWID` table clustered on the
/// key, WAL with `synchronous=FULL` (every commit fsync'd), a 64 MiB page cache, one connection opened
/// without mutexes, and every statement prepared once and reset after use.
///
/// Keys are BLOBs, which SQLite compares with `memcmp` then length, the same order as LMDB's; values are
/// INTEGERs. Each query is its own autocommit read transaction, i.e. its own snapshot.
final class SQLiteEngine: Engine, SQLiteConnection {
    static let name = "sqlite"

    static var configuration: String {
        sqliteSettings + ", no mmap, WITHOUT ROWID, W6 = DELETE + INSERT"
    }

    private let path: String
    private(set) var db: OpaquePointer?
    private var insert: OpaquePointer?
    private var delete: OpaquePointer?
    private var rangeQuery: OpaquePointer?
    private var scanQuery: OpaquePointer?
    private var reduceQuery: OpaquePointer?
    private var countQuery: OpaquePointer?

    init(directory: String) throws {
        path = directory + "/rows.sqlite"
        db = try openSQLite(path)
        do {
            try execute("CREATE TABLE IF NOT EXISTS rows(key BLOB PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID")
            insert = try prepare("INSERT INTO rows(key, value) VALUES(?1, ?2)")
            delete = try prepare("DELETE FROM rows WHERE key = ?1")
            rangeQuery = try prepare("SELECT key, value FROM rows WHERE key >= ?1 ORDER BY key LIMIT ?2")
            scanQuery = try prepare("SELECT key, value FROM rows ORDER BY key")
            reduceQuery = try prepare("SELECT count(*), sum(value) FROM rows WHERE key BETWEEN ?1 AND ?2")
            countQuery = try prepare("SELECT count(*) FROM rows")
        } catch {
            try? close()
            throw error
        }
    }

    func build(rows: RowSet) throws {
        try transaction {
            for i in 0 ..< rows.count {
                try insertRow(rows.key(i), rows.value(i))
            }
        }
    }

    func range(from startKey: UnsafeRawBufferPointer, limit: Int,
               _ visit: (UnsafeRawBufferPointer, UInt32) -> Void) throws {
        let statement = rangeQuery
        defer { sqlite3_reset(statement) }
        sqlite3_bind_blob(statement, 1, startKey.baseAddress, Int32(startKey.count), sqliteNoCopy)
        sqlite3_bind_int(statement, 2, Int32(limit))
        try rows(of: statement, visit)
    }

    func scan(_ visit: (UnsafeRawBufferPointer, UInt32) -> Void) throws {
        defer { sqlite3_reset(scanQuery) }
        try rows(of: scanQuery, visit)
    }

    func rangeReduce(low: UnsafeRawBufferPointer, high: UnsafeRawBufferPointer) throws -> (count: Int, sum: Int) {
        let statement = reduceQuery
        defer { sqlite3_reset(statement) }
        sqlite3_bind_blob(statement, 1, low.baseAddress, Int32(low.count), sqliteNoCopy)
        sqlite3_bind_blob(statement, 2, high.baseAddress, Int32(high.count), sqliteNoCopy)
        try step(statement, expecting: SQLITE_ROW)
        return (Int(sqlite3_column_int64(statement, 0)), Int(sqlite3_column_int64(statement, 1)))
    }

    func countAll() throws -> Int {
        defer { sqlite3_reset(countQuery) }
        try step(countQuery, expecting: SQLITE_ROW)
        return Int(sqlite3_column_int64(countQuery, 0))
    }

    func update(_ changes: RowSet) throws {
        try transaction {
            for i in 0 ..< changes.count {
                let key = changes.key(i)
                defer { sqlite3_reset(delete) }
                sqlite3_bind_blob(delete, 1, key.baseAddress, Int32(key.count), sqliteNoCopy)
                try step(delete, expecting: SQLITE_DONE)
                try insertRow(key, changes.value(i))
            }
        }
    }

    func close() throws {
        defer {
            (insert, delete, rangeQuery, scanQuery, reduceQuery, countQuery) = (nil, nil, nil, nil, nil, nil)
            db = nil
        }
        try closeSQLite(db, finalizing: [insert, delete, rangeQuery, scanQuery, reduceQuery, countQuery])
    }

    var filesOnDisk: [String] { sqliteFiles(path) }

    // MARK: - Statements

    private func insertRow(_ key: UnsafeRawBufferPointer, _ value: UInt32) throws {
        defer { sqlite3_reset(insert) }
        sqlite3_bind_blob(insert, 1, key.baseAddress, Int32(key.count), sqliteNoCopy)
        sqlite3_bind_int64(insert, 2, Int64(value))
        try step(insert, expecting: SQLITE_DONE)
    }

    /// Steps `statement` to the end, visiting the (key, value) of each row.
    private func rows(of statement: OpaquePointer?, _ visit: (UnsafeRawBufferPointer, UInt32) -> Void) throws {
        var rc = sqlite3_step(statement)
        while rc == SQLITE_ROW {
            visit(bytes(statement, 0), UInt32(truncatingIfNeeded: sqlite3_column_int64(statement, 1)))
            rc = sqlite3_step(statement)
        }
        guard rc == SQLITE_DONE else { throw error("step") }
    }
}
