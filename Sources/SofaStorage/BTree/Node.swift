/// A decoded B+tree node: a leaf of key/value entries or an inner node of separator keys and child pointers.
///
/// Payload layout (FORMAT.md, "Nodes"), inside a chunk of kind `leaf` or `inner`:
///
///     varint  entry count (≥ 1)
///     leaf entries:   varint key length, key bytes, varint value length, value bytes
///     inner entries:  varint key length, key bytes, node pointer (see NodePointer)
///
/// Keys ascend strictly in `memcmp` order. An inner entry's key is the largest key of that child's subtree,
/// so child i holds exactly the keys in (key[i-1], key[i]] (the last child's key is the subtree's maximum).
///
/// Decoding validates every length against the payload once and records where each field is, so the
/// accessors below read without further checks (and damaged bytes can never make them read out of bounds). Invariant: each node is reachable from exactly one parent
/// in a commit (copy-on-write never shares a node between two places of one tree).
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

        package init(keyStart: Int, keyLength: Int, valueStart: Int, valueLength: Int) {
            self.keyStart = Int32(keyStart)
            self.keyLength = Int32(keyLength)
            self.valueStart = Int32(valueStart)
            self.valueLength = Int32(valueLength)
        }
    }

    /// Inner nodes only: the pointer fields other than the reduction.
    private struct Child {
        var offset: UInt64
        var rows: UInt64
        var size: UInt64
    }

    private let layout: [Layout]
    private let children: [Child]

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
        try payload.withUnsafeBytes { bytes in
            var r = ByteReader(bytes, fileOffset: payload.offset + UInt64(FileFormat.chunkPrefixSize), path: path)
            let n = try r.readLength(limit: bytes.count)
            guard n > 0 else { throw r.corruption("node has no entries") }
            layout.reserveCapacity(n)
            if !isLeaf { children.reserveCapacity(n) }
            for _ in 0..<n {
                let key = try r.readLengthPrefixed()
                let keyStart = Int32(key.baseAddress! - bytes.baseAddress!)
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
                layout.append(Layout(keyStart: Int(keyStart), keyLength: key.count,
                                     valueStart: value.baseAddress! - bytes.baseAddress!, valueLength: value.count))
            }
            guard r.isAtEnd else { throw r.corruption("node has \(r.remaining) bytes after its last entry") }
        }
        count = layout.count
        self.layout = layout
        self.children = children
    }

    /// A leaf whose payload was just encoded here, with the entry positions the encoder recorded: the node
    /// cache's write-through copy of a leaf batch modify wrote, which needs no parsing (the bytes were
    /// produced from those positions, not read from the file).
    package init(encodedLeaf payload: ChunkPayload, layout: [Layout]) {
        precondition(!layout.isEmpty)
        self.payload = payload
        isLeaf = true
        count = layout.count
        self.layout = layout
        children = []
    }

    /// Approximate memory held, for the cache's budget: the owned payload, the entry layout (16 bytes per
    /// entry), inner nodes' child fields (24 more) and ~160 bytes of object and array headers. Counting a
    /// leaf's entries at their real 16 bytes instead of an inner entry's 40 lets ~9 % more 8 KiB by-ID leaves
    /// fit a given budget.
    package var memoryCost: Int {
        (payload.isOwned ? payload.count : 0) + count * MemoryLayout<Layout>.stride
            + children.count * MemoryLayout<Child>.stride + 160
    }

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
    package func lowerBound(_ key: UnsafeRawBufferPointer, strictly: Bool = false) -> Int {
        var lo = 0, hi = count
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
