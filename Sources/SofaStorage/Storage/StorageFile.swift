import CLZ4
import Dispatch
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// How much a commit waits for the disk.
public enum Durability: Sendable, Equatable {
    /// Every commit is durable when it returns: a small commit writes its data and a header that checks that
    /// data, then `fdatasync`s once; a large one `fdatasync`s its data, then writes and `fdatasync`s the header
    /// (FORMAT.md §11). Survives process crashes and power loss (ACID's D).
    case full
    /// No `fsync`. A commit survives a crash of the process (the OS still writes it out). A power loss or OS
    /// crash may lose the latest commits, and since the disk may write a header before the nodes it points to,
    /// the newest commit found afterwards may reference chunks that never arrived: reads of them fail with
    /// `.corruption` (never wrong data). A, C and I hold; D only against process crashes. For data that can be
    /// rebuilt: bulk loads redone from their source, tests.
    case none
}

/// How to open a ``StorageFile``.
public struct StorageOptions: Sendable {
    /// Open without the write lock; no byte of the file is changed and no file is created.
    public var readOnly: Bool
    /// When commits reach the disk.
    public var durability: Durability
    /// Create the file when it does not exist (ignored when read-only).
    public var create: Bool
    /// The owner's file kind, written at creation and checked on open; 0 accepts any.
    public var fileKind: UInt32
    /// Bytes of decoded nodes the file's cache may hold.
    public var nodeCacheBytes: Int
    /// The format version of a file this creates (FORMAT.md §12): 2, or 1 for files that builds reading only
    /// version 1 must open (two syncs per durable commit). An existing file keeps its own version.
    public var formatVersion: UInt32 = FileFormat.version
    /// LZ4's acceleration for the chunks this handle compresses, its appends and a batch modify's parallel leaf
    /// preparation (1, the default, compresses best; higher values trade ratio for speed; values below 1 count
    /// as 1). Only how new chunks are written: any file reads the same. Set by the document file (Sofa's
    /// `DocumentFile`, whose appends hold the bodies).
    package var compressionAcceleration: Int32 = 1

    /// Options with defaults: writable, ``Durability/full``, create when missing, any kind, 64 MiB cache.
    public init(readOnly: Bool = false, durability: Durability = .full, create: Bool = true,
                fileKind: UInt32 = 0, nodeCacheBytes: Int = 64 << 20) {
        self.readOnly = readOnly
        self.durability = durability
        self.create = create
        self.fileKind = fileKind
        self.nodeCacheBytes = nodeCacheBytes
    }
}

/// One append-only Sofa file: chunks in, chunks out, atomic commits (FORMAT.md).
///
/// One writer at a time appends and commits (the caller serializes its writes; across processes an advisory
/// lock keeps a second writer out). Any number of readers read committed chunks concurrently through a
/// shared read-only mapping and never wait for the writer. Invariant: bytes up to the newest commit's
/// ``CommitHeader/endOffset`` are never written again.
public final class StorageFile: @unchecked Sendable {
    /// The file's path.
    public let path: String
    /// The options it was opened with.
    public let options: StorageOptions
    /// The owner's file kind recorded at creation.
    public let fileKind: UInt32
    /// The file's format version (FORMAT.md §12): new files are version 2; a version 1 file gets version 1
    /// commits (two syncs each).
    public let formatVersion: UInt32
    /// Decoded nodes shared by every reader and the writer of this file.
    package let nodeCache: NodeCache
    package let system: any SystemCalls
    private let fd: Int32

    private struct Shared {
        /// `nil` once closed: the file's own reference goes, so the pages can leave memory once readers
        /// holding chunks let go too.
        var mapping: Mapping?
        var header: CommitHeader
        var closed = false
    }
    private let shared: Lock<Shared>
    /// Bytes written to the file so far (committed or not); reads below it go through the mapping. A buffer being
    /// written in the background (``backgroundWrite``) is counted once its write has returned and the writer has
    /// waited for it.
    private let flushedEnd: Atomic<UInt64>
    /// True once closed (as `Shared.closed`), for readers that hold a mapping and so take no lock per chunk.
    private let closedFlag = Atomic<Bool>(false)
    private var isClosed: Bool { closedFlag.load(ordering: .acquiring) }

    // Writer-only state: touched only by the single writer, under the caller's write serialization.
    private var pending: [UInt8] = []
    /// The buffer of appended chunks being written out on ``writeQueue``, which follows `flushedEnd` in the file
    /// and precedes `pending`: at most one at a time, waited for before any other write, sync, cut or read of
    /// the bytes after `flushedEnd` (``finishBackgroundWrite()``).
    private var backgroundWrite: BackgroundWrite?
    /// The buffer of the last background write, emptied, kept to take the next appends (no 1 MiB allocation
    /// per flush).
    private var spare: [UInt8] = []
    /// ``beginBackgroundWrites()`` not yet ended: while positive, a full buffer is written on ``writeQueue``.
    private var backgroundWriters = 0
    private let compressor: Compressor
    private var failure: SofaError?
    /// CRC32C of every byte written since the last commit, while they are at most ``oneSyncLimit``.
    private var uncommittedCRC: UInt32 = 0
    /// The file's length as the writer left it: the newest commit's end, or beyond it the end of a zero tail.
    private var allocatedEnd: UInt64
    /// Whether a write after the newest commit's end was attempted since that commit: a failed one may have
    /// left bytes there (in the zero tail, or past the file's end) that a discard must cut off.
    private var wroteUncommitted = false
    /// Other threads' reads in progress (``beginHelperReads()``), and whether a failed write owes a cut.
    private var helperReads = 0
    private var discardOwed = false
    /// How many times uncommitted chunks were forgotten (a failed write, or ``discardUncommitted()``). Roots
    /// built from chunks appended before a discard point at nothing: a caller holding such roots across calls it
    /// does not check one by one (a batch whose reads may flush and fail) compares this before committing them.
    /// Writer only.
    public private(set) var discardCount = 0
    /// The writeback hint or early sync in progress (``flushAppendedStartingWriteback()``,
    /// ``flushAppendedStartingSync(minimum:)``), on ``writebackQueue`` or ``earlySyncQueue``: waited for before the
    /// descriptor is synced, cut or closed (``finishWriteback()``), which makes an early sync's failure the file's.
    private var writebackInFlight: WritebackTask?
    /// `sync_file_range` blocks while the disk's queue is full (2–18 ms for V6's ~40 MiB): the hint is given
    /// from here so that the writer goes on meanwhile.
    /// Concurrent: one file's hint, blocked on a full disk queue, does not hold back another file's.
    private static let writebackQueue = DispatchQueue(label: "sofa.writeback-hint", qos: .utility,
                                                      attributes: .concurrent)
    /// Where early syncs run (``flushAppendedStartingSync(minimum:)``): a commit waits for them, so they run at the
    /// priority of the writes they serve, not at the hints' `.utility`. Concurrent, as the hints' queue.
    private static let earlySyncQueue = DispatchQueue(label: "sofa.early-sync", qos: .userInitiated,
                                                      attributes: .concurrent)

