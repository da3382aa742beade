// Walking collation keys: bytes → structure. Sort keys cannot be turned back into strings, but every value's
// extent can be found, numbers and the other scalars read back, and arrays cut after their first N items (for
// grouped queries). These functions read bytes from disk, so every read is bounds-checked and malformed input
// throws `invalidCollationKey` with the offset of the offending byte; nothing here traps.

extension CollationKey {
    /// The offset just past the one encoded value that starts at `offset`.
    ///
    /// Checks the value's whole structure on the way: tags, lengths, numbers (finite, not -0.0), string sort
    /// keys (terminated, with exactly two level separators), and nesting no deeper than ``maxDepth``.
    ///
    /// ```swift
    /// let row = key.bytes + Array(docID.utf8)
    /// let keyLength = try CollationKey.elementEnd(in: row, from: 0)   // == key.bytes.count
    /// ```
    ///
    /// - Parameters:
    ///   - bytes: Encoded bytes; anything may follow the value (a row key's doc ID, a parent's next item).
    ///   - offset: Where the value's tag is.
    /// - Throws: ``SofaError`` with code ``SofaError/Code/invalidCollationKey`` naming the offset where the bytes
    ///   stop making sense.
    package static func elementEnd(in bytes: UnsafeRawBufferPointer, from offset: Int) throws -> Int {
        guard offset >= 0 else { throw malformed("a value cannot start at a negative offset", at: offset) }
        return try valueEnd(bytes, offset, depth: 0)
    }

    /// ``elementEnd(in:from:)`` for an array of bytes.
    package static func elementEnd(in bytes: [UInt8], from offset: Int) throws -> Int {
        try bytes.withUnsafeBytes { try elementEnd(in: $0, from: offset) }
    }

    /// The length of the bytes that identify a row's group at `level`: rows whose keys share them are one group.
    ///
    /// For an array key that is the tag and its first `level` items — `[a, b, c]` at level 2 gives the bytes
    /// of `[a, b` — so that keys with the same first two items (`[a, b]`, `[a, b, c]`, `[a, b, d, e]`) share it
    /// and sit next to each other in the index. An array with fewer than `level` items is its own group: its
    /// whole encoding, end byte included, so that `[a]` at level 2 is not a prefix of `[a, b]`'s group bytes.
    /// An array with exactly `level` items gives the same bytes as its longer relatives. Any other key groups
    /// by its whole value. Level 0 puts every row in one group: the length is 0. Group bytes compare with
    /// `memcmp` as the truncated keys collate, so each group is one contiguous run of rows. Only the bytes walked
    /// (the first `level` items) are checked: this runs once per row of a grouped query.
    ///
    /// ```swift
    /// let row = try CollationKey(["Rock", "Queen", "Innuendo"]).bytes + Array("doc1".utf8)
    /// let n = try CollationKey.groupPrefixLength(row, level: 1)   // tag + "Rock": 1 + its sort key
    /// ```
    ///
    /// - Parameters:
    ///   - bytes: An encoded key at offset 0, optionally followed by anything (a doc ID).
    ///   - level: How many leading array items make a group; not negative.
    /// - Throws: ``SofaError`` with code ``SofaError/Code/invalidCollationKey`` if the bytes are malformed.
    package static func groupPrefixLength(_ bytes: UnsafeRawBufferPointer, level: Int) throws -> Int {
        precondition(level >= 0, "group level must not be negative")
        if level == 0 { return 0 }
        guard !bytes.isEmpty else { throw malformed("a collation key cannot be empty", at: 0) }
        guard bytes[0] == Tag.array else { return try valueEnd(bytes, 0, depth: 0) }
        var position = 1
        for _ in 0..<level {
            guard position < bytes.count else { throw truncated(at: position) }
            if bytes[position] == Tag.end { return position + 1 }
            position = try valueEnd(bytes, position, depth: 1)
        }
        return position
    }

    /// ``groupPrefixLength(_:level:)`` for an array of bytes.
    package static func groupPrefixLength(_ bytes: [UInt8], level: Int) throws -> Int {
        try bytes.withUnsafeBytes { try groupPrefixLength($0, level: level) }
    }

    /// The number encoded at `offset`.
    ///
    /// - Throws: ``SofaError`` with code ``SofaError/Code/invalidCollationKey`` if no number is there, it is cut
    ///   short, or its bits are not ones the encoder writes (NaN, infinity, -0.0).
    package static func decodeNumber(_ bytes: UnsafeRawBufferPointer, at offset: Int) throws -> Double {
        guard offset >= 0, offset < bytes.count else { throw truncated(at: max(offset, 0)) }
        guard bytes[offset] == Tag.number else {
            throw malformed("expected a number (tag 0x30), found tag \(hex(bytes[offset]))", at: offset)
        }
        return try numberAfterTag(bytes, offset)
    }

