import SofaStorage

/// A compact binary form of JSON for index rows and reductions (FORMAT.md §10.2, "Packed JSON").
///
/// Rows keep the emitted key and value in this form rather than as JSON text because reading it back needs
/// no parsing: the built-in reducers find a number by its tag and load 8 bytes, and a query decodes a row's
/// key and value with no tokenizing or number conversion. Every length is bounds-checked on the way in: the
/// bytes come from disk.
///
///     0x00 absent (a value only: `emit(key, nil)`)      0x04 number: 8 bytes, IEEE-754 double, little-endian
///     0x01 null   0x02 false   0x03 true                0x05 string: varint length, UTF-8
///     0x06 array: varint count, items
///     0x07 object: varint count, then per member: varint length, UTF-8 name, value
enum PackedJSON {
    static let absent: UInt8 = 0x00
    static let null: UInt8 = 0x01
    static let falseTag: UInt8 = 0x02
    static let trueTag: UInt8 = 0x03
    static let number: UInt8 = 0x04
    static let string: UInt8 = 0x05
    static let array: UInt8 = 0x06
    static let object: UInt8 = 0x07

    /// Nesting deeper than this is corruption (the JSON parser's own limit is lower).
    static let maximumDepth = 1024

    /// Appends `value` (nil → absent).
    static func append(_ value: JSON?, to out: inout [UInt8]) {
        guard let value else {
            out.append(absent)
            return
        }
        switch value {
        case .null: out.append(null)
        case .bool(let b): out.append(b ? trueTag : falseTag)
        case .number(let n):
            out.append(number)
            out.appendLittleEndian(n.bitPattern)
        case .string(let s):
            out.append(string)
            appendString(s, to: &out)
        case .array(let items):
            out.append(array)
            out.appendVarint(UInt64(items.count))
            for item in items { append(item, to: &out) }
        case .object(let members):
            out.append(object)
            out.appendVarint(UInt64(members.count))
            for (name, member) in members {
                appendString(name, to: &out)
                append(member, to: &out)
            }
        }
    }

    private static func appendString(_ s: String, to out: inout [UInt8]) {
        var s = s
        s.withUTF8 { utf8 in
            out.appendVarint(UInt64(utf8.count))
            out.append(contentsOf: utf8)
        }
    }

    /// The packed bytes of `value`.
    static func encode(_ value: JSON?) -> [UInt8] {
        var out: [UInt8] = []
        append(value, to: &out)
        return out
    }

    /// Decodes one value from the start of `bytes` (nil for absent).
    ///
    /// - Throws: `.corruption` when the bytes are not one whole packed value.
    static func decode(_ bytes: UnsafeRawBufferPointer) throws -> JSON? {
        var reader = ByteReader(bytes, fileOffset: 0, path: "packed JSON")
        let value = try read(&reader, depth: 0)
        guard reader.isAtEnd else { throw reader.corruption("packed JSON has trailing bytes") }
        return value
    }

    static func decode(_ bytes: [UInt8]) throws -> JSON? {
        try bytes.withUnsafeBytes { try decode($0) }
    }

    /// Reads one value at the reader's position.
    static func read(_ r: inout ByteReader, depth: Int) throws -> JSON? {
        guard depth <= maximumDepth else { throw r.corruption("packed JSON nests deeper than \(maximumDepth)") }
        let tag = try r.readByte()
        switch tag {
        case absent: return depth == 0 ? nil : .null
        case null: return .null
        case falseTag: return .bool(false)
        case trueTag: return .bool(true)
        case number:
            // Read as a slice, not with the generic readLittleEndian, which is not specialized across modules
            // (each call instantiated its metadata at run time: 5 % of a view query).
            let bits = try r.readSlice(8).loadUnaligned(as: UInt64.self)
            return .number(Double(bitPattern: UInt64(littleEndian: bits)))
        case string: return .string(try readString(&r))
        case array:
            let count = try r.readLength(limit: r.remaining)
            var items: [JSON] = []
            items.reserveCapacity(count)
            for _ in 0..<count { items.append(try read(&r, depth: depth + 1) ?? .null) }
            return .array(items)
        case object:
            let count = try r.readLength(limit: r.remaining / 2)
            var members = JSONObject(minimumCapacity: count)
            for _ in 0..<count {
                let name = try readString(&r)
                members[name] = try read(&r, depth: depth + 1) ?? .null
            }
            return .object(members)
        default:
            throw r.corruption("unknown packed JSON tag \(tag)")
        }
    }

    private static func readString(_ r: inout ByteReader) throws -> String {
        // The common case, a one-byte length whose bytes are all there, read in place: `ByteReader`'s reads
        // stay calls from this module (~500 instructions of a 20-row view query's row each). Anything else
        // takes the checked path from the same position, so errors are unchanged.
        let p = r.position
        if p >= 0 && p < r.bytes.count {
            let n = Int(r.bytes[p])
            if n < 0x80 && n <= r.bytes.count - p - 1 {
                r.position = p + 1 + n
                return String(decoding: UnsafeRawBufferPointer(rebasing: r.bytes[(p + 1)..<(p + 1 + n)]), as: UTF8.self)
            }
        }
        let count = try r.readLength(limit: r.remaining)
        let bytes = try r.readSlice(count)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The number at the start of `bytes` without building a `JSON` (the reducers' fast path); nil when the
    /// value there is not a number.
    @inline(__always)
    static func number(at bytes: UnsafeRawBufferPointer) -> Double? {
        guard bytes.count >= 9, bytes[0] == number else { return nil }
        return Double(bitPattern: UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: 1, as: UInt64.self)))
    }

    /// The first non-finite number inside `value`, for rejecting values JSON cannot express.
    static func containsNonFinite(_ value: JSON) -> Bool {
        switch value {
        case .number(let n): return !n.isFinite
        case .array(let items): return items.contains(where: containsNonFinite)
        case .object(let members): return members.values.contains(where: containsNonFinite)
        default: return false
        }
    }
}