    /// Bytes buffered before they are written out in one `pwrite`.
    private static let flushThreshold = 1 << 20

    /// Where full buffers of appended chunks are written out while the writer goes on appending
    /// (``beginBackgroundWrites()``). Concurrent: one file's write does not wait for another file's; each file has
    /// at most one at a time.
    private static let writeQueue = DispatchQueue(label: "sofa.append-write", attributes: .concurrent)

    /// One buffer of appended chunks written out on ``writeQueue``: its bytes, where they go, and the write's
    /// error. The queue's task sets `failure` before it leaves `group`; the writer reads it after waiting.
    private final class BackgroundWrite: @unchecked Sendable {
        let group = DispatchGroup()
        var bytes: [UInt8]
        let at: UInt64
        var failure: (any Error)?

        init(_ bytes: [UInt8], at: UInt64) {
            self.bytes = bytes
            self.at = at
        }
    }

    /// The most data a one-sync commit may have; larger commits sync their data before the header, so that
    /// opening never reads more than this to check the newest commit (FORMAT.md §11). 1 MiB: a batch of 1,000
    /// documents (~125 KiB when this was set, ~117 KiB since) syncs once, not twice (BENCHMARKS.md §3, "D1, eighth
    /// round").
    package static let oneSyncLimit = 1 << 20

    /// The least data since the last commit that ``flushAppendedStartingWriteback()`` starts writing back, and
    /// that ``flushAppendedStartingSync(minimum:)`` syncs when it extends the zero tail: below it the commit's own
    /// `fdatasync` costs about the same.
    package static let earlyWritebackMinimum = 32 << 10

    /// The least data since the last commit that ``flushAppendedStartingSync(minimum:)`` syncs early when the
    /// zero tail has room. Each early sync is one more device flush before the commit's own, which waits for it;
    /// on session 15's VM a sync costs ~100 µs plus ~0.7 µs per KiB written, so below ~150 KiB the commit's
    /// single sync writes the bytes for less than a flush costs. At batches of 1,000 documents (~117 KiB),
    /// syncing only at the commit made D1's batches ~5 % faster than syncing after every chunk (B/A 1.02–1.07,
    /// batches assigned at random within one process; BENCHMARKS.md §3, "D1, thirteenth round"). The limit sits
    /// above that break-even rather than at it: the early sync also makes the commit wait for it, and only
    /// batches clearly larger than one flush's worth gain from overlapping their writes with the puts; 256 KiB
    /// was not tuned further (no batch size between 150 and 256 KiB was measured).
    package static let earlySyncMinimum = 256 << 10

    /// The zero tail ``flushAppendedStartingSync(minimum:)`` keeps ahead of the data written: when less is left, it
    /// extends the tail before it syncs, so that the commit writes into synced zeros.
    static let zeroTailReserve: UInt64 = 256 << 10

    /// The longest zero tail: durable one-sync commits that end past the file's end, and early syncs running
    /// short of tail (``flushAppendedStartingSync(minimum:)``), extend it with zeros (an eighth of the file, between
    /// ``minimumZeroTail`` and this), so that the next small commits overwrite
    /// written blocks and their `fdatasync` journals no size change. Every byte a small commit writes is written
    /// twice (as zeros first), and a tail costs one slower commit (its zeros and the size change are synced) —
    /// at 64 KiB every ~9th single-document commit took twice as long, ~16 µs per commit on average; at 1 MiB
    /// one in (step ÷ bytes per commit) does, ~75 for raw single-document commits at 1M documents
    /// (BENCHMARKS.md §3, "D2, fourth round"). Opening reads at most this plus 64 KiB backward through the
    /// tail, in 64 KiB `pread`s.
    package static let preallocationStep = 1 << 20

    /// The shortest zero tail a durable one-sync commit writes when it grows the file.
    package static let minimumZeroTail = 16 << 10

    /// The bytes a zero tail is written from (the longest tail: a step, plus up to 4 KiB to a block boundary),
    /// made once rather than per tail.
    private static let zeros = [UInt8](repeating: 0, count: preallocationStep + 4096)

    /// Opens (or creates) the file at `path`.
    ///
    /// - Throws: ``SofaError`` — `.notFound`, `.locked` (another writer), `.unsupportedFormat`, `.corruption`
    ///   (no valid commit), `.ioError`/`.diskFull` from the system.
    public convenience init(path: String, options: StorageOptions = StorageOptions()) throws {
        try self.init(path: path, options: options, system: PosixSystemCalls())
    }

