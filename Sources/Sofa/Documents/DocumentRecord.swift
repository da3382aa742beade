import SofaStorage

/// A by-ID tree entry's value: a document's sequence and revision tree, with the leaves' bodies
/// (FORMAT.md §10.1, "By-ID entries").
///
///     u8      document flags: bit 0 the winner is deleted, bit 1 conflicted (two or more non-deleted leaves)
///     varint  sequence
///     varint  revision count (≥ 1)
///     per revision, winner first:
///       u8      flags: bit 0 deleted, bit 1 leaf, bit 2 binary digest, bit 3 has parent, bits 4–5 body kind
///       varint  generation
///       digest  16 bytes (binary) or varint length + UTF-8
///       varint  parent index (with bit 3)
///       body    kind 1: varint length + JSON bytes; kind 2: varint offset of a value chunk; kind 0: none
///
/// The document flags come first so the counting reducer reads one byte per entry.
struct DocumentRecord: Sendable, Equatable {
    var sequence: UInt64
    var tree: RevisionTree

    // The record's fields and bits by their FORMAT.md §10.1.1 names.

    /// Document flags, bit 0: the winning revision is deleted.
    static let flagDeleted: UInt8 = 0x01
    /// Document flags, bit 1: conflicted (two or more non-deleted leaf revisions).
    static let flagConflicted: UInt8 = 0x02

    /// Revision entry flags, bit 0: deleted.
    private static let revDeleted: UInt8 = 0x01
    /// Revision entry flags, bit 1: leaf.
    private static let revLeaf: UInt8 = 0x02
    /// Revision entry flags, bit 2: binary digest (16 bytes; clear: `varint` length and UTF-8 digest text).
    static let revBinaryDigest: UInt8 = 0x04
    /// Revision entry flags, bit 3: has parent (a `varint` parent index follows the digest).
    private static let revHasParent: UInt8 = 0x08
    /// Revision entry flags, bits 4–5: the body kind, at this shift.
    private static let bodyShift: UInt8 = 4
    /// Revision entry flags, bits 6–7: always zero.
    private static let revReservedBits: UInt8 = 0xC0
    /// Body kind 0: no body (a non-leaf revision, or an empty object).
    private static let bodyKindNone: UInt8 = 0
    /// Body kind 1: inline, a `varint` length then the body bytes.
    private static let bodyKindInline: UInt8 = 1
    /// Body kind 2: chunk, the `varint` file offset of the value chunk holding the body. (Kind 3 is invalid.)
    private static let bodyKindChunk: UInt8 = 2
    /// Generations are below 10^19: a revision ID's generation text has at most 19 digits, so a larger stored
    /// generation is damage (and adding 1 to it could trap).
    private static let generationLimit: UInt64 = 10_000_000_000_000_000_000

    var documentFlags: UInt8 {
        (tree.winner.deleted ? DocumentRecord.flagDeleted : 0) | (tree.isConflicted ? DocumentRecord.flagConflicted : 0)
    }

    func encoded() -> [UInt8] {
        var out: [UInt8] = []
        encode(into: &out)
        return out
    }

    /// Appends the encoded record to `out` (``WriteBatch/Changes`` keeps a batch's records in one buffer).
    func encode(into out: inout [UInt8]) {
        // (`tree.revisions[0]`'s fields, not `tree.winner`'s: the latter copies the whole revision first.)
        if tree.revisions.count == 1, tree.revisions[0].isLeaf, tree.revisions[0].parent == nil,
           case .binary(let high, let low) = tree.revisions[0].id.digest,
           case .inline(let body) = tree.revisions[0].body {
            return body.withUnsafeBytes {
                DocumentRecord.appendFirstRevision(sequence: sequence, generation: tree.revisions[0].id.generation,
                                                   deleted: tree.revisions[0].deleted, high: high, low: low,
                                                   body: $0, into: &out)
            }
        }
        let size = encodedSize
        // Growing geometrically: `out` may be an overlay's whole buffer, which an exact reserve per record would
        // copy again and again.
        out.reserveGrowing(out.count + size)
        // Encoded on the stack, then one copy: appending `size` zeros to encode over was a byte-by-byte loop,
        // ~0.09 µs of D1's put (perf).
        withUnsafeTemporaryAllocation(byteCount: size, alignment: 8) { scratch in
            encode(to: scratch)
            out.appendBytes(UnsafeRawBufferPointer(scratch))
        }
    }

