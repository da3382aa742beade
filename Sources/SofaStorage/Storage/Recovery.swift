/// Finding the newest valid commit when a file is opened (FORMAT.md, "Finding the newest commit").
///
/// The fast path reads the last 16 bytes: after a clean commit they are a trailer naming the header chunk
/// just before it. Only when they are not (a torn or abandoned tail after a crash, or a truncated file) does
/// it search backward for the newest trailer whose CRC, header chunk CRC and position all check out.
///
/// The fast path reads with `pread` (through the syscall seam), not through the mapping: a page fault on a
/// cold mapping makes the kernel read ahead megabytes, which would turn a 100-byte open into milliseconds.
struct Recovery {
    let mapping: Mapping
    let fileSize: UInt64
    let path: String
    let fd: Int32
    let system: any SystemCalls

    struct Found {
        var header: CommitHeader
        var fileKind: UInt32
        /// False when the fast path failed and the file was searched.
        var foundAtEnd: Bool
    }

    /// Bytes of the file header chunk: prefix + magic, version, kind, reserved, creation time.
    static let fileHeaderLength = UInt64(FileFormat.chunkPrefixSize + 24)

    private var bytes: UnsafeRawBufferPointer {
        // The mapping covers at least `fileSize` bytes (it was made for this size), all backed by the file.
        UnsafeRawBufferPointer(start: mapping.base, count: Int(min(fileSize, UInt64(mapping.length))))
    }

    /// `count` bytes at `offset`, read with `pread`.
    private func read(_ offset: UInt64, _ count: Int) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        do {
            try out.withUnsafeMutableBytes { b in try system.preadAll(fd, b, at: Int64(offset)) }
        } catch {
            throw StorageFile.error(error, path: path)
        }
        return out
    }

    func newestCommit() throws -> Found {
        guard fileSize >= Recovery.fileHeaderLength else {
            throw SofaError(.unsupportedFormat, "the file is too short to be a Sofa file (\(fileSize) bytes)",
                            path: path, offset: 0)
        }
        let kind = try read(0, Int(Recovery.fileHeaderLength)).withUnsafeBytes { try checkFileHeader($0) }
        guard fileSize >= Recovery.fileHeaderLength + UInt64(FileFormat.trailerSize) else {
            throw SofaError(.corruption, "the file ends before its first commit", path: path,
                            offset: Int(clamping: fileSize))
        }
        let last = fileSize - UInt64(FileFormat.trailerSize)
        let trailer = try read(last, FileFormat.trailerSize)
        if let h = trailer.withUnsafeBytes({ CommitTrailer.decode($0) }), h >= Recovery.fileHeaderLength, h < last,
           last - h <= UInt64(FileFormat.maximumChunkSize) {
            let tail = try read(h, Int(fileSize - h))
            if let header = tail.withUnsafeBytes({ candidate(in: $0, base: h, trailerAt: last) }) {
                return Found(header: header, fileKind: kind, foundAtEnd: true)
            }
        }
        var t = last
        while t > Recovery.fileHeaderLength {
            t -= 1
            if let header = candidate(trailerAt: t) {
                return Found(header: header, fileKind: kind, foundAtEnd: false)
            }
        }
        throw SofaError(.corruption, "no valid commit found in the file", path: path, offset: 0)
    }

    private func checkFileHeader(_ all: UnsafeRawBufferPointer) throws -> UInt32 {
        let prefix = try Chunk.check(all, offset: 0, path: path, expecting: nil)
        var r = ByteReader(UnsafeRawBufferPointer(rebasing: all[FileFormat.chunkPrefixSize..<prefix.totalLength]),
                           fileOffset: UInt64(FileFormat.chunkPrefixSize), path: path)
        let magic: UInt32 = try r.readLittleEndian()
        guard prefix.kind == .fileHeader, magic == FileFormat.fileMagic, !prefix.isCompressed,
              UInt64(prefix.totalLength) == Recovery.fileHeaderLength else {
            throw SofaError(.unsupportedFormat, "not a Sofa file (no SOFA file header)", path: path, offset: 0)
        }
        let version: UInt32 = try r.readLittleEndian()
        guard version == FileFormat.version else {
            throw SofaError(.unsupportedFormat,
                            "format version \(version); this build reads version \(FileFormat.version)",
                            path: path, offset: 20)
        }
        return try r.readLittleEndian()
    }

    /// The commit whose trailer starts at `t` in the mapped file, if everything about it checks out.
    private func candidate(trailerAt t: UInt64) -> CommitHeader? {
        candidate(in: bytes, base: 0, trailerAt: t)
    }

    /// The same check over `all`, which holds the file's bytes from offset `base` on.
    private func candidate(in all: UnsafeRawBufferPointer, base: UInt64, trailerAt t: UInt64) -> CommitHeader? {
        guard t >= base else { return nil }
        let start = Int(t - base)
        guard start + FileFormat.trailerSize <= all.count else { return nil }
        // Cheap test first: the magic.
        let magic = UInt32(littleEndian: all.loadUnaligned(fromByteOffset: start + 8, as: UInt32.self))
        guard magic == FileFormat.trailerMagic,
              let h = CommitTrailer.decode(UnsafeRawBufferPointer(rebasing: all[start..<(start + 16)])),
              h >= Recovery.fileHeaderLength, h >= base, h < t
        else { return nil }
        let chunk = UnsafeRawBufferPointer(rebasing: all[Int(h - base)..<start])
        guard let prefix = try? Chunk.check(chunk, offset: h, path: path, expecting: .commitHeader),
              !prefix.isCompressed, UInt64(prefix.totalLength) == t - h,
              var header = try? CommitHeader.decode(
                  UnsafeRawBufferPointer(rebasing: chunk[FileFormat.chunkPrefixSize...]), offset: h, path: path)
        else { return nil }
        header.endOffset = t + UInt64(FileFormat.trailerSize)
        return header
    }
}
