#if canImport(Glibc)
import Glibc
#endif
import SofaStorage
import Synchronization

/// When commits reach the disk; see ``DatabaseOptions/durability``.
public typealias Durability = SofaStorage.Durability

/// How to open a ``Database``.
public struct DatabaseOptions: Sendable {
    /// Open without writing: no file or directory is created, nothing is changed, no write lock is taken, and
    /// every write fails with ``SofaError/Code/readOnly``.
    public var readOnly: Bool
    /// When a commit is durable.
    ///
    /// - ``Durability/full`` (default): a write or batch that returned survives a process crash and a power
    ///   loss — atomic, consistent, isolated and durable.
    /// - ``Durability/none``: no `fsync`. A returned commit survives a crash of the process (the kernel still
    ///   writes it out). A power loss or OS crash may lose the newest commits, and the newest commit found
    ///   afterwards may reference pages that never reached the disk (reads of them fail with `.corruption`,
    ///   never wrong data). Atomicity, consistency and isolation hold; durability only against process
    ///   crashes. For data that can be rebuilt: bulk loads redone from their source, tests.
    public var durability: Durability
    /// Bytes of decoded tree nodes kept in memory (default 64 MiB).
    public var nodeCacheBytes: Int
    /// How many revisions each branch of a document's revision tree keeps (default 20, at least 1); older
    /// ancestors are forgotten, as CouchDB's `revs_limit` does.
    public var revisionTreeDepth: Int
    /// Bodies of at most this many bytes are stored inside the by-ID tree; larger ones as chunks of their own.
    package var inlineBodyLimit = 1024

    /// Options with defaults: writable, ``Durability/full``, 64 MiB node cache, revision depth 20.
    public init(readOnly: Bool = false, durability: Durability = .full, nodeCacheBytes: Int = 64 << 20,
                revisionTreeDepth: Int = 20) {
        self.readOnly = readOnly
        self.durability = durability
        self.nodeCacheBytes = nodeCacheBytes
        self.revisionTreeDepth = revisionTreeDepth
    }
}

/// A Sofa database: a directory `NAME.sofa/` holding the document file (`docs`) and, later, view indexes.
///
/// Thread-safe. Any thread may read or write. Writes are serialized by a lock; each write (or each
/// ``inBatch(_:)``) is one atomic commit. Readers use the newest commit as a snapshot and never wait for the
/// writer — except the thread inside a batch, which reads its own uncommitted changes.
///
/// ```swift
/// let db = try Database(path: "music.sofa")
/// let doc = try db.put(["type": "track", "title": "Qux"], id: "track-1")
/// try db.inBatch {
///     for t in tracks { try db.put(t.json, id: t.id) }
/// }
/// print(db.documentCount, db.lastSequence)
/// try db.close()
/// ```
public final class Database: @unchecked Sendable {
    /// The database directory.
    public let path: String
    /// The options it was opened with.
    public let options: DatabaseOptions
    let documents: DocumentFile
    let notifier = ChangeNotifier()
    let viewRegistry = ViewRegistry()
    /// The system-call layer every file of the database goes through (fault injection in tests).
    let system: any SystemCalls
    /// Serializes writers (and compaction); holds whether the database is closed.
    let writeLock = Lock(false)
    /// The thread inside the write lock (0 when none), so a write made inside a batch joins it.
    private let writerThread = Atomic<UInt>(0)
    private let closed = Atomic(false)
    /// Whether this handle has synced the database directory since `views/` was first seen or made: a directory
    /// made by a call whose sync failed is synced by the next call, not taken as durable because it exists.
    let viewsDirectorySynced = Atomic(false)

    /// Opens the database at `path` (a directory, conventionally `NAME.sofa`), creating it unless read-only.
    ///
    /// ```swift
    /// let db = try Database(path: "music.sofa", options: DatabaseOptions(durability: .none))
    /// ```
    ///
    /// - Parameters:
    ///   - path: the database directory.
    ///   - options: read-only, durability, cache size, revision depth.
    /// - Throws: ``SofaError`` — `.notFound` (read-only and missing), `.locked` (another process writes it),
    ///   `.unsupportedFormat`, `.corruption`, `.ioError`, `.diskFull`.
    public convenience init(path: String, options: DatabaseOptions = DatabaseOptions()) throws {
        try self.init(path: path, options: options, system: PosixSystemCalls())
    }