    /// ``encode(into:)`` for a record of one revision with a binary digest and an inline body — a new document's,
    /// every document of a bulk load — sized and stored straight, with the bytes ``unsafeEncode(at:)`` writes
    /// (`DocumentRecordTests` compares the two). The general path's size pass and loop over the revisions were
    /// ~520 instructions of each put (callgrind, D1). A put of a new document calls it with the serializer's
    /// buffer, without a record (``WriteBatch/Changes/appendFirst(_:sequence:revision:body:)``).
    ///
    /// - Parameter prefix: bytes appended just before the record, in the same copy (an overlay's document ID).
    static func appendFirstRevision(sequence: UInt64, generation: UInt64, deleted: Bool, high: UInt64, low: UInt64,
                                    body: UnsafeRawBufferPointer,
                                    after prefix: UnsafeRawBufferPointer = .init(start: nil, count: 0),
                                    into out: inout [UInt8]) {
        // One revision: the winner, a leaf without a parent; no conflict.
        let revisionFlags = (deleted ? DocumentRecord.revDeleted : 0) | DocumentRecord.revLeaf
            | DocumentRecord.revBinaryDigest | DocumentRecord.bodyKindInline << DocumentRecord.bodyShift
        let size = prefix.count + 3 + varintSize(sequence) + varintSize(generation) + 16
            + varintSize(UInt64(body.count)) + body.count
        out.reserveGrowing(out.count + size)
        withUnsafeTemporaryAllocation(byteCount: size, alignment: 8) { scratch in
            // Unchecked stores: `size` counts every byte stored below, field by field, and the precondition after
            // them checks that the stores ended exactly at `size`, so none went past `scratch`.
            var at = scratch.baseAddress!
            if let source = prefix.baseAddress, prefix.count > 0 {
                at.copyMemory(from: source, byteCount: prefix.count)
            }
            at += prefix.count
            at.storeBytes(of: deleted ? DocumentRecord.flagDeleted : 0, as: UInt8.self)
            at = storeVarint(sequence, at: at + 1)
            at.storeBytes(of: 1, as: UInt8.self)  // the revision count
            (at + 1).storeBytes(of: revisionFlags, as: UInt8.self)
            at = storeVarint(generation, at: at + 2)
            at.storeBytes(of: high.bigEndian, as: UInt64.self)
            (at + 8).storeBytes(of: low.bigEndian, as: UInt64.self)
            at = storeVarint(UInt64(body.count), at: at + 16)
            if let source = body.baseAddress, body.count > 0 { at.copyMemory(from: source, byteCount: body.count) }
            at += body.count
            precondition(at == scratch.baseAddress! + size, "a record encoded to other than its size")
            out.appendBytes(UnsafeRawBufferPointer(scratch))
        }
    }

    /// The bytes ``encode(to:)`` writes.
    var encodedSize: Int {
        var size = 1 + varintSize(sequence) + varintSize(UInt64(tree.revisions.count))
        for r in tree.revisions {
            size += 1 + varintSize(r.id.generation)
            switch r.id.digest {
            case .binary: size += 16
            case .text(let text): size += varintSize(UInt64(text.utf8.count)) + text.utf8.count
            }
            if let p = r.parent { size += varintSize(UInt64(p)) }
            switch r.body {
            case .empty: break
            case .inline(let bytes): size += varintSize(UInt64(bytes.count)) + bytes.count
            case .chunk(let offset): size += varintSize(offset)
            }
        }
        return size
    }

