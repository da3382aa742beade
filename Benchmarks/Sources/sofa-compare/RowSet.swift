import Glibc

/// Byte keys with a 4-byte value each, packed in one allocation: the rows every engine is given.
///
/// A million small `[UInt8]` arrays would cost a heap object and reference counting per key, in the
/// measurement loop and in the peak RSS of every engine alike; one buffer plus offsets costs neither.
/// Keys are handed out as `UnsafeRawBufferPointer`s into that buffer: they stay valid for as long as the
/// `RowSet` itself is alive, which the runner guarantees by holding the set for the whole run.
final class RowSet {
    /// How many rows the set holds.
    let count: Int
    private let bytes: UnsafeMutableRawBufferPointer
    private let offsets: [Int]
    private let values: [UInt32]

    /// Takes the keys concatenated in `keyBytes`, key `i` spanning `offsets[i] ..< offsets[i + 1]`.
    init(keyBytes: [UInt8], offsets: [Int], values: [UInt32]) {
        precondition(offsets.count == values.count + 1 && offsets.last == keyBytes.count, "inconsistent row set")
        count = values.count
        // At least one byte so that even an empty set has a valid base address.
        let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, keyBytes.count), alignment: 16)
        keyBytes.withUnsafeBytes { storage.copyMemory(from: $0) }
        bytes = storage
        self.offsets = offsets
        self.values = values
    }

    deinit {
        bytes.deallocate()
    }

    /// The key of row `i`; valid while this set is alive.
    @inline(__always)
    func key(_ i: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: bytes[offsets[i] ..< offsets[i + 1]])
    }

    /// The value of row `i` (a track's duration in seconds).
    @inline(__always)
    func value(_ i: Int) -> UInt32 {
        values[i]
    }

    /// Total bytes of all keys: the `bytes=` figure of the W3 checksum when the set is the whole index.
    var keyByteCount: Int {
        offsets[count] - offsets[0]
    }
}

/// Accumulates keys for a ``RowSet``: one growing byte array and an offset per key.
struct RowSetBuilder {
    private(set) var keyBytes: [UInt8] = []
    private var offsets: [Int] = [0]
    private var values: [UInt32] = []

    /// Reserves room for `rows` rows of about `bytesPerRow` key bytes each.
    init(reservingRows rows: Int = 0, bytesPerRow: Int = 0) {
        keyBytes.reserveCapacity(rows * bytesPerRow)
        offsets.reserveCapacity(rows + 1)
        values.reserveCapacity(rows)
    }

    /// Appends one key part in the tuple encoding (see ``KeyEncoding``).
    mutating func appendPart(_ utf8: UnsafeRawBufferPointer) {
        KeyEncoding.appendPart(utf8, to: &keyBytes)
    }

    /// Appends a raw byte to the key under construction (used for the end-of-prefix marker).
    mutating func appendByte(_ byte: UInt8) {
        keyBytes.append(byte)
    }

    /// Appends already-encoded key bytes to the key under construction.
    mutating func appendBytes(_ bytes: UnsafeRawBufferPointer) {
        keyBytes.append(contentsOf: bytes)
    }

    /// Ends the key under construction and gives it `value`.
    mutating func endRow(value: UInt32) {
        offsets.append(keyBytes.count)
        values.append(value)
    }

    /// The finished set; the builder should not be used afterwards.
    func build() -> RowSet {
        RowSet(keyBytes: keyBytes, offsets: offsets, values: values)
    }
}

/// The byte encoding of the view key `[genre, artist, album, title]` plus the doc ID, shared by every engine.
///
/// Each part is written as in the FoundationDB tuple layer's string encoding: the type byte `0x02`, the
/// part's UTF-8 bytes, and the terminator `0x00` — two bytes of overhead per part, so a five-part key
/// takes `10 + utf8 bytes`, the size gen.py's W3 `bytes=` checksum counts. The parts never contain NUL
/// (gen.py asserts it), so no escaping is needed and `memcmp` order of keys is element-wise code-point
/// order of the tuples: UTF-8 preserves code-point order, and the terminator `0x00` sorts a part before any
/// longer part it is a prefix of. The doc ID as the last part breaks ties between equal view keys, as in
/// gen.py's `sorted(rows)`.
///
/// Query keys are the four view-key parts alone: a prefix of every row with that view key, so a seek to
/// the first key `>=` it lands on the first such row (W2, W4's start). W4's inclusive end appends `0xFF`
/// to the four parts: that byte never occurs in UTF-8 and is above the type byte of the doc-ID part, so
/// `key <= end` admits every row whose view key equals the end key and no row beyond it.
///
/// Values are a track's duration in seconds. Byte-oriented engines (LMDB) store it as a 4-byte
/// little-endian `UInt32`; SQLite stores it as an INTEGER.
enum KeyEncoding {
    /// The type byte that starts each part (FoundationDB's code for a UTF-8 string).
    static let partStart: UInt8 = 0x02
    /// The byte that ends each part.
    static let partEnd: UInt8 = 0x00
    /// Appended to a view-key prefix to make the inclusive end of a range over that view key.
    static let endOfPrefix: UInt8 = 0xFF

    /// Appends one encoded part.
    @inline(__always)
    static func appendPart(_ utf8: UnsafeRawBufferPointer, to key: inout [UInt8]) {
        key.append(partStart)
        key.append(contentsOf: utf8)
        key.append(partEnd)
    }

    /// `memcmp` order, a shorter key first when it is a prefix of the longer: the order LMDB's default
    /// comparator and SQLite's BLOB comparison both use. Negative, zero or positive.
    @inline(__always)
    static func compare(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
        let common = min(a.count, b.count)
        if common > 0 {
            let c = memcmp(a.baseAddress!, b.baseAddress!, common)
            if c != 0 {
                return Int(c)
            }
        }
        return a.count - b.count
    }

    /// The doc ID of a full row key: the bytes of its last part.
    @inline(__always)
    static func docID(of key: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        // The last part is `0x02 id 0x00`, preceded by the previous part's `0x00`; IDs contain no NUL.
        var start = key.count - 2
        while start > 0 && key[start - 1] != partEnd {
            start -= 1
        }
        return UnsafeRawBufferPointer(rebasing: key[(start + 1) ..< (key.count - 1)])
    }
}
