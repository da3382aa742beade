import Dispatch
import SofaStorage

/// The writer's state between commits: working copies of both trees (holding flushed, uncommitted nodes)
/// and an overlay of documents changed since the last flush.
///
/// Documents are changed in the overlay, so a batch of N puts touches each tree once, in one sorted pass
/// (``BTree/modified(by:)``), instead of rewriting a path per put. The overlay is flushed into the working
/// trees when it grows past ``flushThreshold`` entries or ``flushBytes``, and at commit — unless the batch is small
/// enough to commit as a log record (``logEntries(lengthLimit:)``, FORMAT.md §10.1.7). Nothing is visible to
/// other threads until ``DocumentFile/commitBatch()`` publishes a commit; a rollback discards every chunk
/// appended since the last commit.
///
/// **Pipelining.** Once the overlay holds ``pipelineChunk`` documents, it is handed as a ``FlushJob`` to another
/// thread, which applies it to the working trees (the encoded records into leaves, LZ4, the appends) and, with
/// durability `.full`, writes what it appended — syncing it too once the batch's data reaches
/// ``StorageFile/earlySyncMinimum``, or when the zero tail runs short
/// (``StorageFile/flushAppendedStartingSync(minimum:)``) — while the writer goes on putting into a fresh
/// overlay: a large batch's flush and most of its sync run beside the puts, and at commit only the last chunk
/// is left. Chunks of new IDs in ascending order (a bulk load) go onto the trees' right edges, held open from
/// chunk to chunk (``edges``, ``TreeAppender``) and written at commit, or before a read or chunk that needs the
/// whole trees. At most one job is in flight. While it is, that thread owns the working trees
/// and the storage file's writer state: the writer touches neither until it has joined the job (``join()``) —
/// every read that must consult the trees, every append of its own (a body chunk), the next hand-off, the
/// commit and the rollback join first. A read of an ID above every ID stored or in flight answers without
/// waiting (bulk loads). A job's storage error poisons the batch as a flush's does; the writer meets it when
/// it joins.
final class WriteBatch {
    struct Pending {
        var record: DocumentRecord
        /// The document's sequence in the working by-sequence tree, whose entry the flush removes.
        var storedSequence: UInt64?
        /// The document flags of its entry in the working by-ID tree (0 when it has none): a log record carries
        /// them so that readers can correct the tree's counts (FORMAT.md §10.1.7).
        var storedFlags: UInt8 = 0
    }

    /// A document's state as the batch sees it: its record, and its sequence and flags in the working trees.
    typealias Current = (record: DocumentRecord, storedSequence: UInt64?, storedFlags: UInt8)

    /// A chunk of the overlay being applied to the working trees on another thread. Until ``completion`` is waited
    /// for, only that thread touches its trees, edges and `error`; the writer reads them after the wait.
    final class FlushJob: FlushWorkerJob, @unchecked Sendable {
        /// Handed back to the writer when it joins the job (``takeChanges()``): its next overlay reuses their
        /// storage.
        private(set) var changes: Changes
        let sorted: Bool
        /// The log's pending changes the chunk writes into the trees too (the batch's first chunk only).
        private(set) var logged: [LogEntry]
        var byID: BTree
        var bySequence: BTree
        /// The trees' open right edges, passed from chunk to chunk while chunks only append (``appends``).
        var edges: OpenEdges?
        /// Whether the chunk only appends to both trees (``WriteBatch/appendsToTrees(_:sorted:above:logged:)``):
        /// it goes to the open edges. Any other chunk finishes the edges first, then is applied by a batch modify.
        let appends: Bool
        var error: (any Error)?
        /// The largest ID in the by-ID tree once the job is applied: the larger of the tree's before and the
        /// job's own largest (a flush only puts by-ID entries).
        let largestID: [UInt8]?
        /// Whether the job is done, for the writer joining it.
        let completion = JobCompletion()

        init(changes: Changes, sorted: Bool, logged: [LogEntry], byID: BTree, bySequence: BTree, edges: OpenEdges?,
             appends: Bool, largestID: [UInt8]?) {
            self.changes = changes
            self.sorted = sorted
            self.logged = logged
            self.byID = byID
            self.bySequence = bySequence
            self.edges = edges
            self.appends = appends
            self.largestID = largestID
        }

        /// Hands the chunk's changes back to the writer, and drops the job's reference to the edges the writer
        /// took over.
        func takeChanges() -> Changes {
            defer {
                changes = Changes()
                logged = []
                edges = nil
            }
            return changes
        }

        /// Applies the chunk (on the flush thread).
        func run() {
            do {
                if appends {
                    if edges == nil { edges = try OpenEdges(resuming: byID, bySequence) }
                    try WriteBatch.append(changes, to: edges!)
                } else {
                    if let open = edges {
                        edges = nil
                        (byID, bySequence) = try open.finish()
                    }
                    (byID, bySequence) = try WriteBatch.apply(WriteBatch.actions(for: changes, sorted: sorted,
                                                                                 logged: logged),
                                                              byID: byID, bySequence: bySequence)
                }
                // The chunk's nodes go to the file now, beside the writer's next puts (and to the disk, once the
                // batch's data is large enough): the commit syncs the rest.
                try byID.file.flushAppendedStartingSync()
            } catch {
                self.error = error
            }
        }
    }

