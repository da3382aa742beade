import CSQLite
import Glibc
import Sofa

/// SQLite doing the view's job the way Couchbase Lite 1.x did (its `CBL_SQLiteViewStorage`):
///
/// - documents in a `docs` table (JSON text, the current sequence as the row ID, the doc ID unique);
/// - the index in a `maps` table of (doc ID, key as JSON text, value as JSON text) with an index on
///   `(key COLLATE JSON, docid)` and one on `docid` for removing a changed document's old rows; `JSON` is a
///   custom collation registered with `sqlite3_create_collation_v2`, as CBL 1.x registered its `JSON` collation
///   (``JSONTextCollation``: CouchDB's order, walking the two texts and comparing strings with Sofa's ICU
///   collation, ``JSON/collate(_:_:)``);
/// - updating the index: select the documents with a sequence above the view's last one, parse each, run the
///   map, delete the document's old rows, insert the new ones, all in one transaction — single-threaded, as
///   CBL 1.x's indexer was;
/// - range reduce by the SQL aggregate `sum(value)` over the `BETWEEN` range;
/// - grouping in code over the rows in key order: CBL 1.x ran `SELECT key, value … ORDER BY key` and grouped
///   consecutive rows whose first N key items collate equal (its `groupTogether`), reducing each group —
///   a SQL `GROUP BY` cannot group by a prefix of a JSON-text key in the JSON collation.
///
/// WAL with `synchronous=FULL`, 64 MiB page cache, statements prepared once.
final class SQLiteViewsEngine: ViewsEngine, SQLiteConnection {
    static let name = "sqlite"
    static var configuration: String {
        "SQLite \(String(cString: sqlite3_libversion())) as Couchbase Lite 1.x: docs + maps tables, JSON-text keys "
            + "under a custom JSON collation (ICU strings), single-threaded indexer, sum() aggregate, grouping in "
            + "code; WAL, synchronous=FULL, cache_size=-65536"
    }

    private let path: String
    private(set) var db: OpaquePointer?
    private var statements: [OpaquePointer?] = []
    private var insertDoc, selectDoc, updateDoc, changedDocs, deleteRows, insertRow: OpaquePointer?
    private var rangeQuery, sumQuery, totalQuery, orderedQuery: OpaquePointer?
    /// The highest document sequence (docs.sequence), and the highest the index has seen; kept in memory as
    /// CBL 1.x kept `lastSequence` (and in the `views` table, durably).
    private var lastSequence: Int64 = 0
    private var lastSequenceIndexed: Int64 = 0

    /// `SQLITE_TRANSIENT`: SQLite copies the bound bytes (Swift strings are temporary).
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    init(directory: String) throws {
        path = directory + "/tracks.sqlite"
        db = try openSQLite(path) { db in
            guard sqlite3_create_collation_v2(db, "JSON", SQLITE_UTF8, nil, { _, aCount, a, bCount, b in
                Int32(JSONTextCollation.compare(UnsafeRawBufferPointer(start: a, count: Int(aCount)),
                                                UnsafeRawBufferPointer(start: b, count: Int(bCount))))
            }, nil) == SQLITE_OK else {
                throw CompareError("sqlite: create_collation JSON: \(String(cString: sqlite3_errmsg(db)))")
            }
        }
        do {
            try execute("""
                CREATE TABLE docs(sequence INTEGER PRIMARY KEY, docid TEXT NOT NULL UNIQUE, json TEXT NOT NULL);
                CREATE TABLE maps(docid TEXT NOT NULL, key TEXT NOT NULL COLLATE JSON, value TEXT);
                CREATE INDEX maps_keys ON maps(key, docid);
                CREATE INDEX maps_docs ON maps(docid);
                CREATE TABLE views(name TEXT PRIMARY KEY, lastsequence INTEGER NOT NULL);
                INSERT INTO views VALUES('\(TrackView.name)', 0);
                """)
            insertDoc = try prepare("INSERT INTO docs(sequence, docid, json) VALUES(?1, ?2, ?3)")
            selectDoc = try prepare("SELECT json FROM docs WHERE docid = ?1")
            updateDoc = try prepare("UPDATE docs SET sequence = ?1, json = ?2 WHERE docid = ?3")
            changedDocs = try prepare("SELECT docid, json FROM docs WHERE sequence > ?1 ORDER BY sequence")
            deleteRows = try prepare("DELETE FROM maps WHERE docid = ?1")
            insertRow = try prepare("INSERT INTO maps(docid, key, value) VALUES(?1, ?2, ?3)")
            rangeQuery = try prepare("SELECT key, value, docid FROM maps WHERE key >= ?1 ORDER BY key, docid LIMIT ?2")
            sumQuery = try prepare("SELECT sum(value) FROM maps WHERE key BETWEEN ?1 AND ?2")
            totalQuery = try prepare("SELECT count(*), sum(value) FROM maps")
            orderedQuery = try prepare("SELECT key, value FROM maps ORDER BY key")
        } catch {
            try? close()
            throw error
        }
    }

