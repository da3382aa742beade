import CXXHash
import SofaStorage

/// A revision ID, `generation-digest`: how many edits lead to the revision, and a digest naming the edit.
///
/// Digests Sofa makes are XXH3-128 of the edit (``derived(parent:deleted:body:)``; files written before it
/// hold MD5 digests, equally valid: IDs are opaque), written as 32 lowercase hex characters, and are held as
/// 16 bytes; a replicator may bring revisions with other digest text, which is kept as it is. Ordering is
/// CouchDB's: by generation, then by digest text — the tie-break that picks a conflict's winner.
struct RevisionID: Sendable, Hashable, Comparable, CustomStringConvertible {
    enum Digest: Sendable, Hashable {
        /// 32 lowercase hex characters, as two big-endian halves of the 16 bytes (a 128-bit digest: XXH3-128
        /// for the revisions Sofa makes, MD5 in older files, or any such text a replicator brings).
        case binary(high: UInt64, low: UInt64)
        /// Any other non-empty digest text.
        case text(String)
    }

    /// Edits from the document's creation to this revision; 1 for the first.
    let generation: UInt64
    let digest: Digest

    /// The longest revision ID accepted, in UTF-8 bytes.
    static let maximumLength = 256

    init(generation: UInt64, digest: Digest) {
        self.generation = generation
        self.digest = digest
    }

    /// Parses `N-digest` (N a positive decimal without leading zeros, digest non-empty); `nil` when malformed.
    init?(_ text: String) {
        let utf8 = text.utf8
        guard utf8.count <= RevisionID.maximumLength, let dash = utf8.firstIndex(of: UInt8(ascii: "-")) else {
            return nil
        }
        let number = utf8[..<dash]
        guard let first = number.first, first != UInt8(ascii: "0"), number.count <= 19,
              number.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        let generation = number.reduce(UInt64(0)) { $0 * 10 + UInt64($1 - UInt8(ascii: "0")) }
        let rest = utf8[utf8.index(after: dash)...]
        guard !rest.isEmpty else { return nil }
        self.generation = generation
        self.digest = RevisionID.parseHex(rest) ?? .text(String(decoding: rest, as: UTF8.self))
    }

    /// A 32-character lowercase hex digest as bytes; `nil` for anything else.
    static func parseHex(_ text: some Collection<UInt8>) -> Digest? {
        guard text.count == 32 else { return nil }
        var high: UInt64 = 0, low: UInt64 = 0
        for (i, ch) in text.enumerated() {
            let nibble: UInt64
            switch ch {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = UInt64(ch - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = UInt64(ch - UInt8(ascii: "a") + 10)
            default: return nil
            }
            if i < 16 { high = high << 4 | nibble } else { low = low << 4 | nibble }
        }
        return .binary(high: high, low: low)
    }

    /// The digest part as text.
    var digestText: String {
        switch digest {
        case .text(let t): return t
        case .binary(let high, let low):
            return String(unsafeUninitializedCapacity: 32) { out in
                RevisionID.writeHex(high, low, to: out.baseAddress!)
                return 32
            }
        }
    }

    /// `generation-digest`. Built in one string allocation: views ask for it once per document they map.
    var description: String {
        guard case .binary(let high, let low) = digest else { return "\(generation)-\(digestText)" }
        var digits = generation
        var count = 1
        while digits >= 10 {
            digits /= 10
            count += 1
        }
        return String(unsafeUninitializedCapacity: count + 33) { out in
            var n = generation
            for i in stride(from: count - 1, through: 0, by: -1) {
                out[i] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: n % 10)
                n /= 10
            }
            out[count] = UInt8(ascii: "-")
            RevisionID.writeHex(high, low, to: out.baseAddress! + count + 1)
            return count + 33
        }
    }

    /// Writes the 32 lowercase hex digits of a binary digest (`high` first) at `out`.
    @inline(__always)
    private static func writeHex(_ high: UInt64, _ low: UInt64, to out: UnsafeMutablePointer<UInt8>) {
        for i in 0..<16 {
            let h = UInt8(truncatingIfNeeded: (high >> (4 * UInt64(i))) & 15)
            let l = UInt8(truncatingIfNeeded: (low >> (4 * UInt64(i))) & 15)
            out[15 - i] = h < 10 ? UInt8(ascii: "0") + h : UInt8(ascii: "a") + h - 10
            out[31 - i] = l < 10 ? UInt8(ascii: "0") + l : UInt8(ascii: "a") + l - 10
        }
    }

    static func < (x: RevisionID, y: RevisionID) -> Bool {
        if x.generation != y.generation { return x.generation < y.generation }
        switch (x.digest, y.digest) {
        case let (.binary(xh, xl), .binary(yh, yl)): return (xh, xl) < (yh, yl)
        default: return Array(x.digestText.utf8).lexicographicallyPrecedes(Array(y.digestText.utf8))
        }
    }

    /// The ID of the revision that edits `parent` (nil for a document's first revision) into `body`.
    ///
    /// The digest is XXH3-128 (xxHash 0.8, seed 0) over: one byte, 1 for a deletion and 0 otherwise; the
    /// parent's ID as a varint length and its UTF-8 text (length 0 without a parent); the body's stored bytes
    /// (compact JSON without `_id`/`_rev`, object members in the order given; empty for an empty body), as
    /// FORMAT.md §10.1.3 says. Equal edits of equal revisions on two replicas therefore get equal IDs.
    static func derived(parent: RevisionID?, deleted: Bool, body: [UInt8]) -> RevisionID {
        body.withUnsafeBytes { derived(parent: parent, deleted: deleted, body: $0) }
    }

