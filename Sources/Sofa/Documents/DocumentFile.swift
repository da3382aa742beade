import SofaStorage
import Synchronization

/// The document file, `NAME.sofa/docs`: one ``StorageFile`` holding document bodies and two trees
/// (FORMAT.md §10.1).
///
/// - **by-ID** (root 0): UTF-8 document ID → ``DocumentRecord`` (sequence, revision tree, leaf bodies). Its
///   reducer counts live, deleted and conflicted documents, so counts are O(1).
/// - **by-sequence** (root 1): 8-byte big-endian sequence → document ID, one entry per document at its latest
///   sequence: the changes feed in order.
///
/// Bodies up to ``inlineBodyLimit`` bytes live inside their by-ID entry, where the leaf node's LZ4 compression
/// sees many bodies at once (field names repeat from document to document); larger ones are value chunks of
/// their own. Commit metadata: a version byte and the last sequence.
///
/// A commit of a few documents does not rewrite the trees: it appends a log record of its changes, and the
/// records since the trees were last rewritten are the commit's ``PendingChanges``, which readers see on top
/// of the trees (FORMAT.md §10.1.7, `CommitLog.swift`); a larger commit folds them into the trees.
///
/// Readers take a ``DocumentSnapshot`` of a commit and never wait. The writer (serialized by ``Database``)
/// works in a ``WriteBatch``: an in-memory overlay of changed documents over the pending changes and working
/// copies of the trees, flushed into the trees when it grows and at commit (or logged, when small).
/// Invariant (of the trees with the pending changes on top): every by-ID entry's sequence has exactly one
/// by-sequence entry naming that document, and no other by-sequence entry exists (``verify()`` checks it).
final class DocumentFile: @unchecked Sendable {
    /// The file kind recorded in the docs file header: "DOCS" read as a little-endian u32.
    static let fileKind: UInt32 = 0x5343_4F44
    /// The newest commit metadata format: 2 adds the commit log (FORMAT.md §10.1.4); a commit without a log
    /// is written as version 1, which every earlier build reads.
    static let metadataVersion: UInt8 = 2
    /// The metadata format of a commit without a log: what builds before the log wrote, and still read.
    static let metadataVersionWithoutLog: UInt8 = 1
    /// The longest document ID, in UTF-8 bytes.
    static let maximumIDLength = 1024
    /// The uncompressed size inner nodes of both trees are filled to (leaves: 8 KiB by-ID, 4 KiB by-sequence).
    static let innerNodeSize = 2048
    /// The largest serialized body accepted (64 MiB).
    static let maximumBodySize = 64 << 20

    /// The file; replaced (under the database's write lock) when compaction swaps in a rewritten file.
    /// Snapshots keep the file they were taken from, so readers finish on the old mapping.
    private let current: Lock<StorageFile>
    var storage: StorageFile { current.file }
    var path: String { storage.path }
    let revisionDepth: Int
    /// Bodies up to this many bytes are stored inside the by-ID entry, larger ones as value chunks.
    let inlineBodyLimit: Int
    let byIDConfiguration: BTreeConfiguration
    let bySequenceConfiguration: BTreeConfiguration

    /// The batch in progress. Touched only by the thread holding the database's write lock.
    var batch: WriteBatch?
    /// The last batch's overlay storage, emptied, for the next batch (``WriteBatch/takeStorage()``). Touched only
    /// under the database's write lock.
    var spareChanges = WriteBatch.Changes()
    /// The buffer ``idBytes(_:)`` fills. Touched only under the database's write lock, by one call at a time:
    /// exclusivity unchecked, as the batch overlay's state is (its dynamic checks cost more than the buffer saves).
    @exclusivity(unchecked) private var idBuffer: [UInt8] = []
    /// The by-ID leaves the open edges of the last committed batch wrote, not cached as written, and the snapshot of
    /// that commit: the next commit reads them into the node cache (``startNodeCacheFill()``). Touched only
    /// under the database's write lock.
    var cacheFill: (leaves: [UInt64], snapshot: DocumentSnapshot)?
    /// The longest log chain commits make before folding it (FORMAT.md §10.1.7): the format's bound, which
    /// tests lower to fold often. Touched only under the database's write lock.
    var logLengthLimit = PendingChanges.maximumLength
    /// The snapshot of the newest commit readers last asked for (``committedSnapshot()``). Kept here, not with
    /// the file: the snapshot holds its file, and a file holding it back would never be released.
    private let newestSnapshot = Lock<DocumentSnapshot?>(nil)