    func load(_ documents: TrackDocuments) throws {
        try transaction {
            var index = 0
            try documents.forEach { text in
                let doc = try JSON(parsing: text)
                guard let id = doc["_id"]?.stringValue else { throw CompareError("sqlite: document without _id") }
                lastSequence += 1
                index += 1
                defer { sqlite3_reset(insertDoc) }
                sqlite3_bind_int64(insertDoc, 1, lastSequence)
                bind(insertDoc, 2, id)
                sqlite3_bind_text(insertDoc, 3, text.baseAddress?.assumingMemoryBound(to: CChar.self),
                                  Int32(text.count), Self.transient)
                try step(insertDoc, expecting: SQLITE_DONE)
            }
        }
    }

    func buildIndex() throws -> Int {
        try updateIndex()
        return try total().rows
    }

    /// CBL 1.x's `updateIndex`: map every document changed since the view's last sequence, replace its rows.
    private func updateIndex() throws {
        guard lastSequenceIndexed < lastSequence else { return }
        try transaction {
            defer { sqlite3_reset(changedDocs) }
            sqlite3_bind_int64(changedDocs, 1, lastSequenceIndexed)
            var rc = sqlite3_step(changedDocs)
            while rc == SQLITE_ROW {
                let docID = text(changedDocs, 0)
                let doc = try JSON(parsing: bytes(changedDocs, 1))
                if lastSequenceIndexed > 0 {
                    // A changed document: its old rows go first (the first build has none to remove).
                    bind(deleteRows, 1, docID)
                    try step(deleteRows, expecting: SQLITE_DONE)
                    sqlite3_reset(deleteRows)
                }
                if let row = TrackView.row(of: doc) {
                    defer { sqlite3_reset(insertRow) }
                    bind(insertRow, 1, docID)
                    bind(insertRow, 2, try row.key.serialized())
                    if let value = row.value {
                        bind(insertRow, 3, try value.serialized())
                    } else {
                        sqlite3_bind_null(insertRow, 3)
                    }
                    try step(insertRow, expecting: SQLITE_DONE)
                }
                rc = sqlite3_step(changedDocs)
            }
            guard rc == SQLITE_DONE else { throw error("step changed documents") }
            try execute("UPDATE views SET lastsequence = \(lastSequence) WHERE name = '\(TrackView.name)'")
        }
        lastSequenceIndexed = lastSequence
    }

    func query(from startKey: JSON, limit: Int) throws -> [ViewRow] {
        try updateIndex()
        let statement = rangeQuery
        defer { sqlite3_reset(statement) }
        bind(statement, 1, try startKey.serialized())
        sqlite3_bind_int(statement, 2, Int32(limit))
        var rows: [ViewRow] = []
        rows.reserveCapacity(limit)
        var rc = sqlite3_step(statement)
        while rc == SQLITE_ROW {
            let key = try JSON(parsing: bytes(statement, 0))
            let value = sqlite3_column_type(statement, 1) == SQLITE_NULL ? nil : try JSON(parsing: bytes(statement, 1))
            rows.append(ViewRow(key: key, value: value, docID: text(statement, 2)))
            rc = sqlite3_step(statement)
        }
        guard rc == SQLITE_DONE else { throw error("step range query") }
        return rows
    }