    /// The working trees. While ``edges`` is set they lack the rows appended to its edges: ``finishEdges()``
    /// completes them, and everything that reads or commits them finishes the edges first.
    private(set) var byID: BTree
    private(set) var bySequence: BTree
    /// The working trees' right edges, held open while the batch's chunks only append to them (a bulk load of
    /// new IDs in order): each chunk then writes only the nodes it fills, and the edges are written when the
    /// batch flushes at commit, a read needs the trees, or a chunk that does not append comes (BENCHMARKS.md §3,
    /// "D1, tenth round"). Owned like the trees: by the flush thread while a chunk is in flight.
    private var edges: OpenEdges?
    /// The by-ID leaves finished edges wrote (``OpenEdges/writtenLeaves``), for the commit to hand to the next
    /// one, which reads them into the node cache. Emptied by a batch modify, which may have rewritten any of them.
    private(set) var writtenLeaves: [UInt64] = []
    /// The commit log's pending changes the batch started from, consulted after the overlay and before the
    /// trees. The first flush or hand-off writes them into the trees with the overlay (``unloggedBase()``,
    /// as they are encoded): from then on the batch's commit rewrites the trees instead of adding a log record.
    private(set) var base: PendingChanges
    /// Whether the batch has changed the working trees (flushed or handed off a chunk).
    private(set) var touchedTrees = false
    /// The last sequence of the commit the batch started from.
    let startSequence: UInt64
    /// The storage file's ``StorageFile/discardCount`` when the batch began: if it moved, a failed write (met
    /// by a read whose error the caller may have ignored) discarded chunks the working trees point at, and the
    /// batch must not commit.
    let discardsAtStart: Int
    var lastSequence: UInt64
    /// The changed documents in first-write order with their latest state, and whether that order is
    /// ascending by ID (bulk loads usually are), so a flush sorts only when it must and looks nothing up.
    ///
    /// Exclusivity unchecked here and on the overlay's other state: only the writer's thread touches it, never
    /// overlapping its own accesses, and the dynamic checks were ~380 instructions per put (callgrind, D1).
    @exclusivity(unchecked) private(set) var changes = Changes()
    /// The storage of the last chunk's changes, emptied, for the overlay after the next hand-off.
    private var spare = Changes()
    @exclusivity(unchecked) private(set) var changesAreSorted = true
    /// While `changes` is unsorted, the index of each of its documents by UTF-8 ID (bytes, not `String`:
    /// Swift's `String` equality is canonical equivalence, and two IDs that differ in bytes are different
    /// documents). While it is sorted the index is empty: an ID above the last is new (one comparison, the
    /// bulk load's case), any other is found by binary search — no hashing per put.
    @exclusivity(unchecked) private var index: [DocumentKey: Int] = [:]
    /// Whether every ID in the (sorted, non-empty) overlay was above every ID stored or in flight when it was
    /// added. The trees gain IDs only from the overlay and the log's pending changes, both at a flush or hand-off,
    /// which empties the overlay, so it stays so; then an ID above the overlay's last and not in the log
    /// (``record(_:forEdit:)`` looks there first) is new with one comparison, and none against the trees (D1's
    /// lookups).
    @exclusivity(unchecked) private var overlayAboveTrees = false
    /// Whether the last ``record(_:forEdit:)`` found its ID absent (not in the log either) and above every ID in
    /// the overlay, stored or in flight: the save that follows (``setPending(_:_:absent:)``) appends it in order
    /// without comparing. Cleared by a flush and a hand-off, which empty the overlay.
    @exclusivity(unchecked) private var lastMissAboveAll = false
    @exclusivity(unchecked) var pendingBytes = 0
    /// Counts the changes to what a flush encodes (the overlay, and the log's pending changes it takes along), so
    /// that actions encoded ahead of a flush are known to match what it would encode (``EncodedOverlay``).
    @exclusivity(unchecked) private var overlayVersion = 0
    /// A storage error met inside the batch. Storage discards uncommitted chunks when a write fails, so the
    /// working trees may point at discarded nodes: such a batch can only be rolled back, even if the caller
    /// caught the error and went on.
    var failure: (any Error)?
    /// ``largestStoredID()`` of the tree rooted at `root`.
    private var largestID: (root: UInt64, key: [UInt8])?
    /// The chunk being applied on the flush thread, if any.
    private var inFlight: FlushJob?
    /// The flush thread chunks are handed to (``handOff()``), made at the first hand-off (a batch of a few
    /// documents never makes one); closed at commit (``closeWorker()``) or once the batch reads its trees.
    private var worker: FlushWorker?
    /// Whether a chunk failed on the flush thread: its documents left the overlay and never reached the trees.
    private var chunkLost = false
    /// Whether an edit inside the batch had to consult the trees (an ID not above every stored one): a batch
    /// of updates or scattered inserts, whose lookups would each wait for the chunk in flight, and whose chunks
    /// would each rewrite paths all over the trees. Such a batch is no longer pipelined (``handOff()``).
    private(set) var readsTrees = false
    /// Chunks handed to the flush thread so far (tests check that the pipeline ran).
    private(set) var chunksHandedOff = 0
    /// Chunks handed off that went to the trees' open edges (``FlushJob/appends``; tests check the edges were used).
    private(set) var chunksAppended = 0

