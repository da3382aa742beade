import SofaStorage

/// A rows-tree key: `collation key ‖ escaped doc ID ‖ 0x00 ‖ varint emit index` (FORMAT.md §10.2, "Row keys").
///
/// The doc ID is escaped so that 0x00 can end it whatever bytes an ID holds: 0x00 → `01 01`, 0x01 → `01 02`,
/// every other byte as is. The escape keeps raw byte order (a lower byte still gives lower bytes, and the
/// terminator 0x00 sorts below any continuation), so rows with equal keys sort by raw doc ID bytes. The emit
/// index tells apart rows a document emits more than once under one key. UTF-8 never contains 0xFF, so no
/// escaped ID starts with it: `key ‖ FF` is above every row of `key`.
enum RowKey {
    /// Appends the escaped form of `id` and its terminator.
    static func appendID<C: Collection<UInt8>>(_ id: C, to out: inout [UInt8]) {
        // Most IDs have no byte to escape: one scan, then one copy.
        if !id.contains(where: { $0 < 2 }) {
            out.append(contentsOf: id)
            out.append(0x00)
            return
        }
        for byte in id {
            if byte < 2 {
                out.append(0x01)
                out.append(byte + 1)
            } else {
                out.append(byte)
            }
        }
        out.append(0x00)
    }

    /// The full row key of emit `index` of document `id` under collation key `key`.
    static func make(key: [UInt8], id: [UInt8], index: Int) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(key.count + id.count + 3)
        out.append(contentsOf: key)
        appendID(id, to: &out)
        out.appendVarint(UInt64(index))
        return out
    }

    /// The document ID in a row key whose collation key is `keyLength` bytes long.
    static func documentID(_ rowKey: UnsafeRawBufferPointer, keyLength: Int) throws -> [UInt8] {
        try parse(rowKey, keyLength: keyLength).id
    }

    /// The document ID of a row key as a string; the common case (no escaped byte) decodes in place.
    static func documentIDString(_ rowKey: UnsafeRawBufferPointer, keyLength: Int) throws -> String {
        var i = keyLength
        while i < rowKey.count, rowKey[i] > 1 { i += 1 }
        if i < rowKey.count, rowKey[i] == 0, keyLength <= i {
            return String(storedUTF8: UnsafeRawBufferPointer(rebasing: rowKey[keyLength..<i]))
        }
        return String(decoding: try parse(rowKey, keyLength: keyLength).id, as: UTF8.self)
    }

    /// The raw ID of an escaped, terminated ID.
    static func unescape(_ escaped: [UInt8]) throws -> [UInt8] {
        var id: [UInt8] = []
        var i = 0
        while i < escaped.count, escaped[i] != 0 {
            if escaped[i] == 1 {
                guard i + 1 < escaped.count else { break }
                id.append(escaped[i + 1] - 1)
                i += 2
            } else {
                id.append(escaped[i])
                i += 1
            }
        }
        return id
    }

    /// The document ID and emit index of a row key whose collation key is `keyLength` bytes long.
    static func parse(_ rowKey: UnsafeRawBufferPointer, keyLength: Int) throws -> (id: [UInt8], index: Int) {
        var id: [UInt8] = []
        var i = keyLength
        while i < rowKey.count {
            let byte = rowKey[i]
            if byte == 0 {
                var r = ByteReader(UnsafeRawBufferPointer(rebasing: rowKey[(i + 1)...]), fileOffset: 0, path: "row key")
                let index = try r.readLength(limit: Int(Int32.max))
                guard r.isAtEnd else { break }
                return (id, index)
            }
            if byte == 1 {
                guard i + 1 < rowKey.count, rowKey[i + 1] == 1 || rowKey[i + 1] == 2 else { break }
                id.append(rowKey[i + 1] - 1)
                i += 2
            } else {
                id.append(byte)
                i += 1
            }
        }
        throw SofaError(.corruption, "a view row key whose document ID is not terminated or badly escaped")
    }
}

/// A rows-tree value: `varint collation-key length ‖ varint sequence ‖ varint packed-value length ‖ packed
/// value ‖ packed key` (FORMAT.md §10.2, "Row values"). The emitted key is kept because collation keys cannot
/// be decoded; the sequence is the emitting document's when it was mapped; the value comes before the key so
/// the built-in reducers find a number after three varints.
struct RowValue {
    var keyLength: Int
    var sequence: UInt64
    var value: JSON?
    var key: JSON

