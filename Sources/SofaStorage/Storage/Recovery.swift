/// Finding the newest valid commit when a file is opened (FORMAT.md, "Finding the newest commit").
///
/// The fast path reads the last 16 bytes: after a clean commit they are a trailer naming the header chunk
/// just before it, or zeros of a preallocated tail, looked back through to the last non-zero byte. Only when
/// neither finds a valid commit (a torn or abandoned tail after a crash, or a truncated file) does it search
/// backward for the newest trailer whose CRC, header chunk CRC, position and data check all check out.
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
        /// The file's format version (1 or 2).
        var formatVersion: UInt32
        /// False when the fast path failed and the file was searched.
        var foundAtEnd: Bool
        /// True when every byte after the newest commit is zero: a clean zero tail a writer keeps.
        var cleanTail: Bool
    }

    /// Bytes of the file header chunk: prefix + magic, version, kind, reserved, creation time.
    static let fileHeaderLength = UInt64(FileFormat.chunkPrefixSize + 24)

    /// Bytes read per `pread` while looking back through a zero tail for the newest commit.
    static let zeroTailBlock = 64 << 10

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
        let (kind, version) = try read(0, Int(Recovery.fileHeaderLength)).withUnsafeBytes { try checkFileHeader($0) }
        guard fileSize >= Recovery.fileHeaderLength + UInt64(FileFormat.trailerSize) else {
            throw SofaError(.corruption, "the file ends before its first commit", path: path,
                            offset: Int(clamping: fileSize))
        }
        let last = fileSize - UInt64(FileFormat.trailerSize)
        let trailer = try read(last, FileFormat.trailerSize)
        if trailer.allSatisfy({ $0 == 0 }) {
            // A zero tail (FORMAT.md §6): the newest commit's trailer ends 1 to 5 bytes after the last
            // non-zero byte, since its magic bytes are never zero.
            if let p = try lastNonZeroByte(before: last) {
                for end in (p + 1)...(p + 5) where end <= fileSize && end >= UInt64(FileFormat.trailerSize) {
                    if let header = try candidateByReading(trailerAt: end - UInt64(FileFormat.trailerSize),
                                                           version: version) {
                        return Found(header: header, fileKind: kind, formatVersion: version, foundAtEnd: true,
                                     cleanTail: true)
                    }
                }
            }
        } else if let header = try candidateByReading(trailerAt: last, version: version, trailer: trailer) {
            return Found(header: header, fileKind: kind, formatVersion: version, foundAtEnd: true, cleanTail: true)
        }
        var t = last
        while t > Recovery.fileHeaderLength {
            t -= 1
            if let header = candidate(in: bytes, base: 0, trailerAt: t, version: version),
               isComplete(header, in: bytes, base: 0) {
                return Found(header: header, fileKind: kind, formatVersion: version, foundAtEnd: false,
                             cleanTail: header.endOffset == fileSize)
            }
        }
        throw SofaError(.corruption, "no valid commit found in the file", path: path, offset: 0)
    }

    /// The offset of the last non-zero byte before `end`, looking back at most one preallocation step plus a
    /// block (a zero tail is never longer); `nil` when there is none that close.
    private func lastNonZeroByte(before end: UInt64) throws -> UInt64? {
        let floor = max(Recovery.fileHeaderLength, end > UInt64(StorageFile.preallocationStep + Recovery.zeroTailBlock)
                        ? end - UInt64(StorageFile.preallocationStep + Recovery.zeroTailBlock) : 0)
        var blockEnd = end
        while blockEnd > floor {
            let blockStart = max(floor, blockEnd - min(blockEnd, UInt64(Recovery.zeroTailBlock)))
            let block = try read(blockStart, Int(blockEnd - blockStart))
            if let i = block.lastIndex(where: { $0 != 0 }) { return blockStart + UInt64(i) }
            blockEnd = blockStart
        }
        return nil
    }

    /// The valid commit whose trailer starts at `t`, checked from bytes read with `pread`: the trailer, its
    /// header chunk and, for a one-sync commit, the data its check covers.
    private func candidateByReading(trailerAt t: UInt64, version: UInt32, trailer known: [UInt8]? = nil) throws
        -> CommitHeader? {
        let trailer = try known ?? read(t, FileFormat.trailerSize)
        guard let h = trailer.withUnsafeBytes({ CommitTrailer.decode($0) }), h >= Recovery.fileHeaderLength,
              h < t, t - h <= UInt64(FileFormat.maximumChunkSize)
        else { return nil }
        let tail = try read(h, Int(t - h) + FileFormat.trailerSize)
        guard let header = tail.withUnsafeBytes({ candidate(in: $0, base: h, trailerAt: t, version: version) })
        else { return nil }
        guard let check = header.dataCheck else { return header }
        guard h - check.start <= UInt64(FileFormat.maximumChunkSize) else { return nil }
        let data = try read(check.start, Int(h - check.start))
        return data.withUnsafeBytes { isComplete(data: $0, start: check.start, crc: check.crc) } ? header : nil
    }

    /// True unless `header` is a one-sync commit whose data, in `all` (the file from `base` on), looks torn.
    private func isComplete(_ header: CommitHeader, in all: UnsafeRawBufferPointer, base: UInt64) -> Bool {
        guard let check = header.dataCheck else { return true }
        guard check.start >= base, header.offset <= base + UInt64(all.count) else { return false }
        let data = UnsafeRawBufferPointer(rebasing: all[Int(check.start - base)..<Int(header.offset - base)])
        return isComplete(data: data, start: check.start, crc: check.crc)
    }

    /// The sector size the torn-write test assumes: the smallest unit a disk writes whole (FORMAT.md §6).
    static let sectorSize = 512

    /// Whether a one-sync commit's `data` (file offset `start`) is complete (FORMAT.md §6): its CRC matches,
    /// or it does not but no chunk that fails its own CRC holds an all-zero piece of a sector.
    ///
    /// A one-sync commit writes only where the file held zeros (its zero tail) or nothing (past its end), so a
    /// write lost to a power cut leaves every sector piece it did not reach reading as zeros, inside a chunk that
    /// then fails its CRC: such a commit never returned, and the previous one is the newest. Damage after the
    /// commit was written whole (a flipped bit) leaves no such piece: the commit stays the newest, and reading
    /// the damaged chunk reports a corruption error naming it, as anywhere else in the file.
    private func isComplete(data: UnsafeRawBufferPointer, start: UInt64, crc: UInt32) -> Bool {
        if CRC32C.checksum(data) == crc { return true }
        var at = 0
        while at < data.count {
            let rest = UnsafeRawBufferPointer(rebasing: data[at...])
            if let prefix = try? Chunk.check(rest, offset: start + UInt64(at), path: path, expecting: nil) {
                at += prefix.totalLength
                continue
            }
            // A failing chunk spans its declared length when that fits, else the rest of the data.
            var extent = rest.count
            if rest.count >= FileFormat.chunkPrefixSize {
                let stored = Int(UInt32(littleEndian: rest.loadUnaligned(fromByteOffset: 4, as: UInt32.self)))
                if stored <= rest.count - FileFormat.chunkPrefixSize { extent = FileFormat.chunkPrefixSize + stored }
            }
            if hasZeroSectorPiece(UnsafeRawBufferPointer(rebasing: rest[0..<extent]), start: start + UInt64(at)) {
                return false
            }
            at += extent
        }
        return true
    }

    /// True when some intersection of `bytes` (file offset `start`) with a sector is all zeros.
    private func hasZeroSectorPiece(_ bytes: UnsafeRawBufferPointer, start: UInt64) -> Bool {
        let sector = UInt64(Recovery.sectorSize)
        var at = 0
        while at < bytes.count {
            let offset = start + UInt64(at)
            let end = min(bytes.count, at + Int((offset / sector + 1) * sector - offset))
            if bytes[at..<end].allSatisfy({ $0 == 0 }) { return true }
            at = end
        }
        return false
    }

    /// The file kind and format version in a valid file header.
    private func checkFileHeader(_ all: UnsafeRawBufferPointer) throws -> (kind: UInt32, version: UInt32) {
        let prefix = try Chunk.check(all, offset: 0, path: path, expecting: nil)
        var r = ByteReader(UnsafeRawBufferPointer(rebasing: all[FileFormat.chunkPrefixSize..<prefix.totalLength]),
                           fileOffset: UInt64(FileFormat.chunkPrefixSize), path: path)
        let magic: UInt32 = try r.readLittleEndian()
        guard prefix.kind == .fileHeader, magic == FileFormat.fileMagic, !prefix.isCompressed,
              UInt64(prefix.totalLength) == Recovery.fileHeaderLength else {
            throw SofaError(.unsupportedFormat, "not a Sofa file (no SOFA file header)", path: path, offset: 0)
        }
        let version: UInt32 = try r.readLittleEndian()
        guard FileFormat.readableVersions.contains(version) else {
            throw SofaError(.unsupportedFormat,
                            "format version \(version); this build reads versions 1 to \(FileFormat.version)",
                            path: path, offset: 20)
        }
        return (try r.readLittleEndian(), version)
    }

    /// The commit whose trailer starts at `t`, if its trailer and header chunk check out, from `all`, which
    /// holds the file's bytes from offset `base` on. Its data check is not verified here.
    private func candidate(in all: UnsafeRawBufferPointer, base: UInt64, trailerAt t: UInt64,
                           version: UInt32) -> CommitHeader? {
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
                  UnsafeRawBufferPointer(rebasing: chunk[FileFormat.chunkPrefixSize...]), offset: h, path: path,
                  version: version)
        else { return nil }
        header.endOffset = t + UInt64(FileFormat.trailerSize)
        return header
    }
}