    package init(path: String, options: StorageOptions, system: any SystemCalls) throws {
        self.path = path
        self.options = options
        compressor = Compressor(acceleration: options.compressionAcceleration)
        self.system = system
        self.nodeCache = NodeCache(capacityBytes: options.nodeCacheBytes)
        let flags: Int32 = options.readOnly ? O_RDONLY : O_RDWR
        let fd: Int32
        do {
            fd = try system.open(path, flags: flags, mode: 0o644)
        } catch {
            guard error.errno == ENOENT else { throw StorageFile.error(error, path: path) }
            guard !options.readOnly && options.create else {
                throw SofaError(.notFound, "no such file; create it by opening without readOnly", path: path)
            }
            try StorageFile.create(path: path, kind: options.fileKind, version: options.formatVersion, system: system)
            do {
                fd = try system.open(path, flags: flags, mode: 0o644)
            } catch { throw StorageFile.error(error, path: path) }
        }
        var opened = false
        defer {
            if !opened {
                if !options.readOnly { system.unlock(fd) }
                try? system.close(fd)
            }
        }
        if !options.readOnly {
            do {
                try system.lockExclusive(fd)
            } catch {
                if error.errno == EWOULDBLOCK {
                    throw SofaError(.locked,
                                    "another writer has this file open; open it readOnly or close the other writer",
                                    path: path)
                }
                throw StorageFile.error(error, path: path)
            }
        }
        var size: Int64
        do { size = try system.fileSize(fd) } catch { throw StorageFile.error(error, path: path) }
        if size == 0 && !options.readOnly {
            try StorageFile.initialize(fd: fd, path: path, kind: options.fileKind, version: options.formatVersion,
                                       system: system)
            do { size = try system.fileSize(fd) } catch { throw StorageFile.error(error, path: path) }
        }
        let mapping: Mapping
        do {
            mapping = try Mapping(fd: fd, length: Mapping.capacity(forFileSize: Int(size)), system: system)
        } catch { throw StorageFile.error(error, path: path) }
        let found = try Recovery(mapping: mapping, fileSize: UInt64(size), path: path, fd: fd, system: system)
            .newestCommit()
        if options.fileKind != 0 && found.fileKind != options.fileKind {
            throw SofaError(.unsupportedFormat,
                            "file kind \(found.fileKind) where kind \(options.fileKind) was expected", path: path)
        }
        let end = found.header.endOffset
        var allocated = UInt64(size)
        if !options.readOnly && UInt64(size) > end && !found.cleanTail {
            // A torn or abandoned tail after the newest commit: unreachable, so safe to cut away. A clean zero
            // tail stays, for the next commits to write into.
            do {
                try system.ftruncate(fd, length: Int64(end))
                try system.fdatasync(fd)
            } catch { throw StorageFile.error(error, path: path) }
            allocated = end
        } else if !options.readOnly && UInt64(size) > end && options.durability == .full {
            // The zero tail is kept: make sure the zeros, not whatever an earlier handle without syncs left
            // there, are what the disk holds before a one-sync commit relies on it (FORMAT.md §6).
            do { try system.fdatasync(fd) } catch { throw StorageFile.error(error, path: path) }
        }
        self.fd = fd
        self.fileKind = found.fileKind
        self.formatVersion = found.formatVersion
        allocatedEnd = allocated
        shared = Lock(Shared(mapping: mapping, header: found.header))
        flushedEnd = Atomic(end)
        opened = true
    }

    deinit {
        let wasClosed = shared.withLock { $0.closed }
        if !wasClosed {
            backgroundWrite?.group.wait()
            writebackInFlight?.group.wait()
            if !options.readOnly { system.unlock(fd) }
            try? system.close(fd)
        }
    }

    /// The suffix of a file being created (see ``create(path:kind:system:)``); owners remove leftovers.
    public static let creatingSuffix = ".creating"

    /// Creates the file atomically: header and first commit are written and synced under a temporary name,
    /// which is then renamed into place and the directory synced. A crash at any point leaves either no file
    /// or a complete one (and at worst a stray `.creating` file, never a half-written database file).
    private static func create(path: String, kind: UInt32, version: UInt32, system: any SystemCalls) throws {
        let temporary = path + creatingSuffix
        let fd: Int32
        do {
            fd = try system.open(temporary, flags: O_RDWR | O_CREAT | O_TRUNC, mode: 0o644)
        } catch {
            throw StorageFile.error(error, path: temporary)
        }
        do {
            try initialize(fd: fd, path: temporary, kind: kind, version: version, system: system)
            try system.close(fd)
        } catch {
            try? system.close(fd)
            try? system.unlink(temporary)
            throw StorageFile.error(error, path: temporary)
        }
        do {
            try system.rename(temporary, to: path)
            try system.fsyncDirectory(directoryName(of: path))
        } catch {
            try? system.unlink(temporary)
            throw StorageFile.error(error, path: path)
        }
    }

    /// Writes the file header and an empty first commit into a new, empty file, then makes both and the
    /// directory entry durable.
    private static func initialize(fd: Int32, path: String, kind: UInt32, version: UInt32,
                                   system: any SystemCalls) throws {
        guard FileFormat.readableVersions.contains(version) else {
            throw SofaError(.invalidArgument, "cannot create format version \(version); versions: 1, 2", path: path)
        }
        var bytes: [UInt8] = []
        var payload: [UInt8] = []
        payload.appendLittleEndian(FileFormat.fileMagic)
        payload.appendLittleEndian(version)
        payload.appendLittleEndian(kind)
        payload.appendLittleEndian(UInt32(0))
        payload.appendLittleEndian(CommitHeader.now())
        payload.withUnsafeBytes { _ = Chunk.appendUncompressed(kind: .fileHeader, payload: $0, to: &bytes) }
        let first = CommitHeader(commitNumber: 1, previousHeaderOffset: 0, timestamp: CommitHeader.now(),
                                 roots: [], metadata: [])
        let headerOffset = UInt64(bytes.count)
        first.encodePayload(version: version).withUnsafeBytes {
            _ = Chunk.appendUncompressed(kind: .commitHeader, payload: $0, to: &bytes)
        }
        CommitTrailer.encode(headerOffset: headerOffset, into: &bytes)
        do {
            try bytes.withUnsafeBytes { b in try system.pwriteAll(fd, b, at: 0) }
            try system.fsync(fd)
            try system.fsyncDirectory(directoryName(of: path))
        } catch {
            throw StorageFile.error(error, path: path)
        }
    }

