import CLZ4

/// Bytes read back from a chunk: a view of the mapped file, or a decompressed copy.
///
/// Invariant: `base ..< base + count` stays valid while this object lives, because it holds either the
/// ``Mapping`` it points into or the allocation it owns.
public final class ChunkPayload: @unchecked Sendable {
    package let base: UnsafeRawPointer
    package let count: Int
    /// The chunk's offset in its file, for error messages.
    public let offset: UInt64
    /// What the chunk holds.
    public let kind: ChunkKind
    /// Bytes the chunk takes in the file, prefix included.
    public let fileLength: Int
    private let mapping: Mapping?
    private let owned: UnsafeMutableRawPointer?

    init(mapping: Mapping, base: UnsafeRawPointer, count: Int, offset: UInt64, kind: ChunkKind, fileLength: Int) {
        self.base = base
        self.count = count
        self.offset = offset
        self.kind = kind
        self.fileLength = fileLength
        self.mapping = mapping
        self.owned = nil
    }

    init(taking allocation: UnsafeMutableRawPointer, count: Int, offset: UInt64, kind: ChunkKind, fileLength: Int) {
        self.base = UnsafeRawPointer(allocation)
        self.count = count
        self.offset = offset
        self.kind = kind
        self.fileLength = fileLength
        self.mapping = nil
        self.owned = allocation
    }

    deinit { owned?.deallocate() }

    /// Calls `body` with the payload bytes; the pointer must not escape the closure.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    /// The payload as an array.
    public var bytes: [UInt8] { withUnsafeBytes { Array($0) } }

    /// True when the bytes were decompressed into memory of their own (not a view of the mapping).
    package var isOwned: Bool { owned != nil }
}

/// Chunk framing (FORMAT.md, "Chunks"): a 16-byte prefix, then the stored payload.
///
///     0   u32  CRC32C of bytes 4 ..< 16 + storedLength
///     4   u32  storedLength
///     8   u32  rawLength (payload size after decompression; equals storedLength when not compressed)
///     12  u8   kind (ChunkKind)
///     13  u8   flags (bit 0: LZ4)
///     14  u16  reserved, 0
///     16  storedLength bytes of payload
package enum Chunk {
    /// Payloads smaller than this are never compressed: LZ4 cannot win much and costs a copy on read.
    package static let minimumCompressibleSize = 64

    /// Appends one framed chunk to `buffer` and returns its length in bytes.
    ///
    /// With a `compressor`, the payload is stored LZ4-compressed when that saves at least 1/16 of its size.
    package static func append(
        kind: ChunkKind, payload: UnsafeRawBufferPointer, compressor: Compressor?, to buffer: inout [UInt8]
    ) -> Int {
        precondition(payload.count <= FileFormat.maximumChunkSize, "chunk payload too large")
        let start = buffer.count
        var flags: UInt8 = 0
        var stored = payload.count
        buffer.append(contentsOf: repeatElement(0, count: FileFormat.chunkPrefixSize))
        if let compressor, payload.count >= minimumCompressibleSize,
           let compressed = compressor.compress(payload), compressed.count <= payload.count - payload.count / 16 {
            flags = FileFormat.flagLZ4
            stored = compressed.count
            buffer.append(contentsOf: compressed)
        }
        if flags == 0 { buffer.append(contentsOf: payload) }
        buffer.withUnsafeMutableBytes { out in
            let p = out.baseAddress! + start
            p.storeBytes(of: UInt32(stored).littleEndian, toByteOffset: 4, as: UInt32.self)
            p.storeBytes(of: UInt32(payload.count).littleEndian, toByteOffset: 8, as: UInt32.self)
            p.storeBytes(of: kind.rawValue, toByteOffset: 12, as: UInt8.self)
            p.storeBytes(of: flags, toByteOffset: 13, as: UInt8.self)
            p.storeBytes(of: UInt16(0), toByteOffset: 14, as: UInt16.self)
            let covered = UnsafeRawBufferPointer(start: p + 4, count: FileFormat.chunkPrefixSize - 4 + stored)
            let crc = CRC32C.checksum(covered)
            p.storeBytes(of: crc.littleEndian, toByteOffset: 0, as: UInt32.self)
        }
        return buffer.count - start
    }

    /// Appends one uncompressed chunk (file and commit headers).
    package static func appendUncompressed(kind: ChunkKind, payload: UnsafeRawBufferPointer,
                                           to buffer: inout [UInt8]) -> Int {
        append(kind: kind, payload: payload, compressor: nil, to: &buffer)
    }

    /// The decoded prefix of a chunk.
    package struct Prefix {
        package var storedLength: Int
        package var rawLength: Int
        package var kind: ChunkKind
        package var isCompressed: Bool
        package var totalLength: Int { FileFormat.chunkPrefixSize + storedLength }
    }

    /// Checks the chunk that starts at `bytes[0]` (which may run past the chunk's end) and returns its prefix.
    /// The CRC is verified before anything else trusts the payload.
    ///
    /// - Throws: ``SofaError/Code/corruption`` naming `path` and `offset` when the chunk is truncated, fails
    ///   its checksum, or declares an impossible size, kind or flag.
    package static func check(
        _ bytes: UnsafeRawBufferPointer, offset: UInt64, path: String, expecting kind: ChunkKind?
    ) throws -> Prefix {
        func corrupt(_ what: String) -> SofaError {
            SofaError(.corruption, "chunk \(what)", path: path, offset: Int(clamping: offset))
        }
        guard bytes.count >= FileFormat.chunkPrefixSize else { throw corrupt("prefix runs past the end of data") }
        let crc = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 0, as: UInt32.self))
        let stored = Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 4, as: UInt32.self)))
        let raw = Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 8, as: UInt32.self)))
        guard stored <= FileFormat.maximumChunkSize, stored <= bytes.count - FileFormat.chunkPrefixSize else {
            throw corrupt("declares \(stored) stored bytes, more than the file holds")
        }
        let covered = UnsafeRawBufferPointer(rebasing: bytes[4..<(FileFormat.chunkPrefixSize + stored)])
        guard CRC32C.checksum(covered) == crc else { throw corrupt("fails its CRC32C checksum") }
        guard let k = ChunkKind(rawValue: bytes[12]) else { throw corrupt("has unknown kind \(bytes[12])") }
        if let kind, k != kind { throw corrupt("is a \(k) chunk where a \(kind) chunk was expected") }
        let flags = bytes[13]
        guard flags & ~FileFormat.flagLZ4 == 0 else { throw corrupt("has unknown flags \(flags)") }
        let compressed = flags & FileFormat.flagLZ4 != 0
        guard raw <= FileFormat.maximumChunkSize, compressed || raw == stored else {
            throw corrupt("declares raw length \(raw) for \(stored) stored bytes")
        }
        return Prefix(storedLength: stored, rawLength: raw, kind: k, isCompressed: compressed)
    }

    /// Decompresses an LZ4 payload into a new allocation of exactly `rawLength` bytes.
    package static func decompress(
        _ stored: UnsafeRawBufferPointer, rawLength: Int, offset: UInt64, kind: ChunkKind, path: String
    ) throws -> ChunkPayload {
        let out = UnsafeMutableRawPointer.allocate(byteCount: max(rawLength, 1), alignment: 8)
        let n = LZ4_decompress_safe(
            stored.baseAddress!.assumingMemoryBound(to: CChar.self), out.assumingMemoryBound(to: CChar.self),
            Int32(stored.count), Int32(rawLength))
        guard n == Int32(rawLength) else {
            out.deallocate()
            throw SofaError(.corruption, "chunk does not decompress to its declared \(rawLength) bytes",
                            path: path, offset: Int(clamping: offset))
        }
        return ChunkPayload(taking: out, count: rawLength, offset: offset, kind: kind,
                            fileLength: FileFormat.chunkPrefixSize + stored.count)
    }
}