    /// `id`'s UTF-8 bytes for an edit, in a buffer the file keeps (under the database's write lock): allocating
    /// and freeing an array for each put's ID was ~300 instructions of it (callgrind, D1). The array returned
    /// shares that buffer; one that outlives the edit (an out-of-order overlay's index keeps its IDs) makes the
    /// next call copy on write instead of overwriting it.
    func idBytes(_ id: String) -> [UInt8] {
        var text = id
        text.withUTF8 { idBuffer.replaceSubrange(idBuffer.startIndex..<idBuffer.endIndex, with: $0) }
        return idBuffer
    }

    /// LZ4's acceleration for the document file's appends (its leaves hold the bodies). 2 took 8 % of the
    /// instructions off a pipelined batch's flush thread for 3 % more file after D1 (BENCHMARKS.md §3, "D1, eighth
    /// round"); 4, once the overlay stopped allocating per document, took D1's CPU from 3.02 to 2.70 µs per
    /// document, LZ4 then being over half of the flush thread's work, for 5 % more file ("D1, twelfth round").
    /// Compaction's bulk load keeps acceleration 1.
    static let compressionAcceleration: Int32 = 4

    /// `options` as the document file opens its storage with them: its file kind and LZ4 acceleration.
    static func storageOptions(_ options: StorageOptions) -> StorageOptions {
        var storageOptions = options
        storageOptions.fileKind = DocumentFile.fileKind
        storageOptions.compressionAcceleration = DocumentFile.compressionAcceleration
        return storageOptions
    }

    init(path: String, options: StorageOptions, revisionDepth: Int, inlineBodyLimit: Int = 1024,
         system: any SystemCalls) throws {
        let storage = try StorageFile(path: path, options: DocumentFile.storageOptions(options), system: system)
        current = Lock(storage)
        self.revisionDepth = revisionDepth
        self.inlineBodyLimit = inlineBodyLimit
        // Inner nodes of 2 KiB: a single-document commit rewrites one leaf and one inner node per level of each
        // tree, and at 1M documents 2 KiB inner nodes make that path 8 KiB instead of 13 (BENCHMARKS.md §1.x).
        // By-sequence leaves of 2 KiB too: every commit rewrites the last one (sequences only grow), and halving
        // it took 9 % of a single-document commit's instructions, with the same file size after a bulk load
        // (BENCHMARKS.md §3, "D2, fourth round").
        byIDConfiguration = BTreeConfiguration(nodeSize: 8192, innerNodeSize: DocumentFile.innerNodeSize,
                                               compress: true, reducer: DocumentCountReducer())
        bySequenceConfiguration = BTreeConfiguration(nodeSize: 2048, innerNodeSize: DocumentFile.innerNodeSize,
                                                     compress: true)
        // Reject unreadable metadata now rather than on the first read.
        _ = try DocumentFile.lastSequence(in: storage.latestCommit, path: path)
    }

    /// The newest commit as a snapshot: made once per commit and kept here (``newestSnapshot``), so a read costs
    /// a few lock round trips instead of copying the commit header and decoding its metadata (~1,000
    /// instructions of a `document(id:)`'s ~5,700 besides parsing).
    func committedSnapshot() throws -> DocumentSnapshot {
        let storage = self.storage  // one file for the whole snapshot, even if compaction swaps it meanwhile
        let newest = storage.latestCommitOffset
        if let cached = newestSnapshot.withLock({ $0 }), cached.storage === storage, cached.commitOffset == newest {
            return cached
        }
        let commit = storage.latestCommit
        let metadata = try DocumentFile.metadata(in: commit, path: storage.path)
        // Read once per commit this process did not make itself (opening, compaction): the writer hands its
        // own commits' snapshots over with their pending changes (``install(_:)``).
        let pending = try PendingChanges.read(metadata, commit: commit, storage: storage)
        return install(commit, of: storage, pending: pending, lastSequence: metadata.lastSequence)
    }