    /// The directory part of `path` ("." when there is none).
    package static func directoryName(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let dir = path[..<slash]
        return dir.isEmpty ? "/" : String(dir)
    }

    package static func error(_ error: any Error, path: String) -> SofaError {
        if let failure = error as? SystemCallFailure { return StorageFile.error(failure, path: path) }
        if let sofa = error as? SofaError { return sofa }
        return SofaError(.ioError, "\(error)", path: path)
    }

    package static func error(_ failure: SystemCallFailure, path: String) -> SofaError {
        if failure.errno == ENOSPC {
            return SofaError(.diskFull, "disk full during \(failure.call); free space and retry", path: path)
        }
        return SofaError(.ioError, failure.description, path: path)
    }

    // MARK: - Reading

    /// The newest commit: a snapshot whose trees stay readable however the file grows.
    public var latestCommit: CommitHeader { shared.withLock { $0.header } }

    /// The file offset of the newest commit's header: which commit is newest, without copying the header (its
    /// roots and metadata arrays) as ``latestCommit`` does. An owner that keeps what it derived from a commit
    /// checks it against this.
    package var latestCommitOffset: UInt64 { shared.withLock { $0.header.offset } }

    /// The file's length as far as written (committed or not).
    /// Writer only.
    public var writtenLength: UInt64 { queuedEnd + UInt64(pending.count) }

    /// Where `pending` begins in the file: past the bytes written and those being written in the background.
    private var queuedEnd: UInt64 {
        flushedEnd.load(ordering: .acquiring) + UInt64(backgroundWrite?.bytes.count ?? 0)
    }

    /// Reads the chunk at `offset`, which must end at or before `limit` (a commit's ``CommitHeader/endOffset``
    /// for readers; ``unlimited`` for the writer reading its own uncommitted chunks).
    ///
    /// - Throws: ``SofaError/Code/corruption`` naming the file and offset when the chunk is out of bounds,
    ///   fails its CRC, or does not decompress.
    public func readChunk(at offset: UInt64, kind: ChunkKind?, limit: UInt64) throws -> ChunkPayload {
        // Readers pass a commit's end, which is never past `flushedEnd`, and never touch `pending`; so do the
        // writer's helper threads, which pass the written length after `flushAppended()` while the writer waits
        // for them. Only the writer passes `unlimited`, and its unwritten chunks are flushed before it reads them.
        var end = limit
        if limit == StorageFile.unlimited {
            if offset >= flushedEnd.load(ordering: .relaxed) { try flushPending() }
            end = flushedEnd.load(ordering: .relaxed)
        }
        let mapping = try mapping(covering: end)
        guard offset < end, end - offset >= UInt64(FileFormat.chunkPrefixSize) else {
            throw SofaError(.corruption, "pointer to offset \(offset) is past the end of data (\(end))",
                            path: path, offset: Int(clamping: offset))
        }
        // The mapping covers [0, end) and `end` is within the written file, so these bytes are backed.
        let available = UnsafeRawBufferPointer(start: mapping.base + Int(offset), count: Int(end - offset))
        let prefix = try Chunk.check(available, offset: offset, path: path, expecting: kind)
        let stored = UnsafeRawBufferPointer(rebasing: available[FileFormat.chunkPrefixSize..<prefix.totalLength])
        if prefix.isCompressed {
            return try Chunk.decompress(stored, rawLength: prefix.rawLength, offset: offset, kind: prefix.kind,
                                        path: path)
        }
        return ChunkPayload(mapping: mapping, base: stored.baseAddress ?? mapping.base, count: stored.count,
                            offset: offset, kind: prefix.kind, fileLength: prefix.totalLength)
    }

    /// The payload bytes of the chunk at `offset` (below `limit`, a finite limit: a commit's end or a written
    /// length, never ``unlimited``) when it is a `kind` chunk, checked as ``readChunk(at:kind:limit:)`` checks it,
    /// without making a ``ChunkPayload``: a compressed payload is decompressed into `scratch`, a reusable buffer
    /// of the caller's, and `mapping` keeps the mapping of the last call, so that a thread reading many chunks
    /// takes the file's lock only when the mapping it holds does not reach `limit`. For one thread's readers
    /// (``BTreeReader``).
    ///
    /// Nil, with nothing checked or decompressed, when the prefix's kind byte names another kind: the caller then
    /// reads the chunk through ``readChunk(at:kind:limit:)``, which checks it (a damaged kind byte fails the CRC
    /// on one path or the other). Unsafe: the bytes point into `mapping` or `scratch`, and stay valid only while
    /// the caller keeps `mapping` and until its next use of `scratch`.
    ///
    /// - Throws: as ``readChunk(at:kind:limit:)``; "the file is closed" once it is, as the plain reads do (a
    ///   mapping the caller holds stays valid, but a closed file's readers are to stop).
    func unsafeChunkBytes(at offset: UInt64, ifKind kind: ChunkKind, limit: UInt64, mapping held: inout Mapping?,
                          scratch: ScratchBuffer) throws -> UnsafeRawBufferPointer? {
        precondition(limit != StorageFile.unlimited, "a thread's reader reads below a finite limit")
        let mapping: Mapping
        if let held, UInt64(held.length) >= limit, !isClosed {
            mapping = held
        } else {
            mapping = try self.mapping(covering: limit)
            held = mapping
        }
        guard offset < limit, limit - offset >= UInt64(FileFormat.chunkPrefixSize) else {
            throw SofaError(.corruption, "pointer to offset \(offset) is past the end of data (\(limit))",
                            path: path, offset: Int(clamping: offset))
        }
        // The mapping covers [0, limit) and `limit` is within the written file, so these bytes are backed.
        let available = UnsafeRawBufferPointer(start: mapping.base + Int(offset), count: Int(limit - offset))
        guard available[12] == kind.rawValue else { return nil }
        let prefix = try Chunk.check(available, offset: offset, path: path, expecting: kind)
        let stored = UnsafeRawBufferPointer(rebasing: available[FileFormat.chunkPrefixSize..<prefix.totalLength])
        guard prefix.isCompressed else { return stored }
        let out = scratch.reserve(prefix.rawLength)
        let n = LZ4_decompress_safe(
            stored.baseAddress!.assumingMemoryBound(to: CChar.self), out.assumingMemoryBound(to: CChar.self),
            Int32(stored.count), Int32(prefix.rawLength))
        guard n == Int32(prefix.rawLength) else {
            throw SofaError(.corruption, "chunk does not decompress to its declared \(prefix.rawLength) bytes",
                            path: path, offset: Int(clamping: offset))
        }
        return UnsafeRawBufferPointer(start: out, count: prefix.rawLength)
    }

