/// Little-endian encoding helpers for building chunk payloads.
///
/// Every multi-byte integer in a Sofa file is little-endian; lengths and counts inside nodes are unsigned
/// LEB128 varints (FORMAT.md, "Integers").
extension Array where Element == UInt8 {
    package mutating func appendLittleEndian<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }

    /// Appends `value` as an unsigned LEB128 varint (7 bits per byte, low bits first).
    package mutating func appendVarint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        append(UInt8(v))
    }

    /// Appends a varint length followed by the bytes.
    package mutating func appendLengthPrefixed(_ bytes: UnsafeRawBufferPointer) {
        appendVarint(UInt64(bytes.count))
        appendBytes(bytes)
    }

    /// Appends `source` in one copy: an `UnsafeRawBufferPointer` appended as such goes through the generic
    /// sequence path, ~85 instructions for a 20-byte key (callgrind, D1's flush).
    @inlinable @inline(__always)
    package mutating func appendBytes(_ source: UnsafeRawBufferPointer) {
        // The bytes may be bound to another type (a big-endian `UInt64` key): rebinding for the copy is how a
        // raw view is read as `UInt8`s without assuming a binding.
        source.withMemoryRebound(to: UInt8.self) { append(contentsOf: $0) }
    }

    /// Overwrites 4 bytes at `index` with `value`, little-endian.
    package mutating func storeLittleEndian(_ value: UInt32, at index: Int) {
        withUnsafeMutableBytes { $0.storeBytes(of: value.littleEndian, toByteOffset: index, as: UInt32.self) }
    }
}

/// Stores `value` as an unsigned LEB128 varint at `p` (``varintSize(_:)`` bytes must be free there) and returns
/// the position after it: `appendVarint` for encoders that write into memory sized in advance.
///
/// `@inlinable`, as ``varintSize(_:)`` and `appendBytes` are: the record encoders of the `Sofa` module call them
/// per field, and a call across the module boundary cost more than the work (~250 instructions per put together,
/// callgrind D1, BENCHMARKS.md §3, "D1, thirteenth round").
@inlinable @inline(__always)
package func storeVarint(_ value: UInt64, at p: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer {
    var v = value
    var q = p
    while v >= 0x80 {
        q.storeBytes(of: UInt8(truncatingIfNeeded: v) | 0x80, as: UInt8.self)
        q += 1
        v >>= 7
    }
    q.storeBytes(of: UInt8(v), as: UInt8.self)
    return q + 1
}

/// The number of bytes `value` takes as a varint.
@inlinable @inline(__always)
package func varintSize(_ value: UInt64) -> Int {
    var v = value
    var n = 1
    while v >= 0x80 {
        v >>= 7
        n += 1
    }
    return n
}

/// A bounds-checked reader over bytes that came from disk.
///
/// Every read checks the remaining length first and throws a corruption error naming `fileOffset + position`
/// when the bytes run out or a varint is malformed, so damaged input can never trap.
///
/// The reads a decoder makes per byte or field are `@inline(__always)` as well as `@inlinable`: that folds
/// `readVarint` into `readLength` (3 % fewer instructions in a 20-row view query, callgrind), though callers in
/// `Sofa` still call `readLength`, `readSlice` and `readByte` rather than inlining them.
package struct ByteReader {
    package let bytes: UnsafeRawBufferPointer
    package var position: Int
    /// Where `bytes` starts in its file, for error messages.
    package let fileOffset: UInt64
    package let path: String

    @inlinable
    package init(_ bytes: UnsafeRawBufferPointer, position: Int = 0, fileOffset: UInt64, path: String) {
        self.bytes = bytes
        self.position = position
        self.fileOffset = fileOffset
        self.path = path
    }

    @inlinable @inline(__always)
    package var remaining: Int { bytes.count - position }
    @inlinable @inline(__always)
    package var isAtEnd: Bool { position >= bytes.count }

    package func corruption(_ what: String) -> SofaError {
        SofaError(.corruption, what, path: path, offset: Int(clamping: fileOffset) &+ position)
    }

    @inlinable
    package mutating func readLittleEndian<T: FixedWidthInteger>(_: T.Type = T.self) throws -> T {
        let size = MemoryLayout<T>.size
        guard position >= 0, remaining >= size else { throw corruption("truncated \(size)-byte integer") }
        let value = bytes.loadUnaligned(fromByteOffset: position, as: T.self)
        position += size
        return T(littleEndian: value)
    }

    @inlinable @inline(__always)
    package mutating func readByte() throws -> UInt8 {
        guard position >= 0, position < bytes.count else { throw corruption("truncated byte") }
        let b = bytes[position]
        position += 1
        return b
    }

    @inlinable @inline(__always)
    package mutating func readVarint() throws -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            guard position >= 0, position < bytes.count else { throw corruption("truncated varint") }
            let b = bytes[position]
            position += 1
            if shift == 63 && b > 1 { throw corruption("varint overflows 64 bits") }
            result |= UInt64(b & 0x7F) << shift
            if b < 0x80 { return result }
            shift += 7
            if shift > 63 { throw corruption("varint longer than 10 bytes") }
        }
    }

    /// Reads a varint that must fit in `limit`, as an `Int`.
    @inlinable @inline(__always)
    package mutating func readLength(limit: Int) throws -> Int {
        let start = position
        let v = try readVarint()
        guard v <= UInt64(limit) else {
            position = start
            throw corruption("length \(v) exceeds \(limit)")
        }
        return Int(v)
    }

    /// The next `count` bytes, without copying.
    @inlinable @inline(__always)
    package mutating func readSlice(_ count: Int) throws -> UnsafeRawBufferPointer {
        guard count >= 0, position >= 0, remaining >= count else {
            throw corruption("\(count) bytes expected, \(max(0, remaining)) remain")
        }
        let slice = UnsafeRawBufferPointer(rebasing: bytes[position..<(position + count)])
        position += count
        return slice
    }

    /// A varint length followed by that many bytes.
    @inlinable
    package mutating func readLengthPrefixed() throws -> UnsafeRawBufferPointer {
        let n = try readLength(limit: remaining)
        return try readSlice(n)
    }
}
