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
// |      |        | only the sign bit flipped otherwise; -0.0 is written as +0.0; NaN and ±∞ rejected   |
// | 0x40 | string | the ICU sort key (root collator, tertiary strength) including its final 0x00         |
// | 0x50 | array  | each item's encoding, then 0x00                                                      |
// | 0x60 | object | per member in stored order: the name's ICU sort key (with its 0x00, no tag), then    |
// |      |        | the value's encoding; then 0x00                                                      |
//
// Why each part holds:
// - Numbers: flipping makes unsigned big-endian order equal numeric order (negative numbers get smaller as
//   their magnitude grows, hence the full flip). Folding -0.0 makes `0` and `-0` one key, as they collate.
// - Strings: ICU sort keys compare with memcmp exactly as `ucol_strcoll` compares the strings. At tertiary
//   strength a sort key is `primary-weights 01 secondary-weights 01 tertiary-weights 00`, and weights never use
//   the bytes 00 or 01 (ICU reserves them), so a sort key ends itself and none is a proper prefix of another;
//   the walker checks for exactly two 01s. Strings that ICU finds equal get identical bytes: "a\u{0}b" and
//   "ab" (U+0000 and most control characters are ignorable), "é" and "e\u{301}". The collator keeps the root
//   defaults, as CouchDB does, including normalization off: text that is not in FCD form (combining marks out
//   of canonical order, "a\u{301}\u{316}") is not normalized first, so canonically equivalent strings of that
//   kind can differ. `JSON.collate` uses the same collator and agrees.
// - Object members have no tag in front of the name: after a member's value comes either 0x00 (end) or a
//   name, whose sort key starts with a byte ≥ 0x01. A name is always followed by exactly one value.
// - The whole encoding is prefix-free (no value's encoding is a proper prefix of another's), so a row key
//   `CollationKey(key).bytes + docID bytes` sorts by key first, then by the raw doc ID bytes.
// - Arrays and objects nest at most `CollationKey.maxDepth` (256) levels; deeper keys are rejected.
// - Grouping (group_level N): the rows of one group share the bytes `0x50` + the first N items' encodings
//   (`CollationKey.groupPrefixLength`); an array key with fewer than N items is its own group, its whole
//   encoding with the final 0x00.
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
    /// The check is structural: it cannot tell which ICU version made a string's sort key (compare
    /// ``collatorVersion`` with the one the index recorded for that).
    ///
    /// ```swift
    /// let key = try CollationKey(validating: storedBytes)
    /// ```
    ///
    /// - Parameter bytes: Exactly one encoded value.
    /// - Throws: ``SofaError`` with code ``SofaError/Code/invalidCollationKey`` and the offset of the first byte
    ///   that breaks the format (unknown tag, truncated value, a non-finite or negative-zero number, a string
    ///   sort key without its terminator or without exactly two level separators, nesting deeper than
    ///   ``maxDepth``, trailing bytes).
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

// MARK: - Encoding

extension CollationKey {
    /// The one-byte type tags. They rise in collation order; `end` is below all of them.
    enum Tag {
        /// Closes the innermost array or object.
        static let end: UInt8 = 0x00
        static let null: UInt8 = 0x10
        static let `false`: UInt8 = 0x20
        static let `true`: UInt8 = 0x21
        /// Followed by 8 bytes, see ``CollationKey/orderedBits(_:)``.
        static let number: UInt8 = 0x30
        /// Followed by an ICU sort key and its terminating 0x00.
        static let string: UInt8 = 0x40
        /// Followed by items, then `end`.
        static let array: UInt8 = 0x50
        /// Followed by (name sort key, value) pairs, then `end`.
        static let object: UInt8 = 0x60
    }

    /// Why a key could not be encoded. Thrown (typed, so without boxing) inside the recursion and turned into a
    /// ``SofaError`` once, at the top, where the whole key is at hand to say where the problem is.
    enum EncodingFailure: Error {
        case nonFinite
        case tooDeep
        case collator
    }