    /// Writes the encoded record into `out`, which must be exactly ``encodedSize`` bytes (checked): the one
    /// encoder, which ``encode(into:)`` runs into a stack buffer and ``WriteBatch/Changes`` over a replaced
    /// record's bytes (appending to an array field by field cost ~4 times its instructions; callgrind, D1). The
    /// stores are unchecked; the size check after them is what keeps them inside `out`, and it traps rather than
    /// let a record that overran be written.
    func encode(to out: UnsafeMutableRawBufferPointer) {
        let end = unsafeEncode(at: out.baseAddress!)
        precondition(end == out.baseAddress! + out.count, "a record encoded to other than its size")
    }

    /// The stores of ``encode(to:)``, at `out`; returns the address after the record.
    private func unsafeEncode(at out: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer {
        var at = out
        at.storeBytes(of: documentFlags, as: UInt8.self)
        at = storeVarint(sequence, at: at + 1)
        at = storeVarint(UInt64(tree.revisions.count), at: at)
        for r in tree.revisions {
            var flags: UInt8 = 0
            if r.deleted { flags |= DocumentRecord.revDeleted }
            if r.isLeaf { flags |= DocumentRecord.revLeaf }
            if r.id.isBinary { flags |= DocumentRecord.revBinaryDigest }
            if r.parent != nil { flags |= DocumentRecord.revHasParent }
            switch r.body {
            case .empty: break
            case .inline: flags |= DocumentRecord.bodyKindInline << DocumentRecord.bodyShift
            case .chunk: flags |= DocumentRecord.bodyKindChunk << DocumentRecord.bodyShift
            }
            at.storeBytes(of: flags, as: UInt8.self)
            at = storeVarint(r.id.generation, at: at + 1)
            switch r.id.digest {
            case .binary(let high, let low):
                at.storeBytes(of: high.bigEndian, as: UInt64.self)
                (at + 8).storeBytes(of: low.bigEndian, as: UInt64.self)
                at += 16
            case .text(var text):
                at = storeVarint(UInt64(text.utf8.count), at: at)
                at = text.withUTF8 { utf8 in
                    if utf8.count > 0 { at.copyMemory(from: utf8.baseAddress!, byteCount: utf8.count) }
                    return at + utf8.count
                }
            }
            if let p = r.parent { at = storeVarint(UInt64(p), at: at) }
            switch r.body {
            case .empty: break
            case .inline(let bytes):
                at = storeVarint(UInt64(bytes.count), at: at)
                at = bytes.withUnsafeBytes { body in
                    if body.count > 0 { at.copyMemory(from: body.baseAddress!, byteCount: body.count) }
                    return at + body.count
                }
            case .chunk(let offset): at = storeVarint(offset, at: at)
            }
        }
        return at
    }

    /// Decodes a stored entry; `path` and `offset` locate it for errors.
    ///
    /// - Throws: `.corruption` when a length runs out, a flag is unknown, or the tree breaks its invariants.
    init(decoding bytes: UnsafeRawBufferPointer, path: String, offset: UInt64 = 0) throws {
        var unused: Range<Int>?
        try self.init(decoding: bytes, path: path, offset: offset, copyingBodies: true, bodyOf: nil, at: &unused)
    }

    /// Decodes a stored entry to read one revision of it, copying no body: every inline body is left out of
    /// the tree (it reads as an empty inline body, so the record is for reading, never for writing back), and
    /// the inline body of revision `wanted` (nil: the winner) is returned as its range in `bytes` — parsed
    /// from there, a read makes no copy of it. A body kept in a value chunk stays in the tree as its offset.
    ///
    /// - Throws: as ``init(decoding:path:offset:)``.
    init(decoding bytes: UnsafeRawBufferPointer, path: String, bodyOf wanted: RevisionID?,
         at bodyRange: inout Range<Int>?) throws {
        if let record = DocumentRecord(linearHistory: bytes, bodyOf: wanted, at: &bodyRange) {
            self = record
            return
        }
        try self.init(decoding: bytes, path: path, offset: 0, copyingBodies: false, bodyOf: wanted, at: &bodyRange)
    }

    /// The usual entry read fast, through ``EntryCursor``: a linear history with binary digests — the winner, a
    /// leaf whose deletion matches the document's flag, then its ancestors newest first, each the parent of the
    /// one before it (generations one apart), none a leaf or with a body — that is, every document never in
    /// conflict (a new one has a history of one). The winner's body is inline, a chunk offset or none. Nil for
    /// anything else, including every kind of damage: the general decoder then reads the entry and says what is
    /// wrong. What this accepts passes the general decoder's checks: one leaf, so no conflict and the flags as
    /// stated; distinct generations, so no revision ID twice and the stored order.
    init?(linearHistory bytes: UnsafeRawBufferPointer, bodyOf wanted: RevisionID?,
          at bodyRange: inout Range<Int>?) {
        var c = EntryCursor(bytes: bytes)
        let leafWithBinaryDigest = DocumentRecord.revLeaf | DocumentRecord.revBinaryDigest
        // Every revision takes at least 18 bytes (flags, generation, digest): the count is bounded before use.
        guard let flags = c.byte(), flags & ~DocumentRecord.flagDeleted == 0, let sequence = c.varint(),
              let count = c.varint(), count >= 1, count <= UInt64(bytes.count / 18), let revFlags = c.byte()
        else { return nil }
        let hasAncestors = count > 1
        let expectedFlags = leafWithBinaryDigest | (hasAncestors ? DocumentRecord.revHasParent : 0)
        guard revFlags & (DocumentRecord.revReservedBits | DocumentRecord.revHasParent | leafWithBinaryDigest)
                == expectedFlags,
              revFlags & DocumentRecord.revDeleted == flags,
              let generation = c.varint(), generation >= count, generation < DocumentRecord.generationLimit,
              let (high, low) = c.digest()
        else { return nil }
        if hasAncestors { guard c.varint() == 1 else { return nil } }
        let id = RevisionID(generation: generation, digest: .binary(high: high, low: low))
        let body: StoredBody
        var winnerBody: Range<Int>?  // handed out only when the whole entry reads
        switch revFlags >> DocumentRecord.bodyShift {
        case DocumentRecord.bodyKindNone: body = .empty
        case DocumentRecord.bodyKindInline:
            guard let length = c.varint(), length <= UInt64(bytes.count - c.position) else { return nil }
            let start = c.position
            c.position += Int(length)
            if wanted.map({ $0 == id }) ?? true { winnerBody = start..<c.position }
            body = .inline([])
        case DocumentRecord.bodyKindChunk:
            guard let offset = c.varint() else { return nil }
            body = .chunk(offset: offset)
        default: return nil
        }
        let n = Int(count)
        var revisions: [RevisionTree.Revision] = []
        revisions.reserveCapacity(n)
        revisions.append(RevisionTree.Revision(id: id, parent: hasAncestors ? 1 : nil,
                                               deleted: flags & DocumentRecord.flagDeleted != 0, isLeaf: true,
                                               body: body))
        for i in 1..<n {
            let last = i == n - 1
            // Not a leaf, binary digest, body kind 0, a parent unless it is the oldest kept; deleted or not.
            let ancestorFlags = DocumentRecord.revBinaryDigest | (last ? 0 : DocumentRecord.revHasParent)
            guard let f = c.byte(), f & ~DocumentRecord.revDeleted == ancestorFlags,
                  c.varint() == generation - UInt64(i), let (h, l) = c.digest()
            else { return nil }
            if !last { guard c.varint() == UInt64(i + 1) else { return nil } }
            revisions.append(RevisionTree.Revision(
                id: RevisionID(generation: generation - UInt64(i), digest: .binary(high: h, low: l)),
                parent: last ? nil : i + 1, deleted: f & DocumentRecord.revDeleted != 0, isLeaf: false,
                body: .empty))
        }
        guard c.position == bytes.count else { return nil }
        bodyRange = winnerBody ?? bodyRange
        self.init(sequence: sequence, tree: RevisionTree(revisions: revisions))
    }

    private init(decoding bytes: UnsafeRawBufferPointer, path: String, offset: UInt64, copyingBodies: Bool,
                 bodyOf wanted: RevisionID?, at bodyRange: inout Range<Int>?) throws {
        var r = ByteReader(bytes, fileOffset: offset, path: path)
        let flags = try r.readByte()
        guard flags & ~(DocumentRecord.flagDeleted | DocumentRecord.flagConflicted) == 0 else {
            throw r.corruption("unknown document flags \(flags)")
        }
        sequence = try r.readVarint()
        let count = try r.readLength(limit: r.remaining / 3)
        guard count > 0 else { throw r.corruption("document has no revisions") }
        var revisions: [RevisionTree.Revision] = []
        revisions.reserveCapacity(count)
        for i in 0..<count {
            let revFlags = try r.readByte()
            // With bits 6–7 zero the kind is 0...3, and 3 is invalid.
            let bodyKind = revFlags >> DocumentRecord.bodyShift
            guard revFlags & DocumentRecord.revReservedBits == 0, bodyKind <= DocumentRecord.bodyKindChunk else {
                throw r.corruption("unknown revision flags \(revFlags)")
            }
            let generation = try r.readVarint()
            guard generation > 0, generation < DocumentRecord.generationLimit else {
                throw r.corruption("revision generation \(generation) is out of range")
            }
            let digest = try RevisionID.decodeDigest(&r, binary: revFlags & DocumentRecord.revBinaryDigest != 0)
            var parent: Int?
            if revFlags & DocumentRecord.revHasParent != 0 { parent = try r.readLength(limit: count - 1) }
            let body: StoredBody
            switch bodyKind {
            case DocumentRecord.bodyKindInline:
                let bytesOfBody = try r.readLengthPrefixed()
                if copyingBodies {
                    body = .inline(Array(bytesOfBody))
                } else {
                    if wanted.map({ $0 == RevisionID(generation: generation, digest: digest) }) ?? (i == 0) {
                        bodyRange = r.position - bytesOfBody.count..<r.position
                    }
                    body = .inline([])
                }
            case DocumentRecord.bodyKindChunk: body = .chunk(offset: try r.readVarint())
            default: body = .empty  // bodyKindNone
            }
            revisions.append(RevisionTree.Revision(
                id: RevisionID(generation: generation, digest: digest), parent: parent,
                deleted: revFlags & DocumentRecord.revDeleted != 0, isLeaf: revFlags & DocumentRecord.revLeaf != 0,
                body: body))
        }
        guard r.isAtEnd else { throw r.corruption("by-ID entry has \(r.remaining) trailing bytes") }
        tree = RevisionTree(revisions: revisions)
        let problems = tree.validate()
        guard problems.isEmpty else { throw r.corruption("revision tree: \(problems.joined(separator: "; "))") }
        guard documentFlags == flags else { throw r.corruption("document flags \(flags) disagree with its revisions") }
    }

    init(sequence: UInt64, tree: RevisionTree) {
        self.sequence = sequence
        self.tree = tree
    }
}

/// What an all-docs row needs from a by-ID entry, read without building the revision tree: the flags, the
/// sequence and the winner's ID (always the first revision). A scan decodes one per row, so this reads the
/// bytes directly through ``EntryCursor``, checking every bound, allocating nothing for a binary-digest winner.
struct RecordSummary: Sendable {
    var flags: UInt8
    var sequence: UInt64
    var winner: RevisionID

