// Collation keys: JSON view keys as byte strings whose memcmp order is CouchDB's JSON collation (DESIGN.md §2).
//
// ## Encoding (FORMAT.md, "Collation keys")
//
// Every value starts with a one-byte type tag. The tags rise in collation order, and all of them are above
// 0x00, so 0x00 can end an array or object and a shorter array (a prefix) sorts before a longer one.
//
// | tag  | value  | bytes after the tag                                                                  |
// |------|--------|--------------------------------------------------------------------------------------|
// | 0x00 | end    | — (closes the innermost array or object; never starts a value)                       |
// | 0x10 | null   | none                                                                                 |
// | 0x20 | false  | none                                                                                 |
// | 0x21 | true   | none                                                                                 |
// | 0x30 | number | 8 bytes, big-endian: the IEEE-754 bits of the double, all bits flipped if negative,  |
// |      |        | only the sign bit flipped otherwise; -0.0 is written as +0.0; NaN, ±∞ are rejected    |
// | 0x40 | string | the ICU sort key (root collator, tertiary strength) including its final 0x00         |
// | 0x50 | array  | each item's encoding, then 0x00                                                      |
// | 0x60 | object | per member in stored order: the name's ICU sort key (with its 0x00, no tag), then    |
// |      |        | the value's encoding; then 0x00                                                      |
//
// Why each part holds:
// - Numbers: flipping makes unsigned big-endian order equal numeric order (negative numbers get smaller as
//   their magnitude grows, hence the full flip). Folding -0.0 makes `0` and `-0` one key, as they collate.
// - Strings: ICU sort keys compare with memcmp exactly as `ucol_strcoll` compares the strings. A sort key has
//   no 0x00 before its last byte (its level separators are 0x01), so it ends itself, and a shorter sort key
//   that is a prefix of a longer one cannot occur. Strings that ICU finds equal (e.g. "a\u{0}b" and "ab":
//   U+0000 is ignorable) get identical bytes.
// - Object members have no tag in front of the name: after a member's value comes either 0x00 (end) or a
//   name, whose sort key starts with a byte ≥ 0x01. A name is always followed by exactly one value.
// - The whole encoding is prefix-free (no value's encoding is a proper prefix of another's), so a row key
//   `CollationKey(key).bytes + docID bytes` sorts by key first, then by the raw doc ID bytes.
// - Arrays and objects nest at most `CollationKey.maxDepth` (256) levels; deeper keys are rejected.
//
// Examples (ICU 72 sort keys):
//   null            10
//   1               30 bf f0 00 00 00 00 00 00
//   -1              30 40 0f ff ff ff ff ff ff
//   "a"             40 2a 01 05 01 05 00
//   ["a", 1]        50 40 2a 01 05 01 05 00 30 bf f0 00 00 00 00 00 00 00
//   {"a": null}     60 2a 01 05 01 05 00 10 00
//
// Sort keys are not reversible, so an index keeps each emitted key too, and records `collatorVersion`:
// another ICU version may give other bytes (in the same order), and then the index must be rebuilt.

import SofaStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A view key encoded so that comparing bytes with `memcmp` gives CouchDB's JSON collation.
///
/// The encoding is laid out at the top of `CollationKey.swift` (and in FORMAT.md). Two keys compare exactly as
/// ``JSON/collate(_:_:)`` compares the values they were made from, and equal bytes mean collation-equal values
/// (`1` and `1.0`, `0` and `-0`, strings ICU finds equal).
///
/// ```swift
/// let a = try CollationKey(["rock", "Led Zeppelin"])
/// let b = try CollationKey(["Rock", "AC/DC"])
/// a < b   // true: the first items decide, and "rock" < "Rock" (same letters, lowercase first)
/// ```
///
/// Safe to use from any number of threads at once.
public struct CollationKey: Hashable, Comparable, Sendable {
    /// The encoded bytes: compare them with `memcmp` (or ``<``) to collate.
    public let bytes: [UInt8]

    /// The deepest nesting of arrays and objects a key may have: a top-level array is at depth 1, so
    /// `[[1]]` has depth 2. Deeper keys are rejected with ``SofaError/Code/invalidValue``.
    public static let maxDepth = 256

