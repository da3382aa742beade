#if canImport(Glibc)
import Glibc
#endif
import SofaStorage
import Synchronization

/// What a view index's commit metadata records (FORMAT.md §10.2, "Header").
struct ViewHeader: Equatable, Sendable {
    static let formatVersion: UInt8 = 2
    /// At most this many group levels are materialized (each costs every update a range reduce per touched group).
    static let maxGroupLevels = 4

    /// The database sequence the index reflects.
    var lastSequence: UInt64 = 0
    /// `ucol_getVersion` of the collator that made the row keys.
    var collatorVersion: [UInt8] = CollationKey.collatorVersion
    /// The map/reduce version string the index was built with.
    var mapVersion: String = ""
    /// ``Reduce/kind`` of the reduce the stored reductions were made with; 0 for none.
    var reduceKind: UInt8 = 0
    /// A declarative view's definition (packed JSON); empty for a view defined in code.
    var definition: [UInt8] = []
    /// The group levels whose aggregates the groups tree holds (FORMAT.md §10.2.6), ascending.
    var groupLevels: [UInt8] = []

    func encoded() -> [UInt8] {
        var out: [UInt8] = [ViewHeader.formatVersion]
        out.appendVarint(lastSequence)
        out.appendVarint(UInt64(collatorVersion.count))
        out.append(contentsOf: collatorVersion)
        let version = Array(mapVersion.utf8)
        out.appendVarint(UInt64(version.count))
        out.append(contentsOf: version)
        out.append(reduceKind)
        out.appendVarint(UInt64(definition.count))
        out.append(contentsOf: definition)
        out.appendVarint(UInt64(groupLevels.count))
        out.append(contentsOf: groupLevels)
        return out
    }

    init() {}

    init(decoding commit: CommitHeader, path: String) throws {
        // A new file's first commit is empty: an index of nothing.
        if commit.metadata.isEmpty && commit.roots.isEmpty { return }
        self = try commit.metadata.withUnsafeBytes { bytes in
            var r = ByteReader(bytes, fileOffset: commit.offset, path: path)
            let version = try r.readByte()
            guard version == 1 || version == ViewHeader.formatVersion else {
                throw SofaError(.unsupportedFormat, "view index version \(version); this build reads 1 and 2",
                                path: path, offset: Int(clamping: commit.offset))
            }
            var h = ViewHeader()
            h.lastSequence = try r.readVarint()
            h.collatorVersion = Array(try r.readLengthPrefixed())
            h.mapVersion = String(decoding: try r.readLengthPrefixed(), as: UTF8.self)
            h.reduceKind = try r.readByte()
            h.definition = Array(try r.readLengthPrefixed())
            if version >= 2 {
                let count = try r.readLength(limit: ViewHeader.maxGroupLevels)
                for _ in 0..<count {
                    let level = try r.readByte()
                    guard level > 0, level > (h.groupLevels.last ?? 0) else {
                        throw r.corruption("view index header lists group levels out of order or level 0")
                    }
                    h.groupLevels.append(level)
                }
            }
            guard r.isAtEnd, commit.roots.count == (version == 1 ? 2 : 3) else {
                throw r.corruption("view index commit has malformed metadata or \(commit.roots.count) roots")
            }
            return h
        }
    }
}

/// One consistent state of a view index: the trees and the header of one commit.
struct ViewSnapshot: Sendable {
    /// Where the commit's header is: identifies the commit.
    let commitOffset: UInt64
    let rows: BTree
    let backIndex: BTree
    /// The group aggregates of the header's ``ViewHeader/groupLevels`` (empty for a version 1 file).
    let groups: BTree
    let header: ViewHeader
}

/// A view's index file, `NAME.sofa/views/NAME` (FORMAT.md §10.2): a ``StorageFile`` holding
///
/// - the **rows** tree (root 0): ``RowKey`` → ``RowValue``, in collation order of the emitted keys, then doc
///   ID; every inner pointer carries its subtree's row count and reduction (``ViewReducer``);
/// - the **back-index** (root 1): raw doc ID → ``BackIndexEntry``, the collation keys the document emitted;
/// - the **groups** tree (root 2): per-level group aggregates (``GroupAggregate``, `ViewIndex+Groups.swift`);
/// - commit metadata: the ``ViewHeader``.
///
/// One writer at a time (``View`` serializes updates); readers take a ``snapshot()`` and never wait.
final class ViewIndex: @unchecked Sendable {
    /// "VIEW" read as a little-endian u32.
    static let fileKind: UInt32 = 0x5745_4956