    /// Recomputes `commit`'s data check (FORMAT.md §5: the CRC32C of its data bytes, recorded by a one-sync
    /// commit) over the file as it is now; nil when it matches or the commit has none. Opening accepts a newest
    /// commit whose check fails when the damage looks like a flipped bit rather than a lost write (§6), so
    /// `verify` reports the mismatch here, naming the data's first offset.
    public func dataCheckProblem(of commit: CommitHeader) -> SofaError? {
        guard let check = commit.dataCheck else { return nil }
        guard check.start <= commit.offset else {
            return SofaError(.corruption, "commit \(commit.commitNumber)'s data check starts at \(check.start), " +
                             "after its header", path: path, offset: Int(clamping: commit.offset))
        }
        let mapping: Mapping
        do {
            mapping = try self.mapping(covering: commit.offset)
        } catch { return error as? SofaError ?? SofaError(.ioError, "\(error)", path: path) }
        let data = UnsafeRawBufferPointer(start: mapping.base + Int(check.start),
                                          count: Int(commit.offset - check.start))
        let crc = CRC32C.checksum(data)
        if crc == check.crc { return nil }
        return SofaError(.corruption, "commit \(commit.commitNumber)'s data check fails: CRC32C of bytes " +
                         "\(check.start)..<\(commit.offset) is \(crc), its header records \(check.crc)",
                         path: path, offset: Int(clamping: check.start))
    }

    /// Drops this process's resident pages of the file's mapping; they stay in the OS page cache, and later
    /// reads fault them back in. A scan of a whole large file (a first view build) calls it now and then so
    /// that its resident set stays bounded by what it holds, not by the file's size.
    package func releaseResidentPages() {
        guard let mapping = shared.withLock({ $0.mapping }) else { return }
        // A shared read-only file mapping: MADV_DONTNEED only unmaps pages, their contents come back from the file.
        _ = madvise(UnsafeMutableRawPointer(mutating: mapping.base), mapping.length, MADV_DONTNEED)
    }

    /// A limit that lets the writer read chunks it has not committed yet.
    public static let unlimited = UInt64.max

    /// The current mapping, remapped larger first when it does not reach `end`.
    private func mapping(covering end: UInt64) throws -> Mapping {
        try shared.withLock { s throws(SofaError) -> Mapping in
            guard !s.closed, let current = s.mapping else {
                throw SofaError(.invalidArgument, "the file is closed", path: path)
            }
            if UInt64(current.length) >= end { return current }
            do {
                let larger = try Mapping(fd: fd, length: Mapping.capacity(forFileSize: Int(end)), system: system)
                s.mapping = larger
                return larger
            } catch {
                throw StorageFile.error(error, path: path)
            }
        }
    }

    // MARK: - Writing

    private func checkWritable() throws {
        if options.readOnly {
            throw SofaError(.readOnly, "the file was opened read-only", path: path)
        }
        // After close the descriptor number may already belong to another file: never write through it.
        if shared.withLock({ $0.closed }) {
            throw SofaError(.invalidArgument, "the file is closed", path: path)
        }
        if let failure {
            throw SofaError(.writesRefused, "an earlier sync or commit failed (\(failure.message)); reopen the file",
                            path: path)
        }
    }

    /// Appends a chunk (uncommitted until the next ``commit(roots:metadata:)``) and returns its offset.
    ///
    /// - Parameters:
    ///   - kind: what the chunk holds.
    ///   - payload: the bytes.
    ///   - compress: store LZ4-compressed when that saves space.
    /// - Returns: the chunk's offset and its length in the file (prefix included).
    public func append(kind: ChunkKind, payload: UnsafeRawBufferPointer,
                       compress: Bool) throws -> (offset: UInt64, length: Int) {
        try checkWritable()
        let offset = queuedEnd + UInt64(pending.count)
        let length = Chunk.append(kind: kind, payload: payload, compressor: compress ? compressor : nil,
                                  to: &pending)
        if pending.count >= StorageFile.flushThreshold { try writeFullBuffer() }
        return (offset, length)
    }

    /// Appends a chunk framed elsewhere with ``Chunk/append(kind:payload:compressor:to:)`` — on another thread, so
    /// that several chunks compress at once — and returns its offset and length. Framing does not depend on
    /// where a chunk lands, so the bytes are those ``append(kind:payload:compress:)`` would have written.
    package func append(framed chunk: UnsafeRawBufferPointer) throws -> (offset: UInt64, length: Int) {
        try checkWritable()
        let offset = queuedEnd + UInt64(pending.count)
        pending.append(contentsOf: chunk)
        if pending.count >= StorageFile.flushThreshold { try writeFullBuffer() }
        return (offset, chunk.count)
    }

    /// Writes the chunks appended so far to the file, still uncommitted, so that other threads can read them
    /// through a tree whose limit is ``writtenLength`` (the writer's own reads, with limit ``unlimited``, may
    /// flush as they go; reads on other threads must not). Writer only.
    package func flushAppended() throws {
        try flushPending()
    }