    static let flushThreshold = 50_000
    static let flushBytes = 32 << 20
    /// Overlay documents from which a chunk is handed to the flush thread. The last chunk, flushed at commit on
    /// the writer's thread, is all that is left for the commit (232 of D1's 1,000 documents at 256). Before the
    /// trees' edges were held open (``edges``), each chunk also rewrote their right-edge paths (at 256 D1's file
    /// was 125 bytes per document instead of 110; BENCHMARKS.md §3, "D1, sixth round"); with them, 64 and 128
    /// were no faster than 256 ("D1, tenth round").
    static let pipelineChunk = 256
    /// A flush of at most this many documents (a single `put`'s commit; also a batch's last flush or one a read
    /// forces, when that few are left) writes its nodes uncompressed: LZ4 was ~40 % of a single-document
    /// commit's instructions (a by-ID leaf, a by-sequence leaf and their inner nodes, ~15 KiB raw), and the
    /// ~7 KiB it saved cost the sync almost nothing and the zero tail ~4 µs (FORMAT.md §10.1.1 and §10.1.2,
    /// BENCHMARKS.md §3, "D2, fourth round"). The raw paths stay well within a one-sync commit's 1 MiB. The
    /// last flush of a batch whose edges were held open writes them compressed, however few are left.
    static let rawFlushLimit = 4
    /// Where a commit reads the leaves the batch before it wrote into the node cache
    /// (``DocumentFile/startNodeCacheFill()``): serial, so fills queue behind each other instead of taking a
    /// thread each.
    static let fillQueue = DispatchQueue(label: "sofa.cache-fill", qos: .utility)

    /// - Parameter changes: empty storage for the overlay, kept from an earlier batch (``takeStorage()``); passed
    ///   as its only reference, so the overlay appends into it instead of copying it.
    init(byID: BTree, bySequence: BTree, base: PendingChanges, startSequence: UInt64, discardsAtStart: Int,
         changes: consuming Changes = Changes()) {
        assert(changes.isEmpty, "a batch's overlay starts empty")
        self.changes = changes
        self.discardsAtStart = discardsAtStart
        self.byID = byID
        self.bySequence = bySequence
        self.base = base
        self.startSequence = startSequence
        self.lastSequence = startSequence
    }

    /// The current state of `id`: the overlay, else the log's pending changes, else the working by-ID tree.
    /// `forEdit`: the lookup of an edit,
    /// which stops the pipeline when it has to consult the trees (``readsTrees``).
    ///
    /// A storage error here poisons the batch: the read may have flushed (and, failing, discarded) the batch's
    /// uncommitted nodes, so committing its trees afterwards would point at chunks that are gone.
    func record(_ id: [UInt8], forEdit: Bool = false) throws -> Current? {
        // After a failure the overlay's records may name body chunks that were discarded (and whose offsets a
        // later append reuses): no answer is right any more.
        if let failure { throw failure }
        lastMissAboveAll = false
        let aboveLast = changesAreSorted && isAboveLast(id)
        if !aboveLast, let i = position(of: id) {
            let state = try changes.state(at: i, path: byID.file.path)
            return (state.record, state.storedSequence, state.storedFlags)
        }
        if let i = base.index(of: id) {  // (empty once a chunk has been handed off)
            let e = base.entry(i)
            let record = try e.record.withUnsafeBytes { try DocumentRecord(decoding: $0, path: byID.file.path) }
            return (record, e.storedSequence, e.storedFlags)
        }
        if aboveLast && overlayAboveTrees && !changes.isEmpty {
            lastMissAboveAll = true
            return nil
        }
        if let job = inFlight {
            // Above every ID stored or in flight: absent, without waiting for the flush thread.
            if let largest = job.largestID, compareArrays(id, largest) > 0 {
                lastMissAboveAll = aboveLast
                return nil
            }
            join()
        }
        // A failed chunk's documents are in neither the overlay nor the trees.
        if let failure { throw failure }
        do {
            // Bulk loads mostly add IDs above every stored one: one comparison answers without a tree descent.
            guard let largest = try largestStoredID() else {
                lastMissAboveAll = aboveLast
                return nil
            }
            if compareArrays(id, largest) > 0 {
                lastMissAboveAll = aboveLast
                return nil
            }
            // Reads of the trees would wait for every chunk in flight: such a batch is flushed at commit. It hands
            // off no more chunks, so the flush thread need not wait for one (the chunk in flight was joined above).
            if forEdit && !readsTrees {
                readsTrees = true
                closeWorker()
            }
            guard let r = try snapshot(storage: byID.file).record(id) else { return nil }
            return (r, r.sequence, r.documentFlags)
        } catch {
            failure = failure ?? error
            throw error
        }
    }

    /// The largest ID in the working by-ID tree (an inner entry's key is its subtree's largest key, so the
    /// root's last key is the tree's), read once per tree. Not while a chunk is in flight.
    private func largestStoredID() throws -> [UInt8]? {
        if let edges { return edges.byID.largestKey }
        if let cached = largestID, cached.root == byID.root?.offset { return cached.key }
        guard let root = byID.root else { return nil }
        let node = try byID.node(at: root.offset)
        let key = Array(node.key(node.count - 1))
        largestID = (root.offset, key)
        return key
    }

    /// Reads of the working state (the writer's own thread only); waits for a chunk in flight and writes the
    /// trees' open edges.
    func snapshot(storage: StorageFile) throws -> DocumentSnapshot {
        join()
        try finishEdges()
        return DocumentSnapshot(storage: storage, byID: byID, bySequence: bySequence, pending: base,
                                lastSequence: lastSequence)
    }

