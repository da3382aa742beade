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
/// accessors below read without further checks. Invariant: each node is reachable from exactly one parent
/// in a commit (copy-on-write never shares a node between two places of one tree).
package final class Node: @unchecked Sendable {
    package let payload: ChunkPayload
    package let isLeaf: Bool
    package let count: Int
    /// Per entry: key start, key length, then value start, value length (leaf) or pointer start,
    /// reduction start, reduction length (inner) — offsets into the payload.
    private let keyStart: [Int32]
    private let keyLength: [Int32]
    private let valueStart: [Int32]
    private let valueLength: [Int32]
    /// Inner nodes only: the decoded pointer fields other than the reduction.
    private let childOffset: [UInt64]
    private let childRows: [UInt64]
    private let childSize: [UInt64]

    /// Decodes and validates a node chunk's payload.
    ///
    /// - Throws: `.corruption` naming the file and offset when a length runs past the payload, the count is 0,
    ///   or keys do not ascend.
    package init(payload: ChunkPayload, isLeaf: Bool, path: String) throws {
        self.payload = payload
        self.isLeaf = isLeaf
        var ks: [Int32] = [], kl: [Int32] = [], vs: [Int32] = [], vl: [Int32] = []
        var co: [UInt64] = [], cr: [UInt64] = [], cs: [UInt64] = []
        let n: Int = try payload.withUnsafeBytes { bytes in
            var r = ByteReader(bytes, fileOffset: payload.offset + UInt64(FileFormat.chunkPrefixSize), path: path)
            let n = try r.readLength(limit: bytes.count)
            guard n > 0 else { throw r.corruption("node has no entries") }
            ks.reserveCapacity(n); kl.reserveCapacity(n); vs.reserveCapacity(n); vl.reserveCapacity(n)
            if !isLeaf { co.reserveCapacity(n); cr.reserveCapacity(n); cs.reserveCapacity(n) }
            var previous: UnsafeRawBufferPointer?
            for _ in 0..<n {
                let keyAt = r.position
                let key = try r.readLengthPrefixed()
                if let previous, compareBytes(previous, key) >= 0 {
                    throw r.corruption("node keys are not in ascending order (entry at payload offset \(keyAt))")
                }
                previous = key
                ks.append(Int32(key.baseAddress! - bytes.baseAddress!))
                kl.append(Int32(key.count))
                if isLeaf {
                    let value = try r.readLengthPrefixed()
                    vs.append(Int32(value.baseAddress! - bytes.baseAddress!))
                    vl.append(Int32(value.count))
                } else {
                    co.append(try r.readLittleEndian())
                    cr.append(try r.readVarint())
                    cs.append(try r.readVarint())
                    let reduction = try r.readLengthPrefixed()
                    vs.append(Int32(reduction.baseAddress! - bytes.baseAddress!))
                    vl.append(Int32(reduction.count))
                }
            }
            guard r.isAtEnd else { throw r.corruption("node has \(r.remaining) bytes after its last entry") }
            return n
        }
        count = n
        keyStart = ks; keyLength = kl; valueStart = vs; valueLength = vl
        childOffset = co; childRows = cr; childSize = cs
    }

    /// Approximate memory held, for the cache's budget.
    package var memoryCost: Int { (payload.isOwned ? payload.count : 0) + count * 40 + 128 }

    /// The key of entry `i`. Valid while this node lives.
    package func key(_ i: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: payload.base + Int(keyStart[i]), count: Int(keyLength[i]))
    }

    /// The value of leaf entry `i`, or the stored reduction of inner entry `i`.
    package func value(_ i: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: payload.base + Int(valueStart[i]), count: Int(valueLength[i]))
    }

    /// Inner nodes: the pointer to child `i`.
    package func child(_ i: Int) -> NodePointer {
        NodePointer(offset: childOffset[i], rowCount: childRows[i], subtreeSize: childSize[i],
                    reduction: Array(value(i)))
    }

    package func childOffset(_ i: Int) -> UInt64 { childOffset[i] }
    package func childRowCount(_ i: Int) -> UInt64 { childRows[i] }
    package func childSubtreeSize(_ i: Int) -> UInt64 { childSize[i] }

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