    static func encode(keyLength: Int, sequence: UInt64, key: JSON, value: JSON?) -> [UInt8] {
        var out: [UInt8] = []
        append(keyLength: keyLength, sequence: sequence, key: key, value: value, to: &out)
        return out
    }

    static func append(keyLength: Int, sequence: UInt64, key: JSON, value: JSON?, to out: inout [UInt8]) {
        out.appendVarint(UInt64(keyLength))
        out.appendVarint(sequence)
        // The value's length goes in front of it: write it into a 1-byte slot and widen only when needed.
        let lengthAt = out.count
        out.append(0)
        PackedJSON.append(value, to: &out)
        let length = out.count - lengthAt - 1
        if length < 0x80 {
            out[lengthAt] = UInt8(length)
        } else {
            var prefix: [UInt8] = []
            prefix.appendVarint(UInt64(length))
            out.replaceSubrange(lengthAt..<(lengthAt + 1), with: prefix)
        }
        PackedJSON.append(key, to: &out)
    }

    // Inlined so that a caller taking the fields apart (a query's row) moves them out instead of copying.
    @inline(__always)
    init(_ bytes: UnsafeRawBufferPointer) throws {
        var r = ByteReader(bytes, fileOffset: 0, path: "view row")
        keyLength = try r.readLength(limit: 1 << 30)
        sequence = try r.readVarint()
        let valueLength = try r.readLength(limit: r.remaining)
        let valueBytes = try r.readSlice(valueLength)
        value = try PackedJSON.decode(valueBytes)
        let keyBytes = try r.readSlice(r.remaining)
        key = try PackedJSON.decode(keyBytes) ?? .null
    }

    /// The emitted key alone, cut to its first `items` items when it is an array (a grouped row's key),
    /// without decoding the value or the other items.
    static func groupKey(_ bytes: UnsafeRawBufferPointer, items: Int) throws -> JSON {
        var r = ByteReader(bytes, fileOffset: 0, path: "view row")
        _ = try r.readVarint()
        _ = try r.readVarint()
        _ = try r.readSlice(try r.readLength(limit: r.remaining))
        let keyStart = r.position
        guard try r.readByte() == PackedJSON.array else {
            return try PackedJSON.decode(UnsafeRawBufferPointer(rebasing: bytes[keyStart...])) ?? .null
        }
        let count = try r.readLength(limit: r.remaining)
        var out: [JSON] = []
        out.reserveCapacity(min(count, items))
        for _ in 0..<min(count, items) { out.append(try PackedJSON.read(&r, depth: 1) ?? .null) }
        return .array(out)
    }

    /// The collation-key length alone.
    static func keyLength(_ bytes: UnsafeRawBufferPointer) throws -> Int {
        var r = ByteReader(bytes, fileOffset: 0, path: "view row")
        return try r.readLength(limit: 1 << 30)
    }

    /// The value if it is a number, read in place (the reducers' fast path).
    @inline(__always)
    static func number(_ bytes: UnsafeRawBufferPointer) -> Double? {
        var i = 0
        // Skip the key-length and sequence varints, then read the value length (a number packs to 9 bytes).
        for _ in 0..<2 {
            while i < bytes.count, bytes[i] & 0x80 != 0 { i += 1 }
            i += 1
        }
        guard i + 10 <= bytes.count, bytes[i] == 9 else { return nil }
        return PackedJSON.number(at: UnsafeRawBufferPointer(rebasing: bytes[(i + 1)...]))
    }
}

/// A back-index value: what one document emitted, so an update can remove its old rows
/// (FORMAT.md §10.2, "Back-index"): `varint count`, then per emit, in emit order, `varint length ‖ collation key`.
enum BackIndexEntry {
    static func encode(_ keys: [[UInt8]]) -> [UInt8] {
        var out: [UInt8] = []
        out.appendVarint(UInt64(keys.count))
        for key in keys {
            out.appendVarint(UInt64(key.count))
            out.append(contentsOf: key)
        }
        return out
    }

    static func decode(_ bytes: UnsafeRawBufferPointer) throws -> [[UInt8]] {
        var r = ByteReader(bytes, fileOffset: 0, path: "view back-index")
        let count = try r.readLength(limit: r.remaining)
        var keys: [[UInt8]] = []
        keys.reserveCapacity(count)
        for _ in 0..<count { keys.append(Array(try r.readLengthPrefixed())) }
        guard r.isAtEnd else { throw r.corruption("back-index entry has trailing bytes") }
        return keys
    }
}