    /// A snapshot that reads the bodies of records the batch found (``record(_:forEdit:)``), which needs neither
    /// tree: it waits for a chunk in flight (whose appends share the file's buffer) but leaves the edges open.
    /// Its trees are empty and its pending changes none, so it finds no document by itself.
    func bodyReader(storage: StorageFile) -> DocumentSnapshot {
        join()
        let none = { (tree: BTree) in
            BTree(file: storage, root: nil, configuration: tree.configuration, limit: StorageFile.unlimited)
        }
        return DocumentSnapshot(storage: storage, byID: none(byID), bySequence: none(bySequence), pending: .none,
                                lastSequence: lastSequence)
    }

    /// Lets the flush thread go (``FlushWorker/close()``): the batch hands off no more chunks. The commit calls it
    /// once it joined the last, so that a thread spinning for another does not hold a core through the commit.
    func closeWorker() {
        assert(inFlight == nil, "the flush worker closed with a chunk in flight")
        worker?.close()
    }

    deinit {
        worker?.close()  // a batch rolled back, or one that failed
    }

    /// Waits for the chunk in flight, if any, and takes the trees it made, or its error as the batch's failure,
    /// and the chunk's overlay storage, emptied, as ``spare`` for the next hand-off's overlay. Afterwards the
    /// writer owns the working trees and the storage file's writer state again.
    func join() {
        guard let job = inFlight else { return }
        job.completion.wait(spinning: worker?.spinning ?? false)
        inFlight = nil
        defer {
            // (After the trees and edges are taken: this drops the job's reference to the edges.)
            spare = job.takeChanges()
            spare.removeAll(keepingCapacity: true)
        }
        if let error = job.error {
            failure = failure ?? error
            chunkLost = true
            return
        }
        byID = job.byID
        bySequence = job.bySequence
        edges = job.edges
        // A job that does not append finishes the edges and then modifies the trees, which may rewrite any of
        // their leaves: the batch's leaves are left to readers.
        if !job.appends { writtenLeaves = [] }
        // (The tree an appending job leaves lacks the rows on its edges: its root is not the key's.)
        if !job.appends, let root = byID.root?.offset, let key = job.largestID { largestID = (root, key) }
    }

    /// Writes the working trees' open edges, if any, completing the trees (the writer's thread, no chunk in
    /// flight). Throws the batch's failure instead when it has one (the edges may point at discarded nodes); a
    /// failure here poisons the batch.
    func finishEdges() throws {
        guard let open = edges else { return }
        if let failure { throw failure }
        edges = nil
        do {
            (byID, bySequence) = try open.finish()
            writtenLeaves += open.writtenLeaves
        } catch {
            failure = failure ?? error
            throw error
        }
    }

    /// Hands the overlay to the flush thread as one chunk, after the chunk before it is done. Throws the
    /// batch's failure (this chunk's predecessor's, or an earlier one) instead when there is one.
    func handOff() throws {
        join()
        if let failure { throw failure }
        guard !changes.isEmpty else { return }
        let logged = unloggedBase()
        var largest: [UInt8]?
        do {
            largest = try largestStoredID()
        } catch {
            failure = error
            throw error
        }
        // The overlay's largest ID: the last when in order, else found by a pass.
        var topIndex = changes.count - 1
        if !changesAreSorted {
            for i in changes.indices where changes.compareIDs(i, topIndex) > 0 { topIndex = i }
        }
        var top = changes.id(at: topIndex)
        if let last = logged.last, compareArrays(last.id, top) > 0 { top = last.id }
        let appends = WriteBatch.appendsToTrees(changes, sorted: changesAreSorted, above: largest, logged: logged)
        if largest.map({ compareArrays(top, $0) > 0 }) ?? true { largest = top }
        let job = FlushJob(changes: changes, sorted: changesAreSorted, logged: logged, byID: byID,
                           bySequence: bySequence, edges: edges, appends: appends, largestID: largest)
        edges = nil  // the job's until it is joined
        base = .none
        overlayVersion &+= 1
        touchedTrees = true
        index = [:]
        // The storage of the chunk before, emptied when it was joined (above, or by an earlier read).
        changes = spare
        spare = Changes()
        changes.reserveCapacity(WriteBatch.pipelineChunk)
        changesAreSorted = true
        pendingBytes = 0
        lastMissAboveAll = false
        inFlight = job
        chunksHandedOff += 1
        if appends { chunksAppended += 1 }
        if worker == nil { worker = FlushWorker() }
        worker!.submit(job)
    }

    /// Tree actions encoded ahead of a flush, and the ``overlayVersion`` they were encoded from.
    struct EncodedOverlay {
        /// The overlay's changes, and the log's pending changes it takes along, as tree actions.
        let actions: Actions
        /// ``overlayVersion`` when they were encoded.
        fileprivate let version: Int
    }

