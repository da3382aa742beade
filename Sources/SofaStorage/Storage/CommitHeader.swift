#if canImport(Glibc)
import Glibc
#endif

/// Where a B+tree node is, and what its subtree holds: the unit of copy-on-write.
///
/// Inner nodes store one pointer per child and commit headers store one per tree root, so a subtree's row
/// count and reduction are known without reading it (DESIGN.md §4). FORMAT.md, "Node pointers":
///
///     u64     offset of the node's chunk
///     varint  rowCount       rows in the subtree
///     varint  subtreeSize    bytes of every chunk in the subtree (live-data accounting)
///     varint  reduction length, then the reduction bytes
public struct NodePointer: Sendable, Hashable {
    /// File offset of the node's chunk.
    public var offset: UInt64
    /// Rows (leaf entries) in the subtree.
    public var rowCount: UInt64
    /// Bytes of all chunks in the subtree, prefixes included.
    public var subtreeSize: UInt64
    /// The subtree's reduction, as the tree's ``Reducer`` produced it; empty when the tree has no reducer.
    public var reduction: [UInt8]

    /// A pointer with all its fields.
    public init(offset: UInt64, rowCount: UInt64, subtreeSize: UInt64, reduction: [UInt8]) {
        self.offset = offset
        self.rowCount = rowCount
        self.subtreeSize = subtreeSize
        self.reduction = reduction
    }

    package func encode(into buffer: inout [UInt8]) {
        buffer.appendLittleEndian(offset)
        buffer.appendVarint(rowCount)
        buffer.appendVarint(subtreeSize)
        buffer.appendVarint(UInt64(reduction.count))
        buffer.append(contentsOf: reduction)
    }

    package var encodedSize: Int {
        8 + varintSize(rowCount) + varintSize(subtreeSize) + varintSize(UInt64(reduction.count)) + reduction.count
    }

    package static func decode(_ reader: inout ByteReader) throws -> NodePointer {
        let offset: UInt64 = try reader.readLittleEndian()
        let rows = try reader.readVarint()
        let size = try reader.readVarint()
        let reduction = try reader.readLengthPrefixed()
        return NodePointer(offset: offset, rowCount: rows, subtreeSize: size, reduction: Array(reduction))
    }
}

/// One commit: the roots of the file's trees and the owner's metadata, as of that commit.
///
/// A reader that holds a header holds a snapshot: every node reachable from its roots is immutable, because
/// nothing reachable from a commit is ever overwritten (RELIABILITY.md, contract 4). FORMAT.md, "Commit header":
///
///     u64     commitNumber           1 for the file's first commit, then +1 per commit
///     u64     previousHeaderOffset   the previous commit header's chunk offset; 0 for the first
///     u64     timestamp              milliseconds since 1970 (informational)
///     u8      root count, then per root: u8 0 (empty tree) or 1 followed by a node pointer
///     varint  metadata length, then the metadata bytes (the file owner's; opaque to storage)
///     u8      version 2 only: data check 0 (none) or 1, then u64 data start and u32 CRC32C of the data
public struct CommitHeader: Sendable, Equatable {
    /// 1 for the file's first commit, then one more per commit.
    public var commitNumber: UInt64
    /// Offset of the previous commit's header chunk, 0 for the first commit.
    public var previousHeaderOffset: UInt64
    /// Milliseconds since 1970 when the commit was written.
    public var timestamp: UInt64
    /// The root of each tree in the file; `nil` for an empty tree.
    public var roots: [NodePointer?]
    /// Bytes the file's owner keeps with each commit (last sequence, view definition…).
    public var metadata: [UInt8]
    /// For a one-sync commit, where its data starts and the CRC32C of that data; `nil` when the data was
    /// synced before the header (FORMAT.md §5, §11).
    public var dataCheck: DataCheck?
    /// Offset of this header's chunk.
    public package(set) var offset: UInt64 = 0
    /// The file length this commit covers: just past its trailer. Reads of this snapshot stay below it.
    public package(set) var endOffset: UInt64 = 0

    /// The most roots one header can hold.
    public static let maximumRoots = 255

    package init(commitNumber: UInt64, previousHeaderOffset: UInt64, timestamp: UInt64,
                 roots: [NodePointer?], metadata: [UInt8], dataCheck: DataCheck? = nil) {
        self.commitNumber = commitNumber
        self.previousHeaderOffset = previousHeaderOffset
        self.timestamp = timestamp
        self.roots = roots
        self.metadata = metadata
        self.dataCheck = dataCheck
    }