    var isDeleted: Bool { flags & DocumentRecord.flagDeleted != 0 }
    var isConflicted: Bool { flags & DocumentRecord.flagConflicted != 0 }

    init(decoding bytes: UnsafeRawBufferPointer, path: @autoclosure () -> String) throws {
        var cursor = EntryCursor(bytes: bytes)
        guard let flags = cursor.byte(), let sequence = cursor.varint(), cursor.varint() != nil,
              let revFlags = cursor.byte(), let generation = cursor.varint()
        else { throw SofaError(.corruption, "truncated or malformed by-ID entry", path: path()) }
        self.flags = flags
        self.sequence = sequence
        if revFlags & DocumentRecord.revBinaryDigest != 0 {
            guard let (high, low) = cursor.digest() else {
                throw SofaError(.corruption, "truncated digest", path: path())
            }
            winner = RevisionID(generation: generation, digest: .binary(high: high, low: low))
        } else {
            var r = ByteReader(bytes, position: cursor.position, fileOffset: 0, path: path())
            winner = RevisionID(generation: generation, digest: try RevisionID.decodeDigest(&r, binary: false))
        }
    }
}

extension RecordSummary {
    /// The document flags of a by-ID entry with a binary winner digest, once its summary is known to decode —
    /// checked without building it, as a scan does for every row it hands out (the row decodes the summary
    /// again, and cannot fail, if its value or sequence is asked for). Nil otherwise: a text digest or damage,
    /// for the full decoder to check and name.
    static func checkedFlags(of bytes: UnsafeRawBufferPointer) -> UInt8? {
        // The summary's fields end by byte 42 at the latest when no varint is longer than 8 bytes (flags 1,
        // sequence and revision count ≤ 8 each, revision flags 1, generation ≤ 8, digest 16). Then each
        // varint's end is found from one 8-byte load, without a branch per byte; longer varints and shorter
        // entries (tombstones with no body) take the cursor.
        if bytes.count >= 42 {
            // In bounds: the loads end by byte 28 whatever the lengths; the flags byte and digest are read
            // only when all three lengths are ≤ 8, when the digest ends by byte 42.
            let base = bytes.baseAddress!
            let sequenceLength = Self.varintLength(at: base + 1)
            let countLength = Self.varintLength(at: base + 1 + sequenceLength)
            let revisionFlags = base + 1 + sequenceLength + countLength
            let generationLength = Self.varintLength(at: revisionFlags + 1)
            if sequenceLength <= 8, countLength <= 8, generationLength <= 8 {
                return revisionFlags.load(as: UInt8.self) & DocumentRecord.revBinaryDigest != 0
                    ? base.load(as: UInt8.self) : nil
            }
        }
        var cursor = EntryCursor(bytes: bytes)
        guard let flags = cursor.byte(), cursor.varint() != nil, cursor.varint() != nil, let revFlags = cursor.byte(),
              revFlags & DocumentRecord.revBinaryDigest != 0, cursor.varint() != nil, cursor.digest() != nil
        else { return nil }
        return flags
    }