/// An LZ4 block compressor that reuses its state and output buffer between chunks.
///
/// `LZ4_compress_default` clears a 16 KiB state on every call, which costs more than compressing a 4 KiB node;
/// resetting a kept stream with `LZ4_resetStream_fast` and compressing with `LZ4_compress_fast_continue`
/// produces the same independent blocks (the stream holds no dictionary after the reset) without that cost.
/// Not thread-safe: one per writer.
package final class Compressor {
    private let stream: UnsafeMutablePointer<LZ4_stream_t>
    private var output: UnsafeMutableRawBufferPointer
    /// LZ4's acceleration: 1 compresses best; higher values trade ratio for speed.
    package let acceleration: Int32

    /// A compressor at `acceleration` (values below 1 count as 1).
    package init(acceleration: Int32 = 1) {
        stream = LZ4_createStream()
        output = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 16)
        self.acceleration = max(1, acceleration)
    }

    deinit {
        LZ4_freeStream(stream)
        output.deallocate()
    }

    /// The compressed bytes of `payload` (valid until the next call), or `nil` if LZ4 failed.
    package func compress(_ payload: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        let bound = Int(LZ4_compressBound(Int32(payload.count)))
        if output.count < bound {
            output.deallocate()
            output = UnsafeMutableRawBufferPointer.allocate(byteCount: bound, alignment: 16)
        }
        LZ4_resetStream_fast(stream)
        let n = LZ4_compress_fast_continue(
            stream, payload.baseAddress!.assumingMemoryBound(to: CChar.self),
            output.baseAddress!.assumingMemoryBound(to: CChar.self), Int32(payload.count), Int32(bound),
            acceleration)
        return n > 0 ? UnsafeRawBufferPointer(rebasing: output[0..<Int(n)]) : nil
    }
}

/// A growable buffer reused instead of a fresh allocation per use: for the payloads a thread decompresses
/// (``StorageFile/unsafeChunkBytes(at:ifKind:limit:mapping:scratch:)``; a view update's thousands of one-shot leaf
/// reads cost no `malloc`/`free` each), and for the leaves a tree appender writes (``NodeWriter``). Not
/// thread-safe: one owner at a time.
final class ScratchBuffer {
    private var memory: UnsafeMutableRawPointer?
    private var capacity = 0

    init() {}

    deinit { memory?.deallocate() }

    /// At least `count` bytes, valid until the next call; the contents are not kept.
    func reserve(_ count: Int) -> UnsafeMutableRawPointer {
        if let memory, capacity >= count { return memory }
        memory?.deallocate()
        capacity = max(count, 1, capacity * 2)
        let fresh = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16)
        memory = fresh
        return fresh
    }
}