    func rangeSum(low: JSON, high: JSON) throws -> Double {
        try updateIndex()
        let statement = sumQuery
        defer { sqlite3_reset(statement) }
        bind(statement, 1, try low.serialized())
        bind(statement, 2, try high.serialized())
        try step(statement, expecting: SQLITE_ROW)
        return sqlite3_column_double(statement, 0)
    }

    func total() throws -> (rows: Int, sum: Double) {
        try updateIndex()
        defer { sqlite3_reset(totalQuery) }
        try step(totalQuery, expecting: SQLITE_ROW)
        return (Int(sqlite3_column_int64(totalQuery, 0)), sqlite3_column_double(totalQuery, 1))
    }

    func group(level: Int) throws -> [ViewRow] {
        try updateIndex()
        let statement = orderedQuery
        defer { sqlite3_reset(statement) }
        var groups: [ViewRow] = []
        var groupKey: JSON?
        var sum = 0.0
        var rc = sqlite3_step(statement)
        while rc == SQLITE_ROW {
            let key = try JSON(parsing: bytes(statement, 0))
            let prefix: JSON = key.arrayValue.map { .array(Array($0.prefix(level))) } ?? key
            if let current = groupKey, JSON.collate(current, prefix) != 0 {
                groups.append(ViewRow(key: current, value: JSON(sum), docID: nil))
                sum = 0
            }
            groupKey = prefix
            // The value column holds JSON text; a number's text is what SQLite's own sum() reads too.
            sum += sqlite3_column_double(statement, 1)
            rc = sqlite3_step(statement)
        }
        guard rc == SQLITE_DONE else { throw error("step ordered rows") }
        if let current = groupKey {
            groups.append(ViewRow(key: current, value: JSON(sum), docID: nil))
        }
        return groups
    }

    func change(_ changes: [(docID: String, duration: Int)]) throws {
        try transaction {
            for change in changes {
                bind(selectDoc, 1, change.docID)
                try step(selectDoc, expecting: SQLITE_ROW)
                var doc = try JSON(parsing: bytes(selectDoc, 0))
                sqlite3_reset(selectDoc)
                doc["duration"] = JSON(change.duration)
                lastSequence += 1
                defer { sqlite3_reset(updateDoc) }
                sqlite3_bind_int64(updateDoc, 1, lastSequence)
                bind(updateDoc, 2, try doc.serialized())
                bind(updateDoc, 3, change.docID)
                try step(updateDoc, expecting: SQLITE_DONE)
            }
        }
    }

    func close() throws {
        for statement in [insertDoc, selectDoc, updateDoc, changedDocs, deleteRows, insertRow, rangeQuery, sumQuery,
                          totalQuery, orderedQuery] {
            sqlite3_finalize(statement)
        }
        (insertDoc, selectDoc, updateDoc, changedDocs, deleteRows, insertRow) = (nil, nil, nil, nil, nil, nil)
        (rangeQuery, sumQuery, totalQuery, orderedQuery) = (nil, nil, nil, nil)
        if db != nil {
            let rc = sqlite3_close_v2(db)
            db = nil
            guard rc == SQLITE_OK else { throw CompareError("sqlite: close failed (\(rc))") }
        }
        for suffix in ["", "-wal", "-shm"] {
            unlink(path + suffix)
        }
    }

    // MARK: - Statements

    private func bind(_ statement: OpaquePointer?, _ index: Int32, _ text: String) {
        sqlite3_bind_text(statement, index, text, -1, Self.transient)
    }

    /// Column `index`'s bytes, valid until the statement steps or resets.
    private func bytes(_ statement: OpaquePointer?, _ index: Int32) -> UnsafeRawBufferPointer {
        let start = sqlite3_column_blob(statement, index)
        return UnsafeRawBufferPointer(start: start, count: Int(sqlite3_column_bytes(statement, index)))
    }

    private func text(_ statement: OpaquePointer?, _ index: Int32) -> String {
        String(decoding: bytes(statement, index), as: UTF8.self)
    }





}