    /// Writes the chunks appended so far to the file (as ``flushAppended()``) and, when they are at least
    /// ``earlyWritebackMinimum`` and the file is durable, starts their writeback to the disk without waiting, so
    /// that the commit's `fdatasync` finds most of them written. For a writer with more work to do before it
    /// commits (a view update recomputing its group aggregates). Writer only.
    ///
    /// The hint is given on another thread (the call blocks while the disk's queue is full); the commit, a
    /// discard and `close()` wait for it first, so it never outlives the descriptor.
    package func flushAppendedStartingWriteback() throws {
        try flushPending()
        let start = latestCommit.endOffset
        // Whole pages: the next append rewrites the last, partly filled one.
        let end = flushedEnd.load(ordering: .relaxed) / 4096 * 4096
        guard options.durability == .full, end > start, end - start >= UInt64(StorageFile.earlyWritebackMinimum)
        else { return }
        finishWriteback()
        startWritebackTask(on: StorageFile.writebackQueue) { system, fd in
            system.startWriteback(fd, offset: Int64(start), length: Int64(end - start))
        }
    }

    /// With durability ``Durability/full`` (else it does nothing): writes the chunks appended so far to the file
    /// (as ``flushAppended()``) and, when they are at least `minimum` bytes (and never below
    /// ``earlyWritebackMinimum``), `fdatasync`s them on another thread
    /// while the writer goes on, so that the commit's own sync has only the rest to write (FORMAT.md §11, "early
    /// syncs"). For a writer that appends in steps before one commit: a pipelined batch's flush thread after each
    /// chunk. When less than ``zeroTailReserve`` of zero tail is left after them, it extends the tail and syncs
    /// once at least ``earlyWritebackMinimum`` bytes were appended, whatever `minimum`, so that the commit writes
    /// into synced zeros instead of growing the file. No sync is started while the previous early sync is still
    /// running: the next call or the commit covers these bytes. Writer only.
    ///
    /// - Parameter minimum: the data since the last commit from which to sync without extending the tail;
    ///   ``earlySyncMinimum`` unless a test needs every call of at least ``earlyWritebackMinimum`` bytes to sync.
    ///
    /// The commit, a discard and `close()` wait for the sync first. A failed early sync makes the file refuse
    /// writes until reopened, as a failed commit sync does (what reached the disk is unknown): the commit that
    /// waits for it throws.
    package func flushAppendedStartingSync(minimum: Int = StorageFile.earlySyncMinimum) throws {
        guard options.durability == .full else { return }  // nothing to sync: appends stay buffered
        try flushPending()
        let start = latestCommit.endOffset
        let written = flushedEnd.load(ordering: .relaxed)
        guard written > start, written - start >= UInt64(StorageFile.earlyWritebackMinimum) else { return }
        let tailShort = allocatedEnd < written + StorageFile.zeroTailReserve
        guard tailShort || written - start >= UInt64(minimum) else { return }
        if let task = writebackInFlight, task.group.wait(timeout: .now()) == .timedOut { return }
        finishWriteback()
        if let failure { throw failure }  // the previous early sync failed
        if tailShort { extendZeroTail(beyond: written) }
        startWritebackTask(on: StorageFile.earlySyncQueue) { system, fd in try system.fdatasync(fd) }
    }

    /// Waits for the writeback hint or early sync in progress, if any (a failed early sync then makes the file
    /// refuse writes): for tests that must see the file between an early sync and the commit. Writer only.
    package func waitForWriteback() {
        finishWriteback()
    }

    /// A writeback hint or early sync on another thread: its group, left when it is done, and its failure,
    /// written by the task before it leaves the group and read by the writer after waiting.
    private final class WritebackTask: @unchecked Sendable {
        let group = DispatchGroup()
        var failure: (any Error)?
    }

    /// Runs `work` on the file's descriptor on `queue` as the writeback task in progress (none may be). Writer only.
    private func startWritebackTask(on queue: DispatchQueue,
                                    _ work: @escaping @Sendable (any SystemCalls, Int32) throws -> Void) {
        let task = WritebackTask()
        let (system, fd) = (self.system, self.fd)
        queue.async(group: task.group) {
            do { try work(system, fd) } catch { task.failure = error }
        }
        writebackInFlight = task
    }

    /// Waits for the writeback hint or early sync in progress, if any; a failed early sync becomes the file's
    /// ``failure``. Writer only.
    private func finishWriteback() {
        guard let task = writebackInFlight else { return }
        task.group.wait()
        writebackInFlight = nil
        if let error = task.failure, failure == nil {
            // Whatever the errno (a full disk too), what reached the disk is unknown: the handle is fail-stopped,
            // not retryable, and says so.
            failure = SofaError(.ioError, "an early sync of uncommitted data failed "
                                + "(\(StorageFile.error(error, path: path).message)); reopen the file", path: path)
        }
    }

    /// Marks the start of reads by other threads below ``writtenLength`` (a parallel batch modify's leaf
    /// workers): until the matching ``endHelperReads()``, a failed write does not cut the file back under them
    /// (a read of the mapping past the file's end would fault); the cut is owed and made then. Writer only.
    package func beginHelperReads() {
        helperReads += 1
    }

    /// Ends what ``beginHelperReads()`` began, once the other threads no longer read; makes a cut a failed
    /// write owed in the meantime. Writer only.
    package func endHelperReads() {
        precondition(helperReads > 0, "endHelperReads without beginHelperReads")
        helperReads -= 1
        if helperReads == 0 && discardOwed {
            discardOwed = false
            discardUncommitted()
        }
    }

    /// Marks the start of appends whose full buffers are written on another thread (``writeQueue``) while the
    /// writer goes on: a large batch modify's writer, which spent ~30 % of its time in `pwrite` (the kernel
    /// copying the bytes into the page cache). The file gets the same bytes in the same order; what changes is
    /// when a failed write is reported: not by the append that filled the buffer but by the next append that
    /// fills one, the next flush, read of unwritten chunks or commit — each of which waits for the write first —
    /// after everything uncommitted was discarded, as a failed write on the writer's thread does. Until the
    /// matching ``endBackgroundWrites()``; calls nest. Writer only.
    package func beginBackgroundWrites() {
        backgroundWriters += 1
    }

