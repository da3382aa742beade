#if canImport(Glibc)
import Glibc
#endif

/// Entry points for the libFuzzer targets of the `Fuzz/` package and for the test that replays their fixtures
/// (`FuzzFixtureReplayTests`): each takes arbitrary bytes and must return or throw a ``SofaError``, never trap.
///
/// They are `@_spi(Fuzzing) public` rather than `package` because the fuzz targets live in a package of their
/// own (a libFuzzer binary has no `main`, so it cannot be a product of the root package without breaking a
/// plain `swift build`); the SPI keeps them out of the API that `import SofaStorage` shows.
@_spi(Fuzzing) public enum StorageFuzzing {
    /// One libFuzzer input through `target`: libFuzzer's `(data, size)` as bytes; a ``SofaError`` is an expected
    /// outcome (the bytes were bad and were rejected cleanly), anything else — a trap, an ASan report, a
    /// non-Sofa error — is a finding (`fatalError`). Every fuzz target's `LLVMFuzzerTestOneInput` calls it.
    ///
    /// - Returns: 0, what libFuzzer expects of an input that was run.
    public static func runInput(_ data: UnsafePointer<UInt8>?, _ size: Int,
                                through target: ([UInt8]) throws -> Void) -> Int32 {
        let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
        do {
            try target(bytes)
        } catch is SofaError {
            // Rejected with a typed error: the contract holds.
        } catch {
            fatalError("non-Sofa error: \(error)")
        }
        return 0
    }

    /// Target (a): writes `bytes` as a file in `directory`, opens it read-only, verifies every tree of the
    /// newest commit and reads every row of each, then removes the file.
    ///
    /// - Returns: the number of rows read (so the work cannot be optimized away).
    /// - Throws: ``SofaError`` when the bytes are not a readable Sofa file.
    public static func openAndVerify(_ bytes: [UInt8], directory: String) throws -> Int {
        let path = directory + "/fuzz-\(getpid())-\(UInt(bitPattern: Int(bitPattern: pthread_self()))).sofa"
        try write(bytes, to: path)
        defer { unlink(path) }
        let file = try StorageFile(path: path, options: StorageOptions(readOnly: true, nodeCacheBytes: 1 << 20))
        defer { try? file.close() }
        let commit = file.latestCommit
        var rows = 0
        for index in commit.roots.indices {
            // Views bring their own reducers; the engine's sum reducer exercises the reduction checks anyway
            // (a reduction it did not write is reported as a problem, not trusted).
            for reducer in [nil, Int64SumReducer()] as [(any Reducer)?] {
                let tree = BTree(file: file, commit: commit, index: index,
                                 configuration: BTreeConfiguration(reducer: reducer))
                rows += tree.verify().problems.count
            }
            let tree = BTree(file: file, commit: commit, index: index, configuration: BTreeConfiguration())
            for descending in [false, true] {
                try tree.forEach(in: .all, descending: descending) { key, value in
                    rows += key.count &+ value.count
                    return true
                }
            }
            _ = try tree.get([0x61])
        }
        return rows
    }