    /// Makes the snapshot of `commit` of `storage`, with `pending` and `lastSequence` (what its metadata says),
    /// the newest commit's (``install(_:)``) and returns it.
    func install(_ commit: CommitHeader, of storage: StorageFile, pending: PendingChanges,
                 lastSequence: UInt64) -> DocumentSnapshot {
        let snapshot = DocumentSnapshot(
            storage: storage,
            byID: BTree(file: storage, commit: commit, index: 0, configuration: byIDConfiguration),
            bySequence: BTree(file: storage, commit: commit, index: 1, configuration: bySequenceConfiguration),
            pending: pending, lastSequence: lastSequence, commitOffset: commit.offset)
        install(snapshot)
        return snapshot
    }

    /// Makes `snapshot` the newest commit's snapshot unless one of a newer commit of the same file is kept
    /// already (a reader that built its snapshot while the writer committed must not replace the writer's, or
    /// the next read would read the log chain back from the file).
    func install(_ snapshot: DocumentSnapshot) {
        newestSnapshot.withLock { cached in
            if let cached, cached.storage === snapshot.storage, cached.commitOffset > snapshot.commitOffset { return }
            cached = snapshot
        }
    }

    // MARK: - Commit metadata (FORMAT.md §10.1, "Commit metadata")

    /// What a docs commit's metadata says.
    struct Metadata {
        /// The highest sequence assigned so far.
        var lastSequence: UInt64
        /// The newest log record of the commit's chain (FORMAT.md §10.1.7), 0 when the trees hold everything.
        var logHead: UInt64 = 0
        /// Records in the chain.
        var logLength = 0
    }

    /// Version 1 when the trees hold everything (what builds without the log read), else version 2.
    static func encodeMetadata(lastSequence: UInt64, logHead: UInt64 = 0, logLength: Int = 0) -> [UInt8] {
        var out: [UInt8] = [logHead == 0 ? metadataVersionWithoutLog : metadataVersion]
        out.appendVarint(lastSequence)
        if logHead != 0 {
            out.appendVarint(logHead)
            out.appendVarint(UInt64(logLength))
        }
        return out
    }

    /// The last sequence recorded in `commit`; 0 for the empty first commit of a new file.
    static func lastSequence(in commit: CommitHeader, path: String) throws -> UInt64 {
        try metadata(in: commit, path: path).lastSequence
    }

    /// The metadata of `commit` (the empty first commit of a new file: last sequence 0, no log).
    static func metadata(in commit: CommitHeader, path: String) throws -> Metadata {
        if commit.metadata.isEmpty && commit.roots.isEmpty { return Metadata(lastSequence: 0) }
        return try commit.metadata.withUnsafeBytes { bytes in
            var r = ByteReader(bytes, fileOffset: commit.offset, path: path)
            let version = try r.readByte()
            guard version == metadataVersionWithoutLog || version == metadataVersion else {
                throw SofaError(.unsupportedFormat, "document metadata version \(version); this build reads "
                                + "\(metadataVersionWithoutLog) and \(metadataVersion)",
                                path: path, offset: Int(clamping: commit.offset))
            }
            var metadata = Metadata(lastSequence: try r.readVarint())
            if version == metadataVersion {
                metadata.logHead = try r.readVarint()
                let length = try r.readVarint()
                guard metadata.logHead != 0, length > 0, length <= UInt64(PendingChanges.maximumLength) else {
                    throw r.corruption("document file commit names a log chain of \(length) records at "
                                       + "\(metadata.logHead)")
                }
                metadata.logLength = Int(length)
            }
            guard r.isAtEnd, commit.roots.count == 2 else {
                throw r.corruption("document file commit has malformed metadata or \(commit.roots.count) roots")
            }
            return metadata
        }
    }