    /// ``derived(parent:deleted:body:)-([UInt8])`` of a body in place.
    static func derived(parent: RevisionID?, deleted: Bool, body: UnsafeRawBufferPointer) -> RevisionID {
        guard let parent else { return derivedFirst(deleted: deleted, body: body) }
        // One-shot over one contiguous buffer (XXH3's streaming state is ~600 bytes to set up): the prefix, then
        // the body copied after it, on the stack for a usual body.
        let parentText = Array(parent.description.utf8)
        var prefix: (UInt8, UInt8, UInt8) = (deleted ? 1 : 0, 0, 0)
        var prefixCount = 2
        withUnsafeMutableBytes(of: &prefix) { p in
            // A revision ID's text is at most 276 bytes (19 digits, '-', a digest of up to 256): a varint of
            // one or two bytes, which the two bytes after the deleted flag hold.
            precondition(parentText.count < 1 << 14, "revision ID text too long for the digest's prefix")
            var n = UInt64(parentText.count)
            var i = 1
            while n >= 0x80 {
                p[i] = UInt8(truncatingIfNeeded: n) | 0x80
                n >>= 7
                i += 1
            }
            p[i] = UInt8(truncatingIfNeeded: n)
            prefixCount = i + 1
        }
        let total = prefixCount + parentText.count + body.count
        let hash = withUnsafeTemporaryAllocation(byteCount: total, alignment: 8) { buffer in
            // `buffer` holds exactly the prefix, the parent's text and the body, copied in that order.
            let base = buffer.baseAddress!
            withUnsafeBytes(of: prefix) { base.copyMemory(from: $0.baseAddress!, byteCount: prefixCount) }
            func copy(_ part: UnsafeRawBufferPointer, to offset: Int) {
                guard let source = part.baseAddress, part.count > 0 else { return }
                (base + offset).copyMemory(from: source, byteCount: part.count)
            }
            parentText.withUnsafeBytes { copy($0, to: prefixCount) }
            copy(body, to: prefixCount + parentText.count)
            return XXH3_128bits(buffer.baseAddress, total)
        }
        return RevisionID(generation: parent.generation + 1, digest: .binary(high: hash.high64, low: hash.low64))
    }

    /// ``derived(parent:deleted:body:)-([UInt8])`` without a parent (a document's first revision, every put of
    /// a bulk load): the deleted byte, the parent's length 0, then the body, hashed without building the
    /// parent's text (~120 instructions of each put, callgrind D1).
    private static func derivedFirst(deleted: Bool, body: UnsafeRawBufferPointer) -> RevisionID {
        let total = 2 + body.count
        let hash = withUnsafeTemporaryAllocation(byteCount: total, alignment: 8) { buffer in
            let base = buffer.baseAddress!
            storeFirstPrefix(deleted: deleted, at: base)
            if let source = body.baseAddress, body.count > 0 {
                (base + 2).copyMemory(from: source, byteCount: body.count)
            }
            return XXH3_128bits(base, total)
        }
        return RevisionID(generation: 1, digest: .binary(high: hash.high64, low: hash.low64))
    }

    /// A first revision's ID for a put's `body`, hashed where it lies: the two bytes before it in the digest's
    /// input are stored in the room the serializer left before the text (``UnsafeDocumentBody``), so the body is not
    /// copied first. A body without that room is copied, as ``derived(parent:deleted:body:)-([UInt8])`` does.
    static func derivedFirst(deleted: Bool, body: UnsafeDocumentBody) -> RevisionID {
        guard let room = body.prefixRoom else { return derivedFirst(deleted: deleted, body: body.bytes) }
        // The room is the two bytes just before the text (DocumentInput made them so).
        assert(body.bytes.count == 0 || UnsafeRawPointer(room + UnsafeDocumentBody.headroom) == body.bytes.baseAddress)
        storeFirstPrefix(deleted: deleted, at: room)
        let hash = XXH3_128bits(room, UnsafeDocumentBody.headroom + body.bytes.count)
        return RevisionID(generation: 1, digest: .binary(high: hash.high64, low: hash.low64))
    }

    /// Stores the two bytes a first revision's digest input starts with: the deleted flag, and the parent's
    /// text as a varint length of 0.
    @inline(__always)
    private static func storeFirstPrefix(deleted: Bool, at base: UnsafeMutableRawPointer) {
        base.storeBytes(of: deleted ? 1 : 0, as: UInt8.self)
        (base + 1).storeBytes(of: 0, as: UInt8.self)
    }

    // MARK: - Stored form (FORMAT.md §10.1, "Revisions")

    var isBinary: Bool { if case .binary = digest { return true } else { return false } }

    static func decodeDigest(_ reader: inout ByteReader, binary: Bool) throws -> Digest {
        if binary {
            // Read as a slice, not with the generic readLittleEndian, which is not specialized across modules.
            let bytes = try reader.readSlice(16)
            return .binary(high: UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: 0, as: UInt64.self)),
                        low: UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
        }
        let text = try reader.readLengthPrefixed()
        guard !text.isEmpty, text.count <= maximumLength, let s = String(validating: text, as: UTF8.self) else {
            throw reader.corruption("revision digest is empty, too long or not UTF-8")
        }
        return .text(s)
    }
}

extension Array where Element == UInt8 {
    /// Appends `value` big-endian (digests and sequence keys, whose byte order must be their numeric order).
    mutating func appendBigEndian(_ value: UInt64) {
        Swift.withUnsafeBytes(of: value.bigEndian) { append(contentsOf: $0) }
    }
}
