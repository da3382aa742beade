/// Reading older commits: `sofa dump --headers` walks ``CommitHeader/previousHeaderOffset`` from the newest.
extension StorageFile {
    /// Bytes of the file header chunk at offset 0 (live in every file; `sofa info` counts it).
    package static var fileHeaderLength: UInt64 { Recovery.fileHeaderLength }

    /// The commit header whose chunk starts at `offset`, read and checked like any chunk (CRC, bounds).
    ///
    /// Only the header chunk itself is checked; its trailer and trees are not read. The header's
    /// ``CommitHeader/endOffset`` is set to just past the trailer that follows it.
    ///
    /// - Throws: `.corruption` naming the file and offset when the chunk is not a valid commit header.
    package func commitHeader(at offset: UInt64) throws -> CommitHeader {
        let chunk = try readChunk(at: offset, kind: .commitHeader, limit: latestCommit.endOffset)
        var header = try chunk.withUnsafeBytes {
            try CommitHeader.decode($0, offset: offset, path: path, version: formatVersion)
        }
        header.endOffset = offset + UInt64(chunk.fileLength) + UInt64(FileFormat.trailerSize)
        return header
    }

    /// The newest commit and its predecessors, newest first, at most `limit` of them, following
    /// ``CommitHeader/previousHeaderOffset`` back to the first commit.
    ///
    /// - Throws: `.corruption` when a header in the chain does not read, or the chain does not move backward.
    package func commitHistory(limit: Int? = nil) throws -> [CommitHeader] {
        var out: [CommitHeader] = [latestCommit]
        while let last = out.last, last.previousHeaderOffset != 0, limit.map({ out.count < $0 }) ?? true {
            guard last.previousHeaderOffset < last.offset else {
                throw SofaError(.corruption, "commit \(last.commitNumber) names a previous header at " +
                                "\(last.previousHeaderOffset), not before itself", path: path, offset: Int(last.offset))
            }
            out.append(try commitHeader(at: last.previousHeaderOffset))
        }
        return out
    }
}