    /// The value encoded at `offset` if it is `null`, a boolean or a number; `nil` for a string, array or object
    /// (strings cannot be decoded from their sort keys).
    ///
    /// - Throws: ``SofaError`` with code ``SofaError/Code/invalidCollationKey`` if the scalar is malformed or the
    ///   byte at `offset` is no tag.
    package static func decodeScalar(_ bytes: UnsafeRawBufferPointer, at offset: Int) throws -> JSON? {
        guard offset >= 0, offset < bytes.count else { throw truncated(at: max(offset, 0)) }
        switch bytes[offset] {
        case Tag.null: return .null
        case Tag.false: return .bool(false)
        case Tag.true: return .bool(true)
        case Tag.number: return .number(try numberAfterTag(bytes, offset))
        case Tag.string, Tag.array, Tag.object: return nil
        case let tag: throw malformed("unknown type tag \(hex(tag))", at: offset)
        }
    }

    // MARK: - The walker

    /// The end of the value at `start`, which sits `depth` containers deep. Recursion is bounded by ``maxDepth``,
    /// checked before each descent, so hostile bytes cannot exhaust the stack.
    private static func valueEnd(_ bytes: UnsafeRawBufferPointer, _ start: Int, depth: Int) throws -> Int {
        guard start < bytes.count else { throw truncated(at: start) }
        switch bytes[start] {
        case Tag.null, Tag.false, Tag.true:
            return start + 1
        case Tag.number:
            _ = try numberAfterTag(bytes, start)
            return start + 9
        case Tag.string:
            return try sortKeyEnd(bytes, start + 1)
        case Tag.array:
            guard depth < maxDepth else { throw tooDeep(at: start) }
            var position = start + 1
            while true {
                guard position < bytes.count else { throw truncated(at: position) }
                if bytes[position] == Tag.end { return position + 1 }
                position = try valueEnd(bytes, position, depth: depth + 1)
            }
        case Tag.object:
            guard depth < maxDepth else { throw tooDeep(at: start) }
            var position = start + 1
            while true {
                guard position < bytes.count else { throw truncated(at: position) }
                if bytes[position] == Tag.end { return position + 1 }
                position = try sortKeyEnd(bytes, position)
                position = try valueEnd(bytes, position, depth: depth + 1)
            }
        case Tag.end:
            throw malformed("an end byte (0x00) where a value should start", at: start)
        case let tag:
            throw malformed("unknown type tag \(hex(tag))", at: start)
        }
    }

    /// The 8 bytes after a number tag at `tagOffset`, as the number the encoder wrote.
    private static func numberAfterTag(_ bytes: UnsafeRawBufferPointer, _ tagOffset: Int) throws -> Double {
        guard bytes.count - tagOffset >= 9 else {
            let remaining = bytes.count - tagOffset - 1
            throw malformed("a number needs 8 bytes after its tag, \(remaining) remain", at: tagOffset)
        }
        let ordered = UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: tagOffset + 1, as: UInt64.self))
        let number = number(fromOrderedBits: ordered)
        // The encoder rejects NaN and infinities and folds -0.0 into 0.0: other bits are not a key it wrote.
        guard number.isFinite, !(number == 0 && number.sign == .minus) else {
            throw malformed("number bytes decode to \(number), which the encoder never writes", at: tagOffset + 1)
        }
        return number
    }

    /// The offset just past the sort key (its 0x00 included) that starts at `start`.
    ///
    /// ICU's tertiary sort keys are `primary 01 secondary 01 tertiary 00`: weights never use 0x00 or 0x01
    /// (ICU reserves them), so exactly two 0x01 bytes come before the terminator.
    private static func sortKeyEnd(_ bytes: UnsafeRawBufferPointer, _ start: Int) throws -> Int {
        var separators = 0
        var position = start
        while position < bytes.count {
            let byte = bytes[position]
            if byte == 0x00 {
                guard separators == 2 else {
                    throw malformed("a string sort key has \(separators) level separators (0x01), not 2", at: start)
                }
                return position + 1
            }
            if byte == 0x01 { separators += 1 }
            position += 1
        }
        throw malformed("a string sort key has no terminating 0x00", at: start)
    }

    // MARK: - Errors

    private static func malformed(_ what: String, at offset: Int) -> SofaError {
        SofaError(.invalidCollationKey, "malformed collation key: \(what)", offset: offset)
    }

    private static func truncated(at offset: Int) -> SofaError {
        malformed("the bytes end in the middle of a value", at: offset)
    }

    private static func tooDeep(at offset: Int) -> SofaError {
        malformed("arrays and objects nest more than \(maxDepth) levels deep", at: offset)
    }

    private static func hex(_ byte: UInt8) -> String {
        "0x" + (byte < 0x10 ? "0" : "") + String(byte, radix: 16)
    }
}
