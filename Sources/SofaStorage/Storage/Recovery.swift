/// Finding the newest valid commit when a file is opened (FORMAT.md, "Finding the newest commit").
///
/// The fast path reads the last 16 bytes: after a clean commit they are a trailer naming the header chunk
/// just before it. Only when they are not (a torn or abandoned tail after a crash, or a truncated file) does
/// it search backward for the newest trailer whose CRC, header chunk CRC and position all check out.
struct Recovery {
    let mapping: Mapping
    let fileSize: UInt64
    let path: String

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

    func newestCommit() throws -> Found {
        let kind = try checkFileHeader()
        guard fileSize >= Recovery.fileHeaderLength + UInt64(FileFormat.trailerSize) else {
            throw SofaError(.corruption, "the file ends before its first commit", path: path, offset: Int(clamping: fileSize))
        }
        let last = fileSize - UInt64(FileFormat.trailerSize)
        if let header = candidate(trailerAt: last) {
            return Found(header: header, fileKind: kind, foundAtEnd: true)
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

    private func checkFileHeader() throws -> UInt32 {
        guard fileSize >= Recovery.fileHeaderLength else {
            throw SofaError(.unsupportedFormat, "the file is too short to be a Sofa file (\(fileSize) bytes)",
                            path: path, offset: 0)
        }
        let all = bytes
        let prefix = try Chunk.check(UnsafeRawBufferPointer(rebasing: all[0..<Int(Recovery.fileHeaderLength)]),
                                     offset: 0, path: path, expecting: nil)
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

    /// The commit whose trailer starts at `t`, if everything about it checks out.
    private func candidate(trailerAt t: UInt64) -> CommitHeader? {
        let all = bytes
        let start = Int(t)
        guard start + FileFormat.trailerSize <= all.count else { return nil }
        // Cheap test first: the magic.
        let magic = UInt32(littleEndian: all.loadUnaligned(fromByteOffset: start + 8, as: UInt32.self))
        guard magic == FileFormat.trailerMagic,
              let h = CommitTrailer.decode(UnsafeRawBufferPointer(rebasing: all[start..<(start + 16)])),
              h >= Recovery.fileHeaderLength, h < t
        else { return nil }
        let chunk = UnsafeRawBufferPointer(rebasing: all[Int(h)..<start])
        guard let prefix = try? Chunk.check(chunk, offset: h, path: path, expecting: .commitHeader),
              !prefix.isCompressed, UInt64(prefix.totalLength) == t - h,
              var header = try? CommitHeader.decode(
                  UnsafeRawBufferPointer(rebasing: chunk[FileFormat.chunkPrefixSize...]), offset: h, path: path)
        else { return nil }
        header.endOffset = t + UInt64(FileFormat.trailerSize)
        return header
    }
}