    /// The length of the varint at `p` when it ends within 8 bytes (1–8), else 9 (so that the positions after
    /// it stay within the first 28 bytes). Reads 8 bytes from `p`.
    @inline(__always)
    private static func varintLength(at p: UnsafeRawPointer) -> Int {
        let word = UInt64(littleEndian: p.loadUnaligned(as: UInt64.self))
        let ends = ~word & 0x8080_8080_8080_8080  // the high bit of each byte that ends a varint
        return (ends.trailingZeroBitCount >> 3) + 1  // 64 trailing zeros when none ends: 9
    }
}

/// A bounds-checked cursor over a by-ID entry for the hot decoders: each read answers nil instead of throwing
/// when the bytes run out (or a varint is malformed), so the caller throws once with its own message.
struct EntryCursor {
    let bytes: UnsafeRawBufferPointer
    var position = 0

    @inline(__always)
    mutating func byte() -> UInt8? {
        guard position < bytes.count else { return nil }
        defer { position += 1 }
        return bytes[position]
    }

    /// A LEB128 varint of at most 64 bits.
    @inline(__always)
    mutating func varint() -> UInt64? {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while position < bytes.count {
            let b = bytes[position]
            position += 1
            if shift == 63 && b > 1 { return nil }
            result |= UInt64(b & 0x7F) << shift
            if b < 0x80 { return result }
            shift += 7
            if shift > 63 { return nil }
        }
        return nil
    }

