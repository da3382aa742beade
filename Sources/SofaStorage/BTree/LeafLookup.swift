/// Finding one key in a leaf's payload without decoding the leaf into a ``Node``.
///
/// A lookup that reads a leaf once and throws it away (the incremental view update's by-ID and back-index
/// lookups: thousands of scattered leaves, none read twice) needs neither the node's entry layout nor its key
/// heads, only the entry it asks for. This walks the entries of the payload (FORMAT.md §8, "B+tree nodes":
/// varint entry count, then per entry a varint key length, the key, a varint value length and the value) in
/// order (``forEachEntry(inLeaf:chunkOffset:path:_:)``), and stops at the first key that is not smaller than the
/// one sought: on average half a leaf parsed, nothing allocated.
///
/// Every length is checked against the payload before it is used, as ``Node/init(payload:isLeaf:path:)`` does,
/// so damaged bytes give a corruption error naming the file offset, never a read out of bounds. Only the part
/// of the leaf up to the answer's entry (or the first larger key's) is parsed, so damage after it goes
/// unnoticed here (the chunk's CRC32C has been checked already; `BTree.verify()` decodes every node).
enum LeafLookup {
    /// The value stored under `key` in the leaf whose payload is `payload`, as a view into the payload; nil
    /// when the leaf has no such key.
    ///
    /// - Throws: `.corruption` when the entry count is 0, a length runs past the payload before the answer, or
    ///   (every key being smaller) the payload does not end after the last entry.
    static func value(for key: UnsafeRawBufferPointer, inLeaf payload: ChunkPayload,
                      path: String) throws -> UnsafeRawBufferPointer? {
        // Valid while `payload` lives: the caller keeps it (``NodeSlice/init(payload:value:)``) as long as the
        // returned view is used.
        try value(for: key, inLeaf: UnsafeRawBufferPointer(start: payload.base, count: payload.count),
                  chunkOffset: payload.offset, path: path)
    }

    /// ``value(for:inLeaf:path:)`` in the payload bytes `bytes` of the leaf chunk at `chunkOffset` (a view into
    /// `bytes`, valid as long as they are).
    static func value(for key: UnsafeRawBufferPointer, inLeaf bytes: UnsafeRawBufferPointer, chunkOffset: UInt64,
                      path: String) throws -> UnsafeRawBufferPointer? {
        var found: UnsafeRawBufferPointer?
        try forEachEntry(inLeaf: bytes, chunkOffset: chunkOffset, path: path) { entryKey, value in
            let c = order(entryKey, key)
            if c == 0 { found = value }
            return c < 0  // keys ascend: past the key, it is not in this leaf
        }
        return found
    }

    /// Calls `body` with each entry's key and value (views into `bytes`, the payload of the leaf chunk at
    /// `chunkOffset`), in order, until it returns false. Every length is checked before use; when every entry
    /// was walked (the whole payload read), the payload must end after the last one, as a decoded node must.
    /// The one walker of a leaf's bytes for the readers that do not decode it (lookups here, and
    /// ``ReduceParts/addLeafRows(_:chunkOffset:range:path:)``).
    ///
    /// - Throws: `.corruption` when the entry count is 0, a length runs past the payload, or the payload does
    ///   not end after the last entry.
    @inline(__always)
    static func forEachEntry(inLeaf bytes: UnsafeRawBufferPointer, chunkOffset: UInt64, path: String,
                             _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool)
        throws
    {
        var r = ByteReader(bytes, fileOffset: chunkOffset + UInt64(FileFormat.chunkPrefixSize), path: path)
        let n = try r.readLength(limit: bytes.count)
        guard n > 0 else { throw r.corruption("node has no entries") }
        for _ in 0..<n {
            let key = try r.readLengthPrefixed()
            let value = try r.readLengthPrefixed()
            if try !body(key, value) { return }
        }
        guard r.isAtEnd else { throw r.corruption("node has trailing bytes after its \(n) entries") }
    }

    /// ``compareBytes(_:_:)``'s order, 8 bytes at a time: a leaf's keys (document IDs, for by-ID) are short and
    /// share long prefixes, and a scan compares up to every key of the leaf, where a `memcmp` call per key cost
    /// more than the comparison.
    @inline(__always)
    static func order(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
        let n = min(a.count, b.count)
        var i = 0
        while i + 8 <= n {
            let x = UInt64(bigEndian: a.loadUnaligned(fromByteOffset: i, as: UInt64.self))
            let y = UInt64(bigEndian: b.loadUnaligned(fromByteOffset: i, as: UInt64.self))
            if x != y { return x < y ? -1 : 1 }
            i += 8
        }
        while i < n {
            let x = a[i], y = b[i]
            if x != y { return x < y ? -1 : 1 }
            i += 1
        }
        return a.count - b.count
    }
}