    /// The by-sequence key of `sequence`: 8 bytes big-endian, so byte order is numeric order.
    static func sequenceKey(_ sequence: UInt64) -> [UInt8] {
        var key: [UInt8] = []
        key.reserveCapacity(8)
        key.appendBigEndian(sequence)
        return key
    }

    static func sequence(fromKey key: UnsafeRawBufferPointer, path: String) throws -> UInt64 {
        guard key.count == 8 else {
            throw SofaError(.corruption, "by-sequence key of \(key.count) bytes; 8 expected", path: path)
        }
        return UInt64(bigEndian: key.loadUnaligned(as: UInt64.self))
    }

    /// Makes `file` the document file for every later read and write (compaction). The old file is not closed:
    /// snapshots taken from it keep reading it until they are released.
    func replaceStorage(with file: StorageFile) {
        current.withLock { $0 = file }
        cacheFill = nil  // leaves of the old file
        newestSnapshot.withLock { $0 = nil }  // the old file goes once the last reader's snapshot does
    }

    func close() throws {
        cacheFill = nil
        newestSnapshot.withLock { $0 = nil }
        try storage.close()
    }
}

/// One consistent view of the document file: both trees, the commit log's pending changes on top of them
/// (FORMAT.md §10.1.7; ``CommitLog.swift`` has the readers that merge the two), and the last sequence of one
/// commit (or, for the writer inside a batch, of its working state). A class: readers share the newest commit's
/// (see ``DocumentFile/committedSnapshot()``), and passing it around costs one reference count.
final class DocumentSnapshot: Sendable {
    let storage: StorageFile
    /// The trees as of the last commit that rewrote them. Read them through the merging readers (``record(_:)``,
    /// ``forEachByID(in:descending:_:)``, ``forEachBySequence(in:descending:_:)``…) unless ``pending`` is empty.
    let byID: BTree
    let bySequence: BTree
    /// The changes committed since, by log records.
    let pending: PendingChanges
    let lastSequence: UInt64
    /// The offset of the commit header the snapshot was taken from; 0 for a writer's working state.
    let commitOffset: UInt64

    init(storage: StorageFile, byID: BTree, bySequence: BTree, pending: PendingChanges, lastSequence: UInt64,
         commitOffset: UInt64 = 0) {
        self.storage = storage
        self.byID = byID
        self.bySequence = bySequence
        self.pending = pending
        self.lastSequence = lastSequence
        self.commitOffset = commitOffset
    }

    var path: String { storage.path }

    /// Live, deleted and conflicted documents: the by-ID tree's stored counts, corrected by the pending changes.
    var counts: DocumentCountReducer.Counts {
        var c = DocumentCountReducer.decode(byID.reduction)
        guard !pending.isEmpty else { return c }
        // Wrapping, as the reducer sums: on a damaged file (a log record whose stored flags disagree with the
        // trees) the counts are wrong, never a trap; verify reports the disagreement.
        c.live &+= UInt64(bitPattern: pending.liveDelta)
        c.deleted &+= UInt64(bitPattern: pending.deletedDelta)
        c.conflicted &+= UInt64(bitPattern: pending.conflictedDelta)
        return c
    }

    /// Documents with a by-ID entry, deleted ones included.
    var documentRows: UInt64 { byID.rowCount + pending.addedRows }

    /// The by-ID entry of `id`, decoded; its leaf is left out of the node cache when `cachingLeaf` is false
    /// (a view update's scattered lookups).
    func record(_ id: [UInt8], cachingLeaf: Bool = true) throws -> DocumentRecord? {
        try id.withUnsafeBytes { key in
            try withEntry(for: key, cachingLeaf: cachingLeaf) { entry in
                try entry.map { try DocumentRecord(decoding: $0, path: path) }
            }
        }
    }