/// CouchDB's collation over two JSON texts without parsing them into values, as Couchbase Lite 1.x's
/// `CBLCollateJSON` did: walk both texts in step; compare type ranks, then numbers numerically, strings with
/// Sofa's ICU collation (``JSON/collate(_:_:)``, after a byte-equality shortcut), arrays item by item (a prefix
/// first) and objects member by member. Texts are what ``JSON/serialized()`` writes (no spaces).
enum JSONTextCollation {
    /// -1, 0 or 1 as `a` sorts before, with, or after `b`.
    static func compare(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
        var i = 0, j = 0
        return value(a, &i, b, &j)
    }

    private static func rank(_ byte: UInt8) -> Int {
        switch byte {
        case UInt8(ascii: "n"): 0
        case UInt8(ascii: "f"): 1
        case UInt8(ascii: "t"): 2
        case UInt8(ascii: "\""): 4
        case UInt8(ascii: "["): 5
        case UInt8(ascii: "{"): 6
        default: 3  // a number
        }
    }

    private static func value(_ a: UnsafeRawBufferPointer, _ i: inout Int, _ b: UnsafeRawBufferPointer,
                              _ j: inout Int) -> Int {
        guard i < a.count, j < b.count else { return i < a.count ? 1 : (j < b.count ? -1 : 0) }
        let rankA = rank(a[i]), rankB = rank(b[j])
        if rankA != rankB { return rankA < rankB ? -1 : 1 }
        switch rankA {
        case 0: i += 4; j += 4; return 0
        case 1: i += 5; j += 5; return 0
        case 2: i += 4; j += 4; return 0
        case 3:
            let x = number(a, &i), y = number(b, &j)
            return x < y ? -1 : (x > y ? 1 : 0)
        case 4:
            let x = string(a, &i), y = string(b, &j)
            if x.elementsEqual(y) { return 0 }
            return JSON.collate(decoded(x), decoded(y))
        default:
            // An array or an object: items (or name, value pairs, each compared in turn) until one side ends.
            let close = rankA == 5 ? UInt8(ascii: "]") : UInt8(ascii: "}")
            i += 1; j += 1
            while true {
                let endA = a[i] == close, endB = b[j] == close
                if endA || endB {
                    i += 1; j += 1
                    return endA && endB ? 0 : (endA ? -1 : 1)
                }
                let c = value(a, &i, b, &j)
                if c != 0 { return c }
                // Past the separator (',' between items, ':' between a name and its value).
                if a[i] == UInt8(ascii: ",") || a[i] == UInt8(ascii: ":") { i += 1 }
                if b[j] == UInt8(ascii: ",") || b[j] == UInt8(ascii: ":") { j += 1 }
            }
        }
    }

    /// The number starting at `i`; `i` moves past it.
    private static func number(_ text: UnsafeRawBufferPointer, _ i: inout Int) -> Double {
        let start = i
        while i < text.count, let byte = Optional(text[i]),
              byte != UInt8(ascii: ","), byte != UInt8(ascii: "]"), byte != UInt8(ascii: "}") {
            i += 1
        }
        var digits = [CChar](repeating: 0, count: i - start + 1)
        for k in start ..< i { digits[k - start] = CChar(bitPattern: text[k]) }
        return strtod(digits, nil)
    }

    /// The quoted string starting at `i`, quotes included; `i` moves past it.
    private static func string(_ text: UnsafeRawBufferPointer, _ i: inout Int) -> UnsafeRawBufferPointer {
        let start = i
        i += 1
        while text[i] != UInt8(ascii: "\"") {
            i += text[i] == UInt8(ascii: "\\") ? 2 : 1
        }
        i += 1
        return UnsafeRawBufferPointer(rebasing: text[start ..< i])
    }

    /// A quoted JSON string as a value: decoded directly when it has no escapes, else by Sofa's parser.
    private static func decoded(_ quoted: UnsafeRawBufferPointer) -> JSON {
        let inner = UnsafeRawBufferPointer(rebasing: quoted[1 ..< quoted.count - 1])
        if !inner.contains(UInt8(ascii: "\\")) {
            return .string(String(decoding: inner, as: UTF8.self))
        }
        return (try? JSON(parsing: quoted)) ?? .string(String(decoding: inner, as: UTF8.self))
    }
}