    /// Ends what ``beginBackgroundWrites()`` began; later full buffers are written on the writer's thread again.
    /// A write still in progress finishes in the background, and is waited for (and its failure reported) as
    /// described there. Writer only.
    package func endBackgroundWrites() {
        precondition(backgroundWriters > 0, "endBackgroundWrites without beginBackgroundWrites")
        backgroundWriters -= 1
    }

    /// Writes out the buffer an append has filled: in the background between ``beginBackgroundWrites()`` and
    /// ``endBackgroundWrites()``, else now.
    private func writeFullBuffer() throws {
        if backgroundWriters > 0 { try writePendingInBackground() } else { try flushPending() }
    }

    /// Starts writing the buffered chunks out on ``writeQueue`` (after the previous background write, which it
    /// waits for) and takes further appends into another buffer. Their offsets are those a synchronous write
    /// would give: the file gets the same bytes in the same order, one `pwrite` after the other.
    ///
    /// - Throws: the previous background write's failure (``finishBackgroundWrite()``).
    private func writePendingInBackground() throws {
        guard let at = try prepareWrite() else { return }
        checksumPending(at: at)
        // The full buffer goes to the write; the spare one, empty, takes the appends that follow.
        var full: [UInt8] = []
        swap(&full, &pending)
        swap(&pending, &spare)
        let write = BackgroundWrite(consume full, at: at)
        let (system, fd) = (self.system, self.fd)
        StorageFile.writeQueue.async(group: write.group) {
            do {
                try write.bytes.withUnsafeBytes { b in try system.pwriteAll(fd, b, at: Int64(write.at)) }
            } catch {
                write.failure = error
            }
        }
        backgroundWrite = write
    }

    /// Waits for the background write, if any, and counts its bytes as written; a failed one discards everything
    /// uncommitted, as a failed ``flushPending()`` does, and its error is thrown here.
    private func finishBackgroundWrite() throws {
        guard let write = backgroundWrite else { return }
        write.group.wait()
        backgroundWrite = nil
        if let failure = write.failure { throw failedWrite(failure) }
        didWrite(upTo: write.at + UInt64(write.bytes.count))
        // The written buffer becomes the spare, unless a large chunk made it grow well past the threshold.
        swap(&spare, &write.bytes)
        spare.removeAll(keepingCapacity: spare.capacity <= 4 * StorageFile.flushThreshold)
    }

    /// Writes buffered chunks to the file (after any background write). A failed write discards everything
    /// uncommitted (at once, or when helper reads end), so the file can take new commits once the cause (a full
    /// disk) is gone.
    private func flushPending() throws {
        guard let at = try prepareWrite() else { return }
        do {
            try pending.withUnsafeBytes { b in try system.pwriteAll(fd, b, at: Int64(at)) }
        } catch {
            throw failedWrite(error)
        }
        checksumPending(at: at)
        didWrite(upTo: at + UInt64(pending.count))
        pending.removeAll(keepingCapacity: pending.capacity <= 4 * StorageFile.flushThreshold)
    }

    /// Waits for the background write, if any, and readies a write of the buffered chunks: nil when there are
    /// none, else the offset they go to.
    private func prepareWrite() throws -> UInt64? {
        try finishBackgroundWrite()
        guard !pending.isEmpty else { return nil }
        try checkWritable()
        wroteUncommitted = true
        return flushedEnd.load(ordering: .relaxed)
    }

    /// Adds the buffered chunks, to be written at `at`, to the CRC of a commit small enough for one sync.
    private func checksumPending(at: UInt64) {
        if at + UInt64(pending.count) - latestCommit.endOffset <= UInt64(StorageFile.oneSyncLimit) {
            uncommittedCRC = CRC32C.checksum(pending, seed: uncommittedCRC)
        }
    }

    /// After a failed write of buffered chunks: discards everything uncommitted — at once, or when the helper
    /// reads in progress end — and returns the error to throw.
    private func failedWrite(_ error: any Error) -> SofaError {
        if helperReads > 0 {
            pending.removeAll(keepingCapacity: false)
            discardOwed = true
            discardCount += 1
        } else {
            discardUncommitted()
        }
        return StorageFile.error(error, path: path)
    }

    /// Counts the file's bytes up to `end` as written.
    private func didWrite(upTo end: UInt64) {
        flushedEnd.store(end, ordering: .releasing)
        allocatedEnd = max(allocatedEnd, end)
    }

    /// Forgets every chunk appended since the last commit. Roots built from them must be dropped too.
    public func discardUncommitted() {
        discardCount += 1
        finishWriteback()
        if let write = backgroundWrite {
            // Its bytes are discarded with the rest, written or not.
            write.group.wait()
            backgroundWrite = nil
        }
        pending.removeAll(keepingCapacity: false)
        uncommittedCRC = 0
        // After `close()` the descriptor number may already name another file: nothing to cut.
        guard !shared.withLock({ $0.closed }) else { return }
        let committed = latestCommit.endOffset
        nodeCache.removeAll(atOrAbove: committed)
        if flushedEnd.load(ordering: .relaxed) > committed || wroteUncommitted {
            wroteUncommitted = false
            flushedEnd.store(committed, ordering: .releasing)
            // Durably: a later one-sync commit must write where the disk holds nothing, so that a write of it
            // lost to a power cut reads as zeros (FORMAT.md §6). When the cut or its sync fails, the discarded
            // bytes may still be on disk under the next commit: the file refuses writes until reopened (the
            // open's recovery cuts the tail again), rather than risk a torn commit passing for a bit flip.
            do {
                try system.ftruncate(fd, length: Int64(committed))
                if options.durability == .full { try system.fdatasync(fd) }
            } catch {
                if failure == nil { failure = StorageFile.error(error, path: path) }
            }
            allocatedEnd = committed
        }
    }