    /// The JSON of a stored body.
    func body(_ stored: StoredBody) throws -> JSON {
        try body(stored, leading: [])!  // no leading member, so no name can collide
    }

    /// The body `stored` parsed as an object with `leading` members first (the indexer's `_id` and `_rev`); `nil`
    /// when the body has a member of the same name as one of them.
    func body(_ stored: StoredBody, leading: [(String, JSON)]) throws -> JSON? {
        switch stored {
        case .empty: return .object(JSONObject(uncheckedUniqueKeys: leading.map(\.0), values: leading.map(\.1)))
        case .inline(let bytes):
            return try bytes.withUnsafeBytes {
                try DocumentSnapshot.parseBody($0, leading: leading, path: path, offset: 0)
            }
        case .chunk(let offset):
            let chunk = try storage.readChunk(at: offset, kind: .value, limit: byID.limit)
            return try chunk.withUnsafeBytes {
                try DocumentSnapshot.parseBody($0, leading: leading, path: path, offset: offset)
            }
        }
    }

    /// ``parseBody(_:path:offset:)`` with `leading` members first; `nil` when the body has one of their names.
    static func parseBody(_ bytes: UnsafeRawBufferPointer, leading: [(String, JSON)], path: String,
                          offset: UInt64) throws -> JSON? {
        let value: JSON?
        do {
            value = try JSON.parsingObject(bytes, leading: leading)
        } catch let error as SofaError {
            throw SofaError(.corruption, "stored document body is not valid JSON: \(error.message)", path: path,
                            offset: Int(clamping: offset))
        }
        guard let value else { return nil }
        guard case .object = value else {
            throw SofaError(.corruption, "stored document body is a \(value.typeName), not an object", path: path,
                            offset: Int(clamping: offset))
        }
        return value
    }

    static func parseBody(_ bytes: [UInt8], path: String) throws -> JSON {
        try bytes.withUnsafeBytes { try parseBody($0, path: path, offset: 0) }
    }

    /// Parses stored body bytes; anything but a JSON object is corruption (a put never stores one).
    static func parseBody(_ bytes: UnsafeRawBufferPointer, path: String, offset: UInt64) throws -> JSON {
        try parseBody(bytes, leading: [], path: path, offset: offset)!  // no leading member to collide with
    }

    /// The document `id` at its winning revision (or at leaf `revision`), nil when absent.
    func document(id: String, revision: RevisionID? = nil) throws -> Document? {
        var key = id
        return try key.withUTF8 { utf8 in
            try withEntry(for: UnsafeRawBufferPointer(utf8)) { entry in
                try entry.map { try document(id: id, entry: $0, revision: revision) } ?? nil
            }
        }
    }

    /// Document `id` at its winner (or at leaf `revision`) from its by-ID entry, read in place: the entry's
    /// revisions are decoded without their bodies, and the one body needed is parsed from the entry's bytes
    /// (or read from its value chunk).
    func document(id: String, entry: UnsafeRawBufferPointer, revision: RevisionID?) throws -> Document? {
        var bodyRange: Range<Int>?
        let record = try DocumentRecord(decoding: entry, path: path, bodyOf: revision, at: &bodyRange)
        let index = revision.map { record.tree.index(of: $0) } ?? 0
        guard let index, record.tree.revisions[index].isLeaf else { return nil }
        let body = try bodyRange.map { try DocumentSnapshot.parseBody(UnsafeRawBufferPointer(rebasing: entry[$0]),
                                                                       path: path, offset: 0) }
            ?? self.body(record.tree.revisions[index].body)
        return Document(id: id, record: record, index: index, body: body)
    }

    /// Document `id` of `record` at its winner (or at leaf `revision`), its body read from this snapshot.
    func document(id: String, record: DocumentRecord, revision: RevisionID?) throws -> Document? {
        let index = revision.map { record.tree.index(of: $0) } ?? 0
        guard let index, record.tree.revisions[index].isLeaf else { return nil }
        return try Document(id: id, record: record, index: index, body: body(record.tree.revisions[index].body))
    }
}
