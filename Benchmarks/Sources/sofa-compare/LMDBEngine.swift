import CLMDB
import Glibc

/// LMDB as a competent developer would use it for this index: one unnamed database in one environment,
/// default (fully durable) flags, a read transaction reused with `mdb_txn_reset`/`mdb_txn_renew` and a
/// cursor reused with `mdb_cursor_renew` so that each query is its own snapshot without allocating one.
///
/// Values are 4-byte little-endian `UInt32`s. The map size is a ceiling, not an allocation: LMDB on Linux
/// grows the file only as pages are written, so a 64 GiB map costs address space, not disk.
final class LMDBEngine: Engine {
    static let name = "lmdb"

    static var configuration: String {
        let version = String(cString: mdb_version(nil, nil, nil))
        return "\(version); env flags 0 (sync commits), MDB_NOTLS unused (one thread), mapsize 64 GiB, "
            + "W6 = mdb_del + mdb_put"
    }

    private static let mapSize = 64 << 30

    private let directory: String
    private var env: OpaquePointer?
    private var dbi: MDB_dbi = 0
    private var readTxn: OpaquePointer?
    private var readCursor: OpaquePointer?

    init(directory: String) throws {
        self.directory = directory
        try LMDBEngine.check(mdb_env_create(&env), "mdb_env_create")
        do {
            try LMDBEngine.check(mdb_env_set_mapsize(env, LMDBEngine.mapSize), "mdb_env_set_mapsize")
            try LMDBEngine.check(mdb_env_open(env, directory, 0, 0o644), "mdb_env_open")
            // Create (or find) the database in a write transaction so that read transactions can use it.
            var txn: OpaquePointer?
            try LMDBEngine.check(mdb_txn_begin(env, nil, 0, &txn), "mdb_txn_begin")
            guard mdb_dbi_open(txn, nil, UInt32(MDB_CREATE), &dbi) == 0 else {
                mdb_txn_abort(txn)
                throw CompareError("lmdb: mdb_dbi_open failed")
            }
            try LMDBEngine.check(mdb_txn_commit(txn), "mdb_txn_commit")
            try LMDBEngine.check(mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &readTxn), "mdb_txn_begin(read)")
            try LMDBEngine.check(mdb_cursor_open(readTxn, dbi, &readCursor), "mdb_cursor_open")
            mdb_txn_reset(readTxn)
        } catch {
            try? close()
            throw error
        }
    }

    func build(rows: RowSet) throws {
        try write { txn in
            var data = UInt32(0)
            for i in 0 ..< rows.count {
                data = rows.value(i).littleEndian
                try withUnsafeMutableBytes(of: &data) { valueBytes in
                    var key = LMDBEngine.val(rows.key(i))
                    var value = LMDBEngine.val(UnsafeRawBufferPointer(valueBytes))
                    try LMDBEngine.check(mdb_put(txn, dbi, &key, &value, 0), "mdb_put")
                }
            }
        }
    }

    func range(from startKey: UnsafeRawBufferPointer, limit: Int,
               _ visit: (UnsafeRawBufferPointer, UInt32) -> Void) throws {
        try read { cursor in
            var key = LMDBEngine.val(startKey)
            var value = MDB_val()
            var rc = mdb_cursor_get(cursor, &key, &value, MDB_SET_RANGE)
            var seen = 0
            while rc == 0 && seen < limit {
                visit(LMDBEngine.bytes(key), LMDBEngine.value(value))
                seen += 1
                rc = mdb_cursor_get(cursor, &key, &value, MDB_NEXT)
            }
            try LMDBEngine.checkEnd(rc)
        }
    }

    func scan(_ visit: (UnsafeRawBufferPointer, UInt32) -> Void) throws {
        try read { cursor in
            var key = MDB_val()
            var value = MDB_val()
            var rc = mdb_cursor_get(cursor, &key, &value, MDB_FIRST)
            while rc == 0 {
                visit(LMDBEngine.bytes(key), LMDBEngine.value(value))
                rc = mdb_cursor_get(cursor, &key, &value, MDB_NEXT)
            }
            try LMDBEngine.checkEnd(rc)
        }
    }

    func rangeReduce(low: UnsafeRawBufferPointer, high: UnsafeRawBufferPointer) throws -> (count: Int, sum: Int) {
        try read { cursor in
            var key = LMDBEngine.val(low)
            var value = MDB_val()
            var count = 0
            var sum = 0
            var rc = mdb_cursor_get(cursor, &key, &value, MDB_SET_RANGE)
            while rc == 0 {
                guard KeyEncoding.compare(LMDBEngine.bytes(key), high) <= 0 else { break }
                count += 1
                sum += Int(LMDBEngine.value(value))
                rc = mdb_cursor_get(cursor, &key, &value, MDB_NEXT)
            }
            try LMDBEngine.checkEnd(rc)
            return (count, sum)
        }
    }

    func countAll() throws -> Int {
        try read { _ in
            var stat = MDB_stat()
            try LMDBEngine.check(mdb_stat(readTxn, dbi, &stat), "mdb_stat")
            return Int(stat.ms_entries)
        }
    }

    func update(_ changes: RowSet) throws {
        try write { txn in
            var data = UInt32(0)
            for i in 0 ..< changes.count {
                var key = LMDBEngine.val(changes.key(i))
                try LMDBEngine.check(mdb_del(txn, dbi, &key, nil), "mdb_del")
                data = changes.value(i).littleEndian
                try withUnsafeMutableBytes(of: &data) { valueBytes in
                    var value = LMDBEngine.val(UnsafeRawBufferPointer(valueBytes))
                    try LMDBEngine.check(mdb_put(txn, dbi, &key, &value, 0), "mdb_put")
                }
            }
        }
    }

    func close() throws {
        if readCursor != nil {
            mdb_cursor_close(readCursor)
            readCursor = nil
        }
        if readTxn != nil {
            mdb_txn_abort(readTxn)
            readTxn = nil
        }
        if env != nil {
            mdb_env_close(env)
            env = nil
        }
    }

    var filesOnDisk: [String] {
        [directory + "/data.mdb", directory + "/lock.mdb"]
    }

    // MARK: - Transactions

    /// Runs `body` in a write transaction and commits it (an fsync'd commit: the env has no NOSYNC flags).
    private func write(_ body: (OpaquePointer?) throws -> Void) throws {
        var txn: OpaquePointer?
        try LMDBEngine.check(mdb_txn_begin(env, nil, 0, &txn), "mdb_txn_begin")
        do {
            try body(txn)
        } catch {
            mdb_txn_abort(txn)
            throw error
        }
        try LMDBEngine.check(mdb_txn_commit(txn), "mdb_txn_commit")
    }

    /// Runs `body` with the reused cursor in a fresh snapshot, then releases the snapshot.
    private func read<T>(_ body: (OpaquePointer?) throws -> T) throws -> T {
        try LMDBEngine.check(mdb_txn_renew(readTxn), "mdb_txn_renew")
        defer { mdb_txn_reset(readTxn) }
        try LMDBEngine.check(mdb_cursor_renew(readTxn, readCursor), "mdb_cursor_renew")
        return try body(readCursor)
    }

    // MARK: - Values

    private static func val(_ bytes: UnsafeRawBufferPointer) -> MDB_val {
        // LMDB takes a mutable pointer but does not write through it for keys and values given to put/get.
        MDB_val(mv_size: bytes.count, mv_data: UnsafeMutableRawPointer(mutating: bytes.baseAddress))
    }

    @inline(__always)
    private static func bytes(_ val: MDB_val) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: val.mv_data, count: val.mv_size)
    }

    @inline(__always)
    private static func value(_ val: MDB_val) -> UInt32 {
        // Values in the map are not aligned; read them byte-wise.
        UInt32(littleEndian: val.mv_data.loadUnaligned(as: UInt32.self))
    }

    private static func check(_ rc: Int32, _ what: String) throws {
        guard rc == 0 else { throw CompareError("lmdb: \(what): \(String(cString: mdb_strerror(rc)))") }
    }

    /// A cursor loop ends with MDB_NOTFOUND at the end of the database; anything else is an error.
    private static func checkEnd(_ rc: Int32) throws {
        if rc != MDB_NOTFOUND {
            try check(rc, "mdb_cursor_get")
        }
    }
}