    /// A 16-byte binary digest as its two big-endian halves.
    @inline(__always)
    mutating func digest() -> (UInt64, UInt64)? {
        guard bytes.count - position >= 16 else { return nil }
        defer { position += 16 }
        return (UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: position, as: UInt64.self)),
                UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: position + 8, as: UInt64.self)))
    }
}

/// The by-ID tree's reducer: live, deleted and conflicted document counts, so ``Database/documentCount`` and
/// `totalRows` come from the root pointer in O(1). Reduction: three varints (live, deleted, conflicted).
struct DocumentCountReducer: Reducer {
    struct Counts: Equatable {
        var live: UInt64 = 0
        var deleted: UInt64 = 0
        var conflicted: UInt64 = 0
    }

    func reduce(_ entries: [(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)]) throws -> [UInt8] {
        var c = Counts()
        for e in entries {
            let one = Counts(flags: e.value.first ?? 0)
            c.live += one.live
            c.deleted += one.deleted
            c.conflicted += one.conflicted
        }
        return DocumentCountReducer.encode(c)
    }

    func rereduce(_ reductions: [UnsafeRawBufferPointer]) throws -> [UInt8] {
        var c = Counts()
        for bytes in reductions {
            let part = try DocumentCountReducer.decode(bytes)
            c.live &+= part.live
            c.deleted &+= part.deleted
            c.conflicted &+= part.conflicted
        }
        return DocumentCountReducer.encode(c)
    }