    /// Opens the database with a chosen system-call layer (fault injection in tests).
    package init(path: String, options: DatabaseOptions, system: any SystemCalls) throws {
        guard options.revisionTreeDepth >= 1 else {
            throw SofaError(.invalidArgument, "revisionTreeDepth must be at least 1")
        }
        // "music.sofa/" and "music.sofa" name the same directory; without the slash its parent is found right.
        let path = path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
        self.path = path
        self.options = options
        self.system = system
        if !options.readOnly {
            do {
                try system.mkdir(path, mode: 0o755)
                try system.fsyncDirectory(StorageFile.directoryName(of: path))
            } catch where error.errno == EEXIST {
                // Already there: open what it holds.
            } catch {
                throw StorageFile.error(error, path: path)
            }
        }
        let storage = StorageOptions(readOnly: options.readOnly, durability: options.durability,
                                     create: !options.readOnly, nodeCacheBytes: options.nodeCacheBytes)
        documents = try DocumentFile(path: path + "/docs", options: storage,
                                     revisionDepth: options.revisionTreeDepth,
                                     inlineBodyLimit: options.inlineBodyLimit, system: system)
        if !options.readOnly {
            // Holding the docs file's write lock, no compaction can be running: a temporary file left here is
            // from an interrupted one, and the original is intact.
            Database.removeCompactionLeftovers(in: path, system: system)
        }
    }

    deinit {
        notifier.finish()  // a stream's consumer must not wait for a database that is gone
    }

    /// Closes the database: waits for a write in progress, then releases the files. Later calls throw
    /// `.invalidArgument`; change streams finish. Closing twice does nothing.
    ///
    /// - Throws: ``SofaError`` — `.ioError` when the file cannot be closed cleanly;
    ///   `.invalidArgument` when called from inside ``inBatch(_:)``.
    public func close() throws {
        if isWriterThread { throw SofaError(.invalidArgument, "close() inside inBatch; close after the batch") }
        try writeLock.withLock { isClosed in
            guard !isClosed else { return }
            isClosed = true
            closed.store(true, ordering: .releasing)
            viewRegistry.closeAll()
            try documents.close()
        }
        notifier.finish()
    }

    // MARK: - Serialization of writers

    static func currentThread() -> UInt { UInt(bitPattern: Int(bitPattern: pthread_self())) }

    var isWriterThread: Bool { writerThread.load(ordering: .acquiring) == Database.currentThread() }

    func checkOpen() throws {
        if closed.load(ordering: .acquiring) {
            throw SofaError(.invalidArgument, "the database is closed", path: path)
        }
    }

    /// Runs `body` as one batch: under the write lock, committed when it returns, rolled back when it throws.
    /// Called on the thread already inside a batch, `body` simply joins that batch.
    func write<R: Sendable>(_ body: () throws -> R) throws -> R {
        if options.readOnly { throw SofaError(.readOnly, "the database was opened read-only", path: path) }
        if isWriterThread { return try body() }
        let result = try writeLock.withLock { isClosed throws -> R in
            if isClosed { throw SofaError(.invalidArgument, "the database is closed", path: path) }
            writerThread.store(Database.currentThread(), ordering: .releasing)
            defer { writerThread.store(0, ordering: .releasing) }
            try documents.beginBatch()
            let result: R
            do {
                result = try body()
            } catch {
                documents.rollbackBatch()
                throw error
            }
            if let committed = try documents.commitBatch() {
                notifier.enqueue(ChangeBatch(firstSequence: committed.first, lastSequence: committed.last,
                                             snapshot: committed.snapshot))
            }
            return result
        }
        notifier.drain()
        return result
    }

    /// The snapshot reads use: the newest commit, or the batch's working state on the thread writing it.
    func readSnapshot() throws -> DocumentSnapshot {
        try checkOpen()
        if isWriterThread, documents.batch != nil {
            try documents.batch!.flush()
            return try documents.batch!.snapshot(storage: documents.storage)
        }
        return try documents.committedSnapshot()
    }

    // MARK: - Consistency check

    /// Checks the whole database and returns every problem found (empty when sound): both trees' structure,
    /// checksums, counts and reductions, every by-ID entry and body, and by-ID ⇄ by-sequence agreement; then
    /// every view's index file (``View/verify()``: its trees, back-index ⇄ rows, and for a declarative view the
    /// rows against a fresh map). An index file that does not open is a problem too.
    ///
    /// ```swift
    /// let problems = try db.verify()
    /// precondition(problems.isEmpty, "\(problems)")
    /// ```
    ///
    /// - Throws: `.invalidArgument` when the database is closed; `.ioError` when the views directory cannot be
    ///   listed.
    public func verify() throws -> [SofaError] {
        var problems: [SofaError]
        do {
            problems = documents.verify(try readSnapshot())
        } catch let error as SofaError where error.code == .corruption {
            problems = [error]  // the newest commit's log chain does not read (FORMAT.md §10.1.7)
        }
        for name in try viewNames {
            // A view registered but never indexed has no file to check (and verify creates none).
            guard let view = existingView(named: name), access(view.indexPath, F_OK) == 0 else { continue }
            do {
                problems += try view.verify()
            } catch let error as SofaError where error.code == .corruption || error.code == .unsupportedFormat {
                problems.append(error)
            }
        }
        return problems
    }
}