    /// `bytes` with the CRC32C of every chunk and commit trailer recomputed, walking chunks from offset 0 by
    /// their declared lengths (until one runs past the end).
    ///
    /// The file target opens both the input and this repaired copy: a mutation almost never keeps its chunk's
    /// checksum right, so without the repair the fuzzer would stop at the CRC check and never reach the node,
    /// header and document decoders behind it — the parsers that must survive bytes which pass their CRC.
    public static func repairingChecksums(_ bytes: [UInt8]) -> [UInt8] {
        var out = bytes
        var offset = 0
        out.withUnsafeMutableBytes { all in
            func u32(_ at: Int) -> UInt32 {
                UInt32(littleEndian: all.loadUnaligned(fromByteOffset: at, as: UInt32.self))
            }
            func setCRC(at: Int, over range: Range<Int>) {
                let crc = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: all[range]))
                all.storeBytes(of: crc.littleEndian, toByteOffset: at, as: UInt32.self)
            }
            while offset + FileFormat.chunkPrefixSize <= all.count {
                if u32(offset + 8) == FileFormat.trailerMagic {
                    setCRC(at: offset + 12, over: offset..<(offset + 12))
                    offset += FileFormat.trailerSize
                    continue
                }
                let stored = Int(u32(offset + 4))
                guard stored <= all.count - offset - FileFormat.chunkPrefixSize else { break }
                let end = offset + FileFormat.chunkPrefixSize + stored
                setCRC(at: offset, over: (offset + 4)..<end)
                offset = end
            }
        }
        return out
    }

    /// Target (b): decodes `bytes` as a chunk or a node payload. The first byte picks the path, so one corpus
    /// covers them all:
    ///
    /// - 0: the rest is a node payload, decoded as a leaf and as an inner node (no CRC in the way);
    /// - 1: the rest is a whole chunk, checked (CRC first) and decompressed, then decoded as a node;
    /// - 2: as 1, but the CRC is recomputed first so that the prefix checks and LZ4 are reached.
    ///
    /// - Returns: the number of entries decoded.
    /// - Throws: ``SofaError`` (`.corruption`) when the bytes do not decode.
    public static func decodeChunk(_ bytes: [UInt8]) throws -> Int {
        guard let mode = bytes.first else { return 0 }
        var rest = Array(bytes.dropFirst())
        switch mode % 3 {
        case 0:
            return try decodeNodes(payload: rest, offset: 0)
        case 2 where rest.count >= FileFormat.chunkPrefixSize:
            let stored = Int(UInt32(littleEndian: rest.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 4,
                                                                                          as: UInt32.self) }))
            let end = FileFormat.chunkPrefixSize + min(stored, rest.count - FileFormat.chunkPrefixSize)
            let crc = rest.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[4..<end])) }
            withUnsafeBytes(of: crc.littleEndian) { rest.replaceSubrange(0..<4, with: $0) }
            fallthrough
        default:
            return try rest.withUnsafeBytes { all -> Int in
                let prefix = try Chunk.check(all, offset: 0, path: "fuzz", expecting: nil)
                let stored = UnsafeRawBufferPointer(rebasing: all[FileFormat.chunkPrefixSize..<prefix.totalLength])
                let payload = prefix.isCompressed
                    ? try Chunk.decompress(stored, rawLength: prefix.rawLength, offset: 0, kind: prefix.kind,
                                           path: "fuzz").bytes
                    : Array(stored)
                return try decodeNodes(payload: payload, offset: 0)
            }
        }
    }

    /// Decodes `payload` as a leaf and as an inner node and reads every field of each; the count of entries of
    /// the kinds that decoded.
    private static func decodeNodes(payload: [UInt8], offset: UInt64) throws -> Int {
        var decoded = 0
        var lastError: SofaError?
        for isLeaf in [true, false] {
            let copy = UnsafeMutableRawPointer.allocate(byteCount: max(payload.count, 1), alignment: 8)
            payload.withUnsafeBytes { source in
                if let base = source.baseAddress { copy.copyMemory(from: base, byteCount: source.count) }
            }
            let chunk = ChunkPayload(taking: copy, count: payload.count, offset: offset,
                                     kind: isLeaf ? .leaf : .inner, fileLength: payload.count)
            do {
                let node = try Node(payload: chunk, isLeaf: isLeaf, path: "fuzz")
                for i in 0..<node.count {
                    decoded &+= node.key(i).count &+ node.value(i).count
                    if !isLeaf { decoded &+= Int(truncatingIfNeeded: node.child(i).offset) & 1 }
                }
                _ = node.lowerBound(UnsafeRawBufferPointer(start: nil, count: 0))
            } catch let error as SofaError {
                lastError = error
            }
        }
        if decoded == 0, let lastError { throw lastError }
        return decoded
    }

    /// Writes `bytes` to a new file at `path`, replacing any file there.
    private static func write(_ bytes: [UInt8], to path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard fd >= 0 else { throw SofaError(.ioError, "cannot create the fuzz input file", path: path) }
        defer { Glibc.close(fd) }
        var written = 0
        while written < bytes.count {
            let n = bytes.withUnsafeBytes { all in
                pwrite(fd, all.baseAddress! + written, all.count - written, off_t(written))
            }
            guard n > 0 else { throw SofaError(.ioError, "cannot write the fuzz input file", path: path) }
            written += n
        }
    }
}