    /// The version of ICU's root collator that makes the string part of keys (`ucol_getVersion`, 4 bytes).
    ///
    /// Keys made under different versions must not be compared: index files record this value and are
    /// rebuilt when it changes.
    public static var collatorVersion: [UInt8] { ICUCollator.version }

    /// Encodes a JSON key.
    ///
    /// ```swift
    /// let key = try CollationKey(["Jazz", "Miles Davis", "Kind of Blue", "So What"])
    /// ```
    ///
    /// - Parameter key: The key, as a map function emits it.
    /// - Throws: ``SofaError`` with code ``SofaError/Code/invalidValue`` if the key holds NaN or an infinity
    ///   (JSON cannot express them), or nests deeper than ``maxDepth``; ``SofaError/Code/collationUnavailable``
    ///   if ICU's collator cannot be used. The message says where in the key the problem is.
    public init(_ key: JSON) throws {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(64)
        try Self.encode(key, into: &bytes)
        self.bytes = bytes
    }

    /// Wraps bytes that were encoded before (read back from an index), after checking their structure.
    ///
    /// - Parameter bytes: Exactly one encoded value.
    /// - Throws: ``SofaError`` with code ``SofaError/Code/invalidCollationKey`` and the offset of the first byte
    ///   that breaks the format (unknown tag, truncated value, a non-finite or negative-zero number, a string
    ///   sort key without its terminator, nesting deeper than ``maxDepth``, trailing bytes).
    public init(validating bytes: [UInt8]) throws {
        let end = try Self.elementEnd(in: bytes, from: 0)
        guard end == bytes.count else {
            throw SofaError(
                .invalidCollationKey,
                "malformed collation key: \(bytes.count - end) byte(s) follow its value; a key is exactly one value",
                offset: end)
        }
        self.bytes = bytes
    }

    /// Appends the encoding of `key` to `buffer`: the way to build a row key `key + docID` with one allocation.
    ///
    /// ```swift
    /// var row: [UInt8] = []
    /// try CollationKey.encode(["Rock", 1971], into: &row)
    /// row.append(contentsOf: docID.utf8)
    /// ```
    ///
    /// - Parameters:
    ///   - key: The key to encode.
    ///   - buffer: Bytes to append to. On error it is left exactly as it was.
    /// - Throws: As ``init(_:)``.
    public static func encode(_ key: JSON, into buffer: inout [UInt8]) throws {
        let start = buffer.count
        do {
            try append(key, to: &buffer, depth: 0)
        } catch {
            buffer.removeSubrange(start...)
            throw error.sofaError(for: key)
        }
    }

    /// Byte order, as `memcmp` then length: the collation order of the keys.
    public static func < (a: CollationKey, b: CollationKey) -> Bool {
        compare(a.bytes, b.bytes) < 0
    }

    /// Compares two byte strings as `memcmp` does, a proper prefix first: -1, 0 or 1.
    ///
    /// - Parameters:
    ///   - a: Encoded bytes (a key, or a key followed by a doc ID).
    ///   - b: Encoded bytes.
    package static func compare(_ a: [UInt8], _ b: [UInt8]) -> Int {
        a.withUnsafeBytes { pa in b.withUnsafeBytes { pb in compare(pa, pb) } }
    }

    /// Compares two byte strings as `memcmp` does, a proper prefix first: -1, 0 or 1.
    package static func compare(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
        let common = min(a.count, b.count)
        if common > 0 {
            // Both base addresses are non-nil: each buffer holds at least `common` > 0 bytes.
            let r = memcmp(a.baseAddress!, b.baseAddress!, common)
            if r != 0 { return r < 0 ? -1 : 1 }
        }
        return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
    }
}

extension CollationKey: CustomStringConvertible {
    /// The bytes in hex, for tests and diagnostics: `50 40 2a 01 05 01 05 00 00`.
    public var description: String {
        bytes.map { byte in
            let hex = String(byte, radix: 16)
            return byte < 0x10 ? "0" + hex : hex
        }.joined(separator: " ")
    }
}

extension SofaError.Code {
    /// ICU's collator could not be opened or failed to make a sort key: collation keys cannot be made at all.
    public static let collationUnavailable = SofaError.Code(rawValue: "collationUnavailable")
}