    /// The payload as format `version` lays it out; version 1 has no data check, so it must be `nil`.
    package func encodePayload(version: UInt32) -> [UInt8] {
        precondition(version >= 2 || dataCheck == nil, "a version 1 header has no data check")
        var out: [UInt8] = []
        out.reserveCapacity(64 + metadata.count + roots.count * 32)
        out.appendLittleEndian(commitNumber)
        out.appendLittleEndian(previousHeaderOffset)
        out.appendLittleEndian(timestamp)
        out.append(UInt8(roots.count))
        for root in roots {
            if let root {
                out.append(1)
                root.encode(into: &out)
            } else {
                out.append(0)
            }
        }
        out.appendVarint(UInt64(metadata.count))
        out.append(contentsOf: metadata)
        if version >= 2 {
            if let dataCheck {
                out.append(1)
                out.appendLittleEndian(dataCheck.start)
                out.appendLittleEndian(dataCheck.crc)
            } else {
                out.append(0)
            }
        }
        return out
    }

    /// Decodes the payload of the header chunk at `offset` in a file of format `version`.
    package static func decode(_ payload: UnsafeRawBufferPointer, offset: UInt64, path: String,
                               version: UInt32) throws -> CommitHeader {
        var r = ByteReader(payload, fileOffset: offset + UInt64(FileFormat.chunkPrefixSize), path: path)
        let number: UInt64 = try r.readLittleEndian()
        let previous: UInt64 = try r.readLittleEndian()
        let time: UInt64 = try r.readLittleEndian()
        let rootCount = Int(try r.readByte())
        var roots: [NodePointer?] = []
        for _ in 0..<rootCount {
            switch try r.readByte() {
            case 0: roots.append(nil)
            case 1: roots.append(try NodePointer.decode(&r))
            case let b: throw r.corruption("root flag \(b) is neither 0 nor 1")
            }
        }
        let metadata = Array(try r.readLengthPrefixed())
        var check: DataCheck?
        if version >= 2 {
            switch try r.readByte() {
            case 0: break
            case 1:
                check = DataCheck(start: try r.readLittleEndian(), crc: try r.readLittleEndian())
                guard let start = check?.start, start <= offset else {
                    throw r.corruption("data check starts past its own header")
                }
            case let b: throw r.corruption("data check flag \(b) is neither 0 nor 1")
            }
        }
        guard r.isAtEnd else { throw r.corruption("commit header has \(r.remaining) trailing bytes") }
        var header = CommitHeader(commitNumber: number, previousHeaderOffset: previous, timestamp: time,
                                  roots: roots, metadata: metadata, dataCheck: check)
        header.offset = offset
        return header
    }

    /// Milliseconds since 1970, now.
    static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return UInt64(ts.tv_sec) * 1000 + UInt64(ts.tv_nsec) / 1_000_000
    }
}

/// What a one-sync commit's header records about the commit's data (FORMAT.md §5): the bytes
/// [``start``, header offset) are every chunk the commit wrote, and their CRC32C is ``crc``. Opening accepts
/// such a header as the newest commit only when that CRC still matches (FORMAT.md §6, §11).
public struct DataCheck: Sendable, Equatable {
    /// Offset of the commit's first data byte: the previous commit's end offset.
    public var start: UInt64
    /// CRC32C of the file's bytes from ``start`` to the header chunk.
    public var crc: UInt32

    /// A check of the data from `start` with checksum `crc`.
    public init(start: UInt64, crc: UInt32) {
        self.start = start
        self.crc = crc
    }
}

/// The 16 bytes after every commit header chunk (FORMAT.md, "Commit trailer"):
///
///     u64  offset of the commit header chunk
///     u32  magic "SFCT"
///     u32  CRC32C of the first 12 bytes
package enum CommitTrailer {
    package static func encode(headerOffset: UInt64, into buffer: inout [UInt8]) {
        let start = buffer.count
        buffer.appendLittleEndian(headerOffset)
        buffer.appendLittleEndian(FileFormat.trailerMagic)
        let crc = buffer.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[start..<(start + 12)])) }
        buffer.appendLittleEndian(crc)
    }

    /// The header offset a well-formed trailer at `bytes[0 ..< 16]` names, else `nil`.
    package static func decode(_ bytes: UnsafeRawBufferPointer) -> UInt64? {
        guard bytes.count >= FileFormat.trailerSize else { return nil }
        let magic = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 8, as: UInt32.self))
        guard magic == FileFormat.trailerMagic else { return nil }
        let crc = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 12, as: UInt32.self))
        guard CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[0..<12])) == crc else { return nil }
        return UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: 0, as: UInt64.self))
    }
}