    static func encode(_ c: Counts) -> [UInt8] {
        var out: [UInt8] = []
        out.appendVarint(c.live)
        out.appendVarint(c.deleted)
        out.appendVarint(c.conflicted)
        return out
    }

    static func decode(_ bytes: UnsafeRawBufferPointer) throws -> Counts {
        // Most reductions are three one-byte varints (a leaf's counts); an inner node rereduces hundreds of them.
        if bytes.count == 3, bytes[0] < 0x80, bytes[1] < 0x80, bytes[2] < 0x80 {
            return Counts(live: UInt64(bytes[0]), deleted: UInt64(bytes[1]), conflicted: UInt64(bytes[2]))
        }
        // Larger counts (a subtree's): read in place, without a reader; anything unusual (an overlong varint, a
        // truncated one, trailing bytes) is left to the reader below, which names the error.
        var cursor = EntryCursor(bytes: bytes)
        if let live = cursor.varint(), let deleted = cursor.varint(), let conflicted = cursor.varint(),
           cursor.position == bytes.count {
            return Counts(live: live, deleted: deleted, conflicted: conflicted)
        }
        var r = ByteReader(bytes, fileOffset: 0, path: "by-ID reduction")
        let c = Counts(live: try r.readVarint(), deleted: try r.readVarint(), conflicted: try r.readVarint())
        guard r.isAtEnd else { throw r.corruption("by-ID reduction has trailing bytes") }
        return c
    }

    static func decode(_ bytes: [UInt8]?) -> Counts {
        guard let bytes, !bytes.isEmpty else { return Counts() }
        return (try? bytes.withUnsafeBytes { try decode($0) }) ?? Counts()
    }
}

extension DocumentCountReducer.Counts {
    /// The counts of one document whose by-ID entry has document flags `flags`.
    init(flags: UInt8) {
        self.init()
        if flags & DocumentRecord.flagDeleted != 0 { deleted = 1 } else { live = 1 }
        if flags & DocumentRecord.flagConflicted != 0 { conflicted = 1 }
    }
}