    /// The overlay's changes as tree actions for the ``flush(encoded:)`` that follows, encoded while the chunk in
    /// flight is still being applied: the encoding reads only the overlay (and the log's pending changes, which a
    /// hand-off has emptied), so a commit does it while it would otherwise wait for the join. Nil when no chunk is
    /// in flight (nothing to overlap), the overlay is empty, or it will go onto the trees' open edges as it is.
    func encodedAheadOfFlush() -> EncodedOverlay? {
        guard let job = inFlight, failure == nil, !changes.isEmpty else { return nil }
        if job.appends && WriteBatch.appendsToTrees(changes, sorted: changesAreSorted, above: job.largestID,
                                                     logged: unloggedBase()) {
            return nil
        }
        let actions = WriteBatch.actions(for: changes, sorted: changesAreSorted, logged: unloggedBase())
        return EncodedOverlay(actions: actions, version: overlayVersion)
    }

    /// Applies the overlay to the working trees: one sorted batch per tree, after any chunk in flight.
    ///
    /// - Parameter encoded: ``encodedAheadOfFlush()``'s actions. They are used only if the overlay has not
    ///   changed since they were encoded; otherwise (a caller's mistake, which debug builds stop at, so no test
    ///   reaches the release fallback) the overlay is encoded again.
    func flush(encoded: consuming EncodedOverlay? = nil) throws {
        join()
        if chunkLost, let failure { throw failure }
        if let failure { throw failure }
        // Nothing of the overlay to write: the log's pending changes stay where they are (a read inside a batch
        // flushes first, and its snapshot reads them from the log), so the batch may still commit a log record.
        guard !changes.isEmpty else { return try finishEdges() }
        touchedTrees = true
        // `index` indexes `changes` as it is, and must stay right if this flush fails.
        if let open = edges, WriteBatch.appendsToTrees(changes, sorted: changesAreSorted,
                                                       above: open.byID.largestKey, logged: unloggedBase()) {
            // A bulk load's last chunk: onto the open edges, which are then written.
            _ = consume encoded
            do {
                try WriteBatch.append(changes, to: open)
            } catch {
                failure = error
                throw error
            }
            try finishEdges()
        } else {
            try finishEdges()
            assert(encoded.map { $0.version == overlayVersion } ?? true, "actions encoded ahead of a changed overlay")
            let actions = encoded.flatMap { $0.version == overlayVersion ? $0.actions : nil }
                ?? WriteBatch.actions(for: changes, sorted: changesAreSorted, logged: unloggedBase())
            _ = consume encoded
            do {
                (byID, bySequence) = try WriteBatch.apply(actions, byID: byID, bySequence: bySequence)
            } catch {
                failure = error
                throw error
            }
            writtenLeaves = []  // the modify may have rewritten any of them: left to readers
        }
        base = .none
        index.removeAll(keepingCapacity: true)
        changes.removeAll(keepingCapacity: true)
        changesAreSorted = true
        overlayVersion &+= 1
        pendingBytes = 0
        lastMissAboveAll = false
    }

    /// The overlay's storage, emptied, for the next batch (the writer's thread, nothing in flight): a batch's
    /// first chunk then appends into buffers of the size it needs instead of growing new ones (allocations of
    /// tens of KiB, which send the allocator down its slow paths for the small ones around them). None when
    /// it grew past 1 MiB: a huge batch's buffers are not held on to.
    func takeStorage() -> Changes {
        assert(inFlight == nil, "the overlay's storage taken while a chunk is in flight")
        var storage = changes.capacityBytes >= spare.capacityBytes ? changes : spare
        changes = Changes()
        spare = Changes()
        guard storage.capacityBytes <= 1 << 20 else { return Changes() }
        storage.removeAll(keepingCapacity: true)
        return storage
    }

    /// Documents in the overlay.
    var pendingCount: Int { changes.count }

    /// The log's pending changes the overlay does not supersede: what a flush writes into the trees besides
    /// the overlay (a document in both keeps the overlay's state, whose stored sequence came from its pending
    /// change). Written as they are encoded, without decoding their records.
    private func unloggedBase() -> [LogEntry] {
        base.entries.filter { position(of: $0.id) == nil }
    }

    /// The batch's changes as a log record's entries (ascending IDs), if the batch may commit as one: it has
    /// not touched the trees, and the chain admits that many more documents (``PendingChanges/admits``).
    func logEntries(lengthLimit: Int) -> [LogEntry]? {
        guard !touchedTrees, inFlight == nil, !changes.isEmpty, changes.count <= PendingChanges.deltaLimit else {
            return nil
        }
        var bytes = 0
        var entries: [LogEntry] = []
        entries.reserveCapacity(changes.count)
        changes.forEach(in: changesAreSorted ? nil : changes.sortedByID()) { _, id, record, e in
            bytes += id.count + record.count
            entries.append(LogEntry(id: Array(id), record: Array(record), sequence: e.sequence,
                                    storedSequence: e.storedSequence, storedFlags: e.storedFlags))
        }
        return base.admits(documents: entries.count, bytes: bytes, lengthLimit: lengthLimit) ? entries : nil
    }

    /// Where `id` is in `changes`, if it is there.
    func position(of id: [UInt8]) -> Int? {
        guard changesAreSorted else { return index[DocumentKey(id)] }
        guard !isAboveLast(id) else { return nil }
        var low = 0, high = changes.count - 1
        while low <= high {
            let mid = (low + high) / 2
            let order = changes.compareID(at: mid, to: id)
            if order == 0 { return mid }
            if order < 0 { low = mid + 1 } else { high = mid - 1 }
        }
        return nil
    }