    /// Appends `value`, which sits `depth` arrays/objects deep in the key, to `buffer`.
    static func append(_ value: JSON, to buffer: inout [UInt8], depth: Int) throws(EncodingFailure) {
        switch value {
        case .null:
            buffer.append(Tag.null)
        case .bool(let flag):
            buffer.append(flag ? Tag.true : Tag.false)
        case .number(let number):
            guard number.isFinite else { throw .nonFinite }
            buffer.append(Tag.number)
            withUnsafeBytes(of: orderedBits(number).bigEndian) { buffer.append(contentsOf: $0) }
        case .string(let string):
            buffer.append(Tag.string)
            guard ICUCollator.appendSortKey(of: string, to: &buffer) else { throw .collator }
        case .array(let items):
            guard depth < maxDepth else { throw .tooDeep }
            buffer.append(Tag.array)
            for item in items {
                try append(item, to: &buffer, depth: depth + 1)
            }
            buffer.append(Tag.end)
        case .object(let members):
            guard depth < maxDepth else { throw .tooDeep }
            buffer.append(Tag.object)
            for (name, member) in members {
                guard ICUCollator.appendSortKey(of: name, to: &buffer) else { throw .collator }
                try append(member, to: &buffer, depth: depth + 1)
            }
            buffer.append(Tag.end)
        }
    }

    /// The bits of a finite double, transformed so that unsigned integer order is numeric order.
    ///
    /// A non-negative double's bits already rise with its value: setting the sign bit lifts them above all
    /// negatives. A negative double's bits rise with its magnitude: flipping them all reverses that and clears
    /// the sign bit. -0.0 is taken as +0.0 first, so both give `0x8000_0000_0000_0000`.
    @inline(__always)
    static func orderedBits(_ number: Double) -> UInt64 {
        let bits = number == 0 ? 0 : number.bitPattern
        return bits & (1 << 63) != 0 ? ~bits : bits | (1 << 63)
    }

    /// The double whose ``orderedBits(_:)`` are `ordered` (which may be NaN, infinite or -0.0 when the bytes
    /// did not come from the encoder: callers check).
    @inline(__always)
    static func number(fromOrderedBits ordered: UInt64) -> Double {
        Double(bitPattern: ordered & (1 << 63) != 0 ? ordered & ~(1 << 63) : ~ordered)
    }
}

extension CollationKey.EncodingFailure {
    /// The error to show a person: what is wrong and where in `key`, found by a second, slow walk (only on
    /// failure, so the encoder itself keeps no path).
    func sofaError(for key: JSON) -> SofaError {
        switch self {
        case .collator:
            return SofaError(
                .collationUnavailable,
                "ICU's root collator could not make a sort key (it could not be opened, or memory ran out); "
                    + "check that the ICU data library (libicudata) is installed")
        case .nonFinite:
            let (number, path) = Self.firstNonFinite(in: key, path: "key") ?? (.nan, "key")
            return SofaError(
                .invalidValue,
                "\(number) cannot be a key or part of one (at \(path)): NaN and infinity have no place in "
                    + "JSON collation; emit null or a finite number instead")
        case .tooDeep:
            return SofaError(
                .invalidValue,
                "key nests arrays and objects more than \(CollationKey.maxDepth) levels deep; "
                    + "emit a flatter key")
        }
    }

    /// The first NaN or infinity in `value`, in encoding order, and its path (`key[2]["year"]`).
    private static func firstNonFinite(in value: JSON, path: String) -> (Double, String)? {
        switch value {
        case .number(let number) where !number.isFinite:
            return (number, path)
        case .array(let items):
            for (index, item) in items.enumerated() {
                if let found = firstNonFinite(in: item, path: "\(path)[\(index)]") { return found }
            }
        case .object(let members):
            for (name, member) in members {
                if let found = firstNonFinite(in: member, path: "\(path)[\(quoted(name))]") { return found }
            }
        default:
            break
        }
        return nil
    }

    /// A member name as a JSON string literal, for paths in messages.
    private static func quoted(_ name: String) -> String {
        var text = "\""
        for scalar in name.unicodeScalars {
            switch scalar {
            case "\"": text += "\\\""
            case "\\": text += "\\\\"
            case _ where scalar.value < 0x20: text += "\\u{\(String(scalar.value, radix: 16))}"
            default: text.unicodeScalars.append(scalar)
            }
        }
        return text + "\""
    }
}
