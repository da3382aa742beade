/// The on-disk constants of a Sofa file, line for line with FORMAT.md.
///
/// A file is a sequence of chunks appended one after another. It opens with a file-header chunk and every
/// commit ends with a commit-header chunk followed by a 16-byte commit trailer, so the newest commit is found
/// by reading the last 16 bytes of the file (FORMAT.md, "Finding the newest commit").
package enum FileFormat {
    /// The format version written into every new file's header (FORMAT.md §12).
    package static let version: UInt32 = 2

    /// The versions this build opens; a reader refuses the others.
    package static let readableVersions: ClosedRange<UInt32> = 1...2

    /// "SOFA" in ASCII, the first four payload bytes of the file-header chunk.
    package static let fileMagic: UInt32 = 0x4146_4F53  // bytes 53 4F 46 41 read little-endian

    /// "SFCT" in ASCII: bytes 8–11 of a commit trailer.
    package static let trailerMagic: UInt32 = 0x5443_4653  // bytes 53 46 43 54 read little-endian

    /// Bytes in front of every chunk's payload: CRC32C (4), stored length (4), raw length (4), kind (1),
    /// flags (1), reserved (2).
    package static let chunkPrefixSize = 16

    /// Bytes of the commit trailer: header chunk offset (8), magic (4), CRC32C of the first 12 bytes (4).
    package static let trailerSize = 16

    /// The largest payload a chunk may declare, stored or raw. Larger declared sizes are corruption.
    package static let maximumChunkSize = 1 << 30

    /// Chunk flag bit 0: the payload is LZ4 block-compressed and `rawLength` is its decompressed size.
    package static let flagLZ4: UInt8 = 0x01
}

/// What a chunk holds; byte 12 of the chunk prefix.
public enum ChunkKind: UInt8, Sendable, CaseIterable {
    /// The first chunk of every file: magic, format version, file kind.
    case fileHeader = 1
    /// A commit header: the roots and metadata of one commit.
    case commitHeader = 2
    /// A B+tree leaf node.
    case leaf = 3
    /// A B+tree inner node.
    case inner = 4
    /// A value stored outside the trees (a document body).
    case value = 5
}