    /// Whether `id` is above every ID of a sorted overlay (true for an empty one).
    private func isAboveLast(_ id: [UInt8]) -> Bool {
        changes.isEmpty || changes.compareID(at: changes.count - 1, to: id) < 0
    }

    /// Puts `state` as the overlay's state of `id`: in place when the overlay has it, else appended.
    ///
    /// - Parameter absent: the caller has just looked `id` up (``record(_:forEdit:)``) and not found it, and the
    ///   overlay has not changed since: it is appended without being searched for again, and without a
    ///   comparison when that lookup found it above every ID (``lastMissAboveAll``).
    func setPending(_ id: [UInt8], _ state: Pending, absent: Bool = false) {
        if !absent, let i = position(of: id) {
            overlayVersion &+= 1
            pendingBytes += changes.replace(at: i, with: state)
            return
        }
        prepareToAppend(id, checkedAbsent: absent)
        changes.append(id, state)
    }

    /// Adds new document `id` at `sequence` with first revision `revision` and inline `body`, as
    /// ``setPending(_:_:absent:)`` with `absent` would add its record
    /// (``Changes/appendFirst(_:sequence:revision:body:)``).
    /// The caller has just looked `id` up and not found it, and the overlay has not changed since.
    func addFirst(_ id: [UInt8], sequence: UInt64, revision: RevisionID, body: UnsafeRawBufferPointer) {
        prepareToAppend(id, checkedAbsent: true)
        changes.appendFirst(id, sequence: sequence, revision: revision, body: body)
    }

    /// Readies the overlay for document `id`, which is not in it, to be appended: keeps ``changesAreSorted``,
    /// ``overlayAboveTrees`` and ``index`` right for the append, and counts it in ``pendingBytes``.
    /// `checkedAbsent` as ``setPending(_:_:absent:)``'s `absent`.
    @inline(__always)
    private func prepareToAppend(_ id: [UInt8], checkedAbsent: Bool) {
        overlayVersion &+= 1
        pendingBytes += id.count + 64
        if checkedAbsent && lastMissAboveAll {
            // In order, and above the trees: the overlay stays sorted, and above them if it was or is empty.
            lastMissAboveAll = false
            if changes.isEmpty { overlayAboveTrees = true }
            return
        }
        overlayAboveTrees = false
        if changesAreSorted, !isAboveLast(id) {
            // Out of order from here on: index what is there, once.
            changesAreSorted = false
            index.reserveCapacity(changes.count + 1)
            for i in changes.indices { index[DocumentKey(changes.id(at: i))] = i }
        }
        if !changesAreSorted { index[DocumentKey(id)] = changes.count }
    }

    /// Hands the overlay to the flush thread once it holds a chunk, or flushes it once it is large (a batch
    /// that reads its trees): after each save.
    @inline(__always)
    func writeAheadIfDue() throws {
        if pendingCount >= WriteBatch.pipelineChunk && !readsTrees {
            try handOff()
        } else if pendingCount >= WriteBatch.flushThreshold || pendingBytes >= WriteBatch.flushBytes {
            try flush()
        }
    }

    /// The trees' changes for an overlay, each collected into one buffer (no array per change, which cost an
    /// allocation and a free per document and tree): by-ID puts of the encoded records; by-sequence removals of
    /// the replaced sequences, then puts of the new ones. Each is collected in ascending key order.
    struct Actions {
        var byID = BTreeActionBuffer()
        var bySequence = BTreeActionBuffer()
    }

    /// The ``Actions`` for `changes` (in ascending ID order when `sorted`) and the log's `logged` entries
    /// (ascending IDs, none of them in `changes`; written as they are encoded).
    static func actions(for changes: Changes, sorted: Bool, logged: [LogEntry] = []) -> Actions {
        var actions = Actions()
        var removed: [UInt64] = []
        // New sequences, each with its document's index in `changes`, or in `logged` when `fromLog`.
        var added: [Added] = []
        added.reserveCapacity(changes.count + logged.count)
        var nextLogged = 0
        changes.forEach(in: sorted ? nil : changes.sortedByID()) { i, id, record, e in
            while nextLogged < logged.count,
                  logged[nextLogged].id.withUnsafeBytes({ compareBytes($0, id) }) < 0 {
                putLogged(logged[nextLogged], at: nextLogged, into: &actions, removed: &removed, added: &added)
                nextLogged += 1
            }
            actions.byID.put(id, record)
            if let old = e.storedSequence, old != e.sequence { removed.append(old) }
            added.append(Added(sequence: e.sequence, position: i, fromLog: false))
        }
        while nextLogged < logged.count {
            putLogged(logged[nextLogged], at: nextLogged, into: &actions, removed: &removed, added: &added)
            nextLogged += 1
        }
        removed.sort()
        added.sort { $0.sequence < $1.sequence }
        // Every new sequence is above every stored one, so removals then additions are ascending. The keys are
        // `DocumentFile.sequenceKey`'s: the sequence's eight bytes, big-endian.
        for sequence in removed {
            withUnsafeBytes(of: sequence.bigEndian) { actions.bySequence.remove($0) }
        }
        for a in added {
            withUnsafeBytes(of: a.sequence.bigEndian) { key in
                if a.fromLog {
                    logged[a.position].id.withUnsafeBytes { actions.bySequence.put(key, $0) }
                } else {
                    changes.withID(at: a.position) { actions.bySequence.put(key, $0) }
                }
            }
        }
        return actions
    }

