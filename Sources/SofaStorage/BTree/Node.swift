/// A decoded B+tree node: a leaf of key/value entries or an inner node of separator keys and child pointers.
///
/// Payload layout (FORMAT.md §8, "B+tree nodes"), inside a chunk of kind `leaf` or `inner`:
///
///     varint  entry count (≥ 1)
///     leaf entries:   varint key length, key bytes, varint value length, value bytes
///     inner entries:  varint key length, key bytes, node pointer (see NodePointer)
///
/// Keys ascend strictly in `memcmp` order. An inner entry's key is the largest key of that child's subtree,
/// so child i holds exactly the keys in (key[i-1], key[i]] (the last child's key is the subtree's maximum).
///
/// Decoding validates every length against the payload once and records where each field is, so the
/// accessors below read without further checks (and damaged bytes can never make them read out of bounds).
/// Invariant: each node is reachable from exactly one parent in a commit (copy-on-write never shares a node
/// between two places of one tree).
package final class Node: @unchecked Sendable {
    package let payload: ChunkPayload
    package let isLeaf: Bool
    package let count: Int
    /// Where each entry's key and value (leaf) or reduction (inner) sit in the payload.
    package struct Layout {
        var keyStart: Int32
        var keyLength: Int32
        var valueStart: Int32
        var valueLength: Int32
    }

    /// Inner nodes only: the pointer fields other than the reduction.
    package struct Child {
        var offset: UInt64
        var rows: UInt64
        var size: UInt64
    }

    private let layout: [Layout]
    private let children: [Child]
    /// Every key's length prefix is the shortest varint for it (always so for nodes Sofa writes; a reader
    /// accepts longer ones), so ``encodedEntryRange(_:)`` can find where an entry starts.
    package let hasShortestKeyLengths: Bool
    /// Bytes every key of the node begins with (the first and last keys' common prefix).
    private let sharedPrefixLength: Int
    /// Per entry, the 4 key bytes after the shared prefix, big-endian, zero-padded past the key's end:
    /// ``lowerBound(_:strictly:)`` compares these first and reads a key itself only on a tie, so a search
    /// in a node not in the CPU caches touches this small array instead of a layout entry and a key per probe.
    private let keyHeads: [UInt32]

    /// Decodes and validates a node chunk's payload.
    ///
    /// - Throws: `.corruption` naming the file and offset when a length runs past the payload or the count is
    ///   0. Key order is not checked here (a node that passed its CRC was written in order by construction);
    ///   `BTree.verify()` checks it.
    package init(payload: ChunkPayload, isLeaf: Bool, path: String) throws {
        self.payload = payload
        self.isLeaf = isLeaf
        var layout: [Layout] = []
        var children: [Child] = []
        var shortest = true
        try payload.withUnsafeBytes { bytes in
            var r = ByteReader(bytes, fileOffset: payload.offset + UInt64(FileFormat.chunkPrefixSize), path: path)
            let n = try r.readLength(limit: bytes.count)
            guard n > 0 else { throw r.corruption("node has no entries") }
            layout.reserveCapacity(n)
            if !isLeaf { children.reserveCapacity(n) }
            for _ in 0..<n {
                let entryStart = r.position
                let key = try r.readLengthPrefixed()
                let keyStart = Int32(key.baseAddress! - bytes.baseAddress!)
                if Int(keyStart) - entryStart != varintSize(UInt64(key.count)) { shortest = false }
                if !isLeaf {
                    let childAt = r.position
                    let offset: UInt64 = try r.readLittleEndian()
                    // Copy-on-write appends children before their parent, so a child always lies earlier in the
                    // file. Enforcing it makes cycles (and unbounded descent) impossible in damaged files.
                    guard offset < payload.offset else {
                        r.position = childAt
                        throw r.corruption("child pointer \(offset) does not point before its parent")
                    }
                    let rows = try r.readVarint()
                    let size = try r.readVarint()
                    children.append(Child(offset: offset, rows: rows, size: size))
                }
                let value = try r.readLengthPrefixed()
                layout.append(Layout(keyStart: keyStart, keyLength: Int32(key.count),
                                     valueStart: Int32(value.baseAddress! - bytes.baseAddress!),
                                     valueLength: Int32(value.count)))
            }
            guard r.isAtEnd else { throw r.corruption("node has \(r.remaining) bytes after its last entry") }
        }
        count = layout.count
        self.layout = layout
        self.children = children
        hasShortestKeyLengths = shortest
        (sharedPrefixLength, keyHeads) = Node.computeKeyHeads(payload, layout)
    }

    /// A node its writer has just encoded into `payload`, with the entry positions and child fields the
    /// encoder recorded (``NodeWriter``): the same node ``init(payload:isLeaf:path:)`` would decode, without
    /// parsing the bytes again for the write-through cache.
    package init(payload: ChunkPayload, isLeaf: Bool, layout: [Layout], children: [Child]) {
        precondition(!layout.isEmpty && (isLeaf ? children.isEmpty : children.count == layout.count))
        self.payload = payload
        self.isLeaf = isLeaf
        count = layout.count
        self.layout = layout
        self.children = children
        hasShortestKeyLengths = true
        (sharedPrefixLength, keyHeads) = Node.computeKeyHeads(payload, layout)
    }

    /// A leaf that lives only in memory, holding `entries` (keys strictly ascending, at least one): what a
    /// reader merges with a tree's own leaves when entries are committed outside the tree (the document file's
    /// commit log, FORMAT.md §10.1.7). Encoded as a stored leaf's payload (§8), so it reads like one.
    package static func inMemoryLeaf(_ entries: [(key: [UInt8], value: [UInt8])]) -> Node {
        precondition(!entries.isEmpty, "a leaf holds at least one entry")
        var bytes: [UInt8] = []
        bytes.appendVarint(UInt64(entries.count))
        for e in entries {
            bytes.appendVarint(UInt64(e.key.count))
            bytes.append(contentsOf: e.key)
            bytes.appendVarint(UInt64(e.value.count))
            bytes.append(contentsOf: e.value)
        }
        let memory = UnsafeMutableRawPointer.allocate(byteCount: bytes.count, alignment: 8)
        bytes.withUnsafeBytes { memory.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        let payload = ChunkPayload(taking: memory, count: bytes.count, offset: 0, kind: .leaf, fileLength: 0)
        // Cannot fail: the bytes were just encoded with every length right.
        return try! Node(payload: payload, isLeaf: true, path: "(memory)")
    }

    /// The entries of a leaf chunk's `payload` as views of it (valid while it lives), into `entries` (emptied
    /// first, its capacity kept): for a caller that walks a leaf once, without the entry layout and key heads a
    /// node builds for searching it. Validated as ``init(payload:isLeaf:path:)`` validates a leaf.
    ///
    /// - Throws: `.corruption` naming the file and offset when a length runs past the payload or the count is 0.
    package static func leafEntries(
        of payload: ChunkPayload, path: String,
        into entries: inout [(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)]
    ) throws {
        entries.removeAll(keepingCapacity: true)
        // The payload's bytes stay where they are while it lives (as a node's accessors rely on too).
        let bytes = UnsafeRawBufferPointer(start: payload.base, count: payload.count)
        var r = ByteReader(bytes, fileOffset: payload.offset + UInt64(FileFormat.chunkPrefixSize), path: path)
        let n = try r.readLength(limit: bytes.count)
        guard n > 0 else { throw r.corruption("node has no entries") }
        entries.reserveGrowing(n)  // a buffer kept from leaf to leaf
        for _ in 0..<n {
            let key = try r.readLengthPrefixed()
            let value = try r.readLengthPrefixed()
            entries.append((key, value))
        }
        guard r.isAtEnd else { throw r.corruption("node has \(r.remaining) bytes after its last entry") }
    }

    /// Inner nodes: where entry `i`'s encoded bytes (key length, key, node pointer) lie in the payload, which
    /// a rewrite of this node copies unchanged for a child it does not touch. Only valid when
    /// ``hasShortestKeyLengths``: the entry's start is then the key's start less its length prefix's size.
    package func encodedEntryRange(_ i: Int) -> Range<Int> {
        let l = layout[i]
        return (Int(l.keyStart) - varintSize(UInt64(l.keyLength)))..<Int(l.valueStart + l.valueLength)
    }

    /// The node's shared key prefix length and per-entry key heads (the stored `keyHeads`).
    private static func computeKeyHeads(_ payload: ChunkPayload, _ layout: [Layout]) -> (Int, [UInt32]) {
        let first = Node.slice(payload, layout[0]), last = Node.slice(payload, layout[layout.count - 1])
        var shared = 0
        while shared < min(first.count, last.count) && first[shared] == last[shared] { shared += 1 }
        return (shared, layout.map { Node.head(of: Node.slice(payload, $0), after: shared) })
    }

    private static func slice(_ payload: ChunkPayload, _ l: Layout) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: payload.base + Int(l.keyStart), count: Int(l.keyLength))
    }

    /// The 4 bytes of `key` after its first `skip`, big-endian, zero-padded.
    @inline(__always)
    private static func head(of key: UnsafeRawBufferPointer, after skip: Int) -> UInt32 {
        if skip + 4 <= key.count { return UInt32(bigEndian: key.loadUnaligned(fromByteOffset: skip, as: UInt32.self)) }
        var head: UInt32 = 0
        for i in skip..<skip + 4 {
            head = head << 8 | (i < key.count ? UInt32(key[i]) : 0)
        }
        return head
    }

    /// Approximate memory held, for the cache's budget: the owned payload, the entry layout and key heads (20
    /// bytes per entry), inner nodes' child fields (24 more) and ~190 bytes of object and array headers.
    /// Counting a leaf's entries at their real 20 bytes instead of an inner entry's 44 lets more 8 KiB by-ID
    /// leaves fit a given budget.
    package var memoryCost: Int {
        (payload.isOwned ? payload.count : 0) + count * (MemoryLayout<Layout>.stride + MemoryLayout<UInt32>.stride)
            + children.count * MemoryLayout<Child>.stride + 192
    }

    /// Where entry `i`'s key and value (or reduction) lie in the payload.
    package func entryLayout(_ i: Int) -> Layout { layout[i] }

    /// The key of entry `i`. Valid while this node lives.
    package func key(_ i: Int) -> UnsafeRawBufferPointer {
        let l = layout[i]
        return UnsafeRawBufferPointer(start: payload.base + Int(l.keyStart), count: Int(l.keyLength))
    }

    /// The value of leaf entry `i`, or the stored reduction of inner entry `i`.
    package func value(_ i: Int) -> UnsafeRawBufferPointer {
        let l = layout[i]
        return UnsafeRawBufferPointer(start: payload.base + Int(l.valueStart), count: Int(l.valueLength))
    }

    /// Inner nodes: the pointer to child `i`.
    package func child(_ i: Int) -> NodePointer {
        let c = children[i]
        return NodePointer(offset: c.offset, rowCount: c.rows, subtreeSize: c.size, reduction: Array(value(i)))
    }

    package func childOffset(_ i: Int) -> UInt64 { children[i].offset }
    package func childRowCount(_ i: Int) -> UInt64 { children[i].rows }
    package func childSubtreeSize(_ i: Int) -> UInt64 { children[i].size }

    /// The first index whose key is ≥ `key` (or > `key` when `strictly`); `count` when there is none.
    ///
    /// When `key` begins with the node's shared prefix, a probe compares the 4 bytes after it with the entry's
    /// ``keyHeads`` value: the keys order as those do when they differ (a shorter key's padding zeros sort
    /// before any byte of a longer one, as a prefix sorts before its extensions), and only equal heads need the
    /// whole keys compared.
    package func lowerBound(_ key: UnsafeRawBufferPointer, strictly: Bool = false) -> Int {
        var lo = 0, hi = count
        let shared = sharedPrefixLength
        if key.count >= shared, shared == 0 || memcmp(key.baseAddress!, self.key(0).baseAddress!, shared) == 0 {
            let head = Node.head(of: key, after: shared)
            return keyHeads.withUnsafeBufferPointer { heads in
                while lo < hi {
                    let mid = (lo + hi) >> 1
                    let h = heads[mid]
                    let c = h != head ? (h < head ? -1 : 1) : compareBytes(self.key(mid), key)
                    if c < 0 || (strictly && c == 0) { lo = mid + 1 } else { hi = mid }
                }
                return lo
            }
        }
        while lo < hi {
            let mid = (lo + hi) >> 1
            let c = compareBytes(self.key(mid), key)
            if c < 0 || (strictly && c == 0) { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    /// Inner nodes: the child whose key interval holds `key` (the last child when `key` is beyond them all).
    package func childIndex(for key: UnsafeRawBufferPointer) -> Int {
        min(lowerBound(key), count - 1)
    }
}

/// `memcmp` order of two byte strings, shorter first on a common prefix: negative, zero or positive.
package func compareBytes(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
    let n = min(a.count, b.count)
    if n > 0 {
        let c = memcmp(a.baseAddress!, b.baseAddress!, n)
        if c != 0 { return Int(c) }
    }
    return a.count - b.count
}

#if canImport(Glibc)
import Glibc
#endif