    /// Makes everything appended so far, plus a header with `roots` and `metadata`, one atomic commit.
    ///
    /// With ``Durability/full``, a commit of at most ``oneSyncLimit`` bytes of data (in a version 2 file) writes
    /// its data and a header recording the data's CRC32C in one `pwrite`, then `fdatasync`s once; opening
    /// accepts that header only if the data still matches. A larger commit writes its data, `fdatasync`s, writes
    /// the header, `fdatasync`s (FORMAT.md §11). Readers see the new commit only after it is complete. After a
    /// failed sync or header write (for a one-sync commit, the write of data and header) the handle refuses writes
    /// (`.writesRefused`) until reopened, since what reached the disk is then unknown; a write that failed for a
    /// full disk is cut off instead, and the handle takes commits again once space is free.
    ///
    /// - Returns: the new commit's header.
    @discardableResult
    public func commit(roots: [NodePointer?], metadata: [UInt8]) throws -> CommitHeader {
        try checkWritable()
        precondition(roots.count <= CommitHeader.maximumRoots, "too many roots")
        try finishBackgroundWrite()
        finishWriteback()
        if let failure { throw failure }  // an early sync failed
        let previous = latestCommit
        let durable = options.durability == .full
        let written = flushedEnd.load(ordering: .relaxed)
        let headerOffset = written + UInt64(pending.count)
        let oneSync = formatVersion >= 2 && headerOffset - previous.endOffset <= UInt64(StorageFile.oneSyncLimit)
        if oneSync {
            // The data and the header go out in one `pwrite` (FORMAT.md §11): the data check covers the data
            // whatever order the disk writes them in, so they need no order between them.
            uncommittedCRC = CRC32C.checksum(pending, seed: uncommittedCRC)
        } else {
            try flushPending()
            do {
                if durable { try system.fdatasync(fd) }
            } catch {
                failure = StorageFile.error(error, path: path)
                throw failure!
            }
        }
        var header = CommitHeader(commitNumber: previous.commitNumber + 1, previousHeaderOffset: previous.offset,
                                  timestamp: CommitHeader.now(), roots: roots, metadata: metadata,
                                  dataCheck: oneSync ? DataCheck(start: previous.endOffset, crc: uncommittedCRC) : nil)
        let start = pending.count
        header.encodePayload(version: formatVersion).withUnsafeBytes {
            _ = Chunk.appendUncompressed(kind: .commitHeader, payload: $0, to: &pending)
        }
        CommitTrailer.encode(headerOffset: headerOffset, into: &pending)
        let end = headerOffset + UInt64(pending.count - start)
        wroteUncommitted = true
        do {
            // One-sync: the data and the header; two-sync: the header alone (the data was written and synced).
            try pending.withUnsafeBytes { b in
                try system.pwriteAll(fd, b, at: Int64(flushedEnd.load(ordering: .relaxed)))
            }
            pending.removeAll(keepingCapacity: pending.capacity <= 4 * StorageFile.flushThreshold)
        } catch {
            let reported = StorageFile.error(error, path: path)
            if reported.code == .diskFull {
                // A header that did not fit is never a valid commit (its trailer is missing or fails its CRC):
                // cut it off with the rest of the commit, and the file takes commits again once space is free.
                discardUncommitted()
                throw reported
            }
            failure = reported
            throw reported
        }
        allocatedEnd = max(allocatedEnd, end)
        // A commit that reached the file's end writes zeros after it (FORMAT.md §11), which its own
        // `fdatasync` syncs.
        if durable && oneSync && end >= allocatedEnd { extendZeroTail(beyond: end) }
        do {
            if durable { try system.fdatasync(fd) }
        } catch {
            failure = StorageFile.error(error, path: path)
            throw failure!
        }
        uncommittedCRC = 0
        wroteUncommitted = false
        header.offset = headerOffset
        header.endOffset = end
        // Publish before anything else can fail: the commit is durable, and readers remap on demand.
        flushedEnd.store(header.endOffset, ordering: .releasing)
        shared.withLock { $0.header = header }
        return header
    }

    /// Writes zeros from the file's end (``allocatedEnd``, at or after `end`) to an eighth of `end` after `end`,
    /// at least ``minimumZeroTail`` and at most ``preallocationStep``, up to a 4 KiB boundary: a tail after
    /// whatever commit ends at or after `end` stays shorter than the step plus 4 KiB, as opening assumes
    /// (FORMAT.md §6). Best effort: if the zeros do not fit (a full disk), the partial tail is cut off again.
    private func extendZeroTail(beyond end: UInt64) {
        let extra = min(UInt64(StorageFile.preallocationStep), max(UInt64(StorageFile.minimumZeroTail), end / 8))
        let target = (end + extra + 4095) / 4096 * 4096
        let from = allocatedEnd
        guard target > from else { return }
        do {
            try StorageFile.zeros.withUnsafeBytes { b in
                try system.pwriteAll(fd, UnsafeRawBufferPointer(rebasing: b[..<Int(target - from)]), at: Int64(from))
            }
            allocatedEnd = target
        } catch {
            try? system.ftruncate(fd, length: Int64(from))
        }
    }

    /// Closes the file. Chunks already read stay valid (they hold the mapping); further calls fail.
    public func close() throws {
        let (wasClosed, mapping) = shared.withLock { s -> (Bool, Mapping?) in
            defer {
                s.closed = true
                s.mapping = nil
                closedFlag.store(true, ordering: .releasing)
            }
            return (s.closed, s.mapping)
        }
        _ = mapping  // released outside the lock
        guard !wasClosed else { return }
        backgroundWrite?.group.wait()
        backgroundWrite = nil
        finishWriteback()
        pending.removeAll()
        // Free the decoded nodes now, so a close pays for its own cleanup rather than whatever runs next.
        nodeCache.removeAll()
        if !options.readOnly { system.unlock(fd) }
        do { try system.close(fd) } catch { throw StorageFile.error(error, path: path) }
    }
}