    /// A new by-sequence entry for ``actions(for:sorted:logged:)``.
    private struct Added {
        var sequence: UInt64
        var position: Int
        var fromLog: Bool
    }

    /// Collects the log's pending change `e` (number `position` of the logged entries) as its encoded record.
    private static func putLogged(_ e: LogEntry, at position: Int, into actions: inout Actions,
                                  removed: inout [UInt64], added: inout [Added]) {
        e.id.withUnsafeBytes { id in e.record.withUnsafeBytes { actions.byID.put(id, $0) } }
        if let old = e.storedSequence, old != e.sequence { removed.append(old) }
        added.append(Added(sequence: e.sequence, position: position, fromLog: true))
    }

    /// The trees with `actions` applied: one sorted batch per tree.
    static func apply(_ actions: Actions, byID: BTree, bySequence: BTree) throws -> (byID: BTree, bySequence: BTree) {
        // One by-ID put per document.
        let compress: Bool? = actions.byID.count <= WriteBatch.rawFlushLimit ? false : nil
        return (try byID.modified(by: actions.byID, order: Array(0..<actions.byID.count), compress: compress),
                try bySequence.modified(by: actions.bySequence, order: Array(0..<actions.bySequence.count),
                                        compress: compress))
    }
}

extension DocumentFile {
    /// Starts a batch from the newest commit (nothing happens if one is in progress).
    func beginBatch() throws {
        guard batch == nil else { return }
        let snapshot = try committedSnapshot()
        var spare = WriteBatch.Changes()
        swap(&spare, &spareChanges)
        batch = WriteBatch(byID: snapshot.byID.forWriter, bySequence: snapshot.bySequence.forWriter,
                           base: snapshot.pending, startSequence: snapshot.lastSequence,
                           discardsAtStart: storage.discardCount, changes: consume spare)
    }

    /// Commits the batch in progress as one commit and ends it; on failure nothing of it is kept.
    ///
    /// - Returns: the sequences the commit covers (empty when the batch changed nothing) and the new snapshot.
    func commitBatch() throws -> (first: UInt64, last: UInt64, snapshot: DocumentSnapshot)? {
        guard let b = batch else { return nil }
        let encoded = b.encodedAheadOfFlush()  // while the last chunk may still be applied
        b.join()  // the storage file is the writer's again before anything below touches it
        b.closeWorker()
        batch = nil
        defer { spareChanges = b.takeStorage() }
        guard b.lastSequence != b.startSequence else {
            storage.discardUncommitted()  // nothing to commit; drop anything a failed edit appended
            return nil
        }
        startNodeCacheFill()
        do {
            if let failure = b.failure { throw failure }
            if let entries = b.logEntries(lengthLimit: logLengthLimit) {
                return (b.startSequence + 1, b.lastSequence, try commitLogRecord(entries, of: b))
            }
            try b.flush(encoded: encoded)
            try checkNothingDiscarded(since: b)
            try storage.commit(roots: [b.byID.root, b.bySequence.root],
                               metadata: DocumentFile.encodeMetadata(lastSequence: b.lastSequence))
        } catch {
            storage.discardUncommitted()
            throw error
        }
        let snapshot = try committedSnapshot()
        let leaves = b.writtenLeaves
        if !leaves.isEmpty { cacheFill = (leaves, snapshot) }
        return (b.startSequence + 1, b.lastSequence, snapshot)
    }

    /// Reads the by-ID leaves the last committed batch's open edges wrote (``cacheFill``) into the node cache, on a
    /// queue of its own: the write-through cache a batch modify gives the leaves it writes, without its cost in
    /// the batch. A bulk load's leaves filled the cache with fresh memory, and this machine's page faults made
    /// that a fifth of D1's CPU time. The next commit starts the fill as its serial part begins (its last flush
    /// and sync), when the flush thread has nothing to do; read right after their own commit, the leaves
    /// competed with the next batch's first chunk (BENCHMARKS.md §3, "D1, eleventh round"). Leaves already
    /// cached are skipped; a read that fails (the database closed meanwhile) leaves the rest to later readers.
    ///
    /// At most half the cache's capacity is read, the newest leaves: a larger batch would only push hot inner
    /// nodes out for leaves of its own.
    func startNodeCacheFill() {
        guard let (leaves, snapshot) = cacheFill else { return }
        cacheFill = nil
        // A fill queued before a compaction swapped the file would fill the old file's cache, and keep it open.
        guard snapshot.storage === storage else { return }
        let room = storage.nodeCache.capacityBytes / 2
        let byID = leaves.suffix(room / max(byIDConfiguration.nodeSize, 1))
        WriteBatch.fillQueue.async {
            do {
                for offset in byID { _ = try snapshot.byID.node(at: offset) }
            } catch {}
        }
    }

    /// Commits a small batch as one log record on top of the pending changes, leaving the trees as they are
    /// (FORMAT.md §10.1.7), and makes the new commit's snapshot the newest.
    private func commitLogRecord(_ entries: [LogEntry], of b: WriteBatch) throws -> DocumentSnapshot {
        try checkNothingDiscarded(since: b)
        let payload = PendingChanges.encodeRecord(entries, previous: b.base.head)
        // Raw: a record is a few hundred bytes, and its commit waits for it.
        let (offset, _) = try payload.withUnsafeBytes { try storage.append(kind: .value, payload: $0, compress: false) }
        let pending = b.base.applying(entries, head: offset)
        try storage.commit(roots: [b.byID.root, b.bySequence.root],
                           metadata: DocumentFile.encodeMetadata(lastSequence: b.lastSequence, logHead: offset,
                                                                 logLength: pending.length))
        return install(storage.latestCommit, of: storage, pending: pending, lastSequence: b.lastSequence)
    }