    let storage: StorageFile
    var path: String { storage.path }
    /// Uncompressed, like the rows tree: an incremental update looks up every changed document's entry, and
    /// decompressing a 4 KiB leaf for one entry was a third of that lookup (FORMAT.md §10.2).
    let backConfiguration = BTreeConfiguration(nodeSize: 4096, compress: false)
    /// The groups tree keeps entry counts only.
    let groupsConfiguration = BTreeConfiguration(nodeSize: 4096, compress: true)
    /// The reduce the stored reductions are made with; replaced when a view registers its functions again.
    private let currentReduce: Lock<Reduce?>

    var reduce: Reduce? {
        get { currentReduce.withLock { $0 } }
        set {
            currentReduce.withLock { $0 = newValue }
            cachedSnapshot.withLock { $0 = nil }
        }
    }
    /// The snapshot of the newest commit, kept so that queries do not decode the header again each time.
    private let cachedSnapshot = Lock<ViewSnapshot?>(nil)

    var rowsConfiguration: BTreeConfiguration {
        BTreeConfiguration(nodeSize: 4096, compress: false, reducer: reduce.map { ViewReducer(reduce: $0) })
    }

    /// Opens (or creates) the index at `path`, whose stored reductions are `reduce`'s — or, when `reduce` is
    /// nil, the built-in (or declarative) reduce the header names. Every file call goes through `system` (the
    /// database's: fault injection in tests).
    init(path: String, options: StorageOptions, reduce: Reduce?, system: any SystemCalls = PosixSystemCalls()) throws {
        var options = options
        options.fileKind = ViewIndex.fileKind
        storage = try StorageFile(path: path, options: options, system: system)
        let header = try ViewHeader(decoding: storage.latestCommit, path: path)
        currentReduce = Lock(reduce ?? Reduce.builtIn(kind: header.reduceKind))
    }

    /// The newest commit's header.
    var header: ViewHeader {
        get throws { try snapshot().header }
    }

    /// The newest commit as a snapshot.
    func snapshot() throws -> ViewSnapshot {
        let commit = storage.latestCommit
        if let cached = cachedSnapshot.withLock({ $0 }), cached.commitOffset == commit.offset { return cached }
        let snapshot = ViewSnapshot(
            commitOffset: commit.offset,
            rows: BTree(file: storage, commit: commit, index: 0, configuration: rowsConfiguration),
            backIndex: BTree(file: storage, commit: commit, index: 1, configuration: backConfiguration),
            groups: BTree(file: storage, commit: commit, index: 2, configuration: groupsConfiguration),
            header: try ViewHeader(decoding: commit, path: path))
        cachedSnapshot.withLock { $0 = snapshot }
        return snapshot
    }

    /// Commits `rows`, `backIndex` and `groups` with `header`. Without `groups` the header lists no group
    /// level: aggregates are dropped (they are built again on demand), never left stale.
    func commit(rows: BTree, backIndex: BTree, groups: BTree? = nil, header: ViewHeader) throws {
        var header = header
        if groups == nil { header.groupLevels = [] }
        try storage.commit(roots: [rows.root, backIndex.root, groups?.root], metadata: header.encoded())
    }

    func close() throws { try storage.close() }

    /// Removes the file at `path` through `system`, then syncs its directory (best effort); a missing file is
    /// not an error.
    static func removeFile(_ path: String, system: any SystemCalls) throws {
        do {
            try system.unlink(path)
        } catch where error.errno == ENOENT {
            // Already gone.
        } catch {
            throw SofaError(.ioError, "cannot remove the view index: \(String(cString: strerror(error.errno)))",
                            path: path)
        }
        // Best effort: if this sync fails, the removal becomes durable with the directory's next sync.
        try? system.fsyncDirectory(StorageFile.directoryName(of: path))
    }
}