    /// Throws when a failed write discarded uncommitted chunks since `b` began (``WriteBatch/discardsAtStart``).
    private func checkNothingDiscarded(since b: WriteBatch) throws {
        guard storage.discardCount == b.discardsAtStart else {
            throw SofaError(.ioError, "the batch lost uncommitted data to an earlier failed write (its error "
                            + "was reported to a call inside the batch); nothing of the batch was committed",
                            path: storage.path)
        }
    }

    /// Ends the batch in progress, discarding everything it wrote.
    func rollbackBatch() {
        batch?.join()  // the flush thread's appends end before they are discarded
        if let b = batch { spareChanges = b.takeStorage() }
        batch = nil
        storage.discardUncommitted()
    }

    /// Stores a new state of document `id` in the batch under the next sequence, its tree pruned.
    ///
    /// - Parameter isNew: ``currentRecord(_:)`` has just answered nil for `id` (and nothing was saved since), so
    ///   the overlay need not be searched for it again (``WriteBatch/setPending(_:_:absent:)``).
    /// - Returns: the record as stored.
    func save(_ id: [UInt8], tree: RevisionTree, storedSequence: UInt64?, storedFlags: UInt8, isNew: Bool = false)
        throws -> DocumentRecord {
        guard let batch else { preconditionFailure("save outside a batch") }
        var tree = tree
        if tree.revisions.count > 1 { tree.prune(depth: revisionDepth) }  // one revision is already in order
        batch.lastSequence += 1
        let record = DocumentRecord(sequence: batch.lastSequence, tree: tree)
        batch.setPending(id, WriteBatch.Pending(record: record, storedSequence: storedSequence,
                                                storedFlags: storedFlags), absent: isNew)
        if case .inline(let bytes) = tree.winner.body { batch.pendingBytes += bytes.count }
        try batch.writeAheadIfDue()
        return record
    }

    /// Saves the first revision of new document `id`, `revision` with inline `body`, as
    /// ``save(_:tree:storedSequence:storedFlags:isNew:)`` saves a ``RevisionTree/init(first:deleted:body:)``
    /// tree, without building the tree or its record: a put of a new document, every put of a bulk load. `id`
    /// has just been looked up and not found.
    ///
    /// - Returns: the document's sequence.
    func saveFirst(_ id: [UInt8], revision: RevisionID, body: UnsafeRawBufferPointer) throws -> UInt64 {
        guard let batch else { preconditionFailure("save outside a batch") }
        batch.lastSequence += 1
        batch.addFirst(id, sequence: batch.lastSequence, revision: revision, body: body)
        batch.pendingBytes += body.count
        try batch.writeAheadIfDue()
        return batch.lastSequence
    }

    /// Whether a body of `count` bytes is kept inline in its by-ID entry (``storeBody(_:)-([UInt8])``): a
    /// non-empty one up to ``inlineBodyLimit``.
    func storesInline(_ count: Int) -> Bool {
        count > 0 && count <= inlineBodyLimit
    }

    /// Stores a body: empty, inline, or appended as a compressed value chunk.
    func storeBody(_ bytes: [UInt8]) throws -> StoredBody {
        if bytes.isEmpty { return .empty }
        if storesInline(bytes.count) { return .inline(bytes) }
        return try bytes.withUnsafeBytes { try storeChunk($0) }
    }

    /// ``storeBody(_:)-([UInt8])`` of a put's body in place: an array is made only for an inline body (a chunk's
    /// is compressed from the serializer's bytes, so a large body is not copied once more).
    func storeBody(_ body: UnsafeDocumentBody) throws -> StoredBody {
        if body.bytes.isEmpty { return .empty }
        if storesInline(body.bytes.count) { return .inline(body.array) }
        return try storeChunk(body.bytes)
    }

    /// Appends `bytes` as a compressed value chunk.
    private func storeChunk(_ bytes: UnsafeRawBufferPointer) throws -> StoredBody {
        batch?.join()  // the flush thread appends too: one writer at a time
        do {
            let (offset, _) = try storage.append(kind: .value, payload: bytes, compress: true)
            return .chunk(offset: offset)
        } catch {
            batch?.failure = error
            throw error
        }
    }

    /// The writer's view of `id` in the batch in progress (edits run only inside one).
    func currentRecord(_ id: [UInt8]) throws -> WriteBatch.Current? {
        guard let batch else { preconditionFailure("an edit outside a batch") }
        return try batch.record(id, forEdit: true)
    }
}

/// A document ID's UTF-8 bytes as a dictionary key, hashed in one pass over the bytes. `[UInt8]`'s own hashing
/// feeds the hasher one element at a time, which cost more than the rest of a put's bookkeeping (callgrind,
/// 14-byte IDs). Used by an overlay whose IDs came out of order (``WriteBatch/position(of:)``). Equality is
/// the synthesized byte equality of the arrays.
struct DocumentKey: Hashable {
    let bytes: [UInt8]

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    func hash(into hasher: inout Hasher) {
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }

}
