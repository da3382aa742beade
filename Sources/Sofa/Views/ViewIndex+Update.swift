import Dispatch
#if canImport(Glibc)
import Glibc
#endif
import SofaStorage
import Synchronization

/// A map function: called with a document's properties (`_id` and `_rev` included) and an `emit` to call
/// once per row, with a key (any JSON) and a value (any JSON, or nil for none).
///
/// It must be pure and thread-safe: the indexer calls it on several threads at once, in no particular order.
public typealias MapFunction = @Sendable (_ document: JSON, _ emit: (_ key: JSON, _ value: JSON?) -> Void) -> Void

/// What the indexer needs from a view to map documents.
struct Mapper: Sendable {
    let map: MapFunction
    let documentType: String?
    /// Counts map calls (tests check that an update maps only changed documents).
    let calls: MapCallCounter?

    /// Runs the map on one document's winning revision and appends its rows to `out`. `inlineBody` is the
    /// winner's inline body when the caller decoded the record without copying it
    /// (``DocumentRecord/init(decoding:path:bodyOf:at:)``); nil to read the body the record holds.
    func map(id: UnsafeRawBufferPointer, record: DocumentRecord, inlineBody: UnsafeRawBufferPointer? = nil,
             snapshot: DocumentSnapshot, into out: inout MappedChunk) throws {
        let firstRow = out.rows.count
        let idStart = out.documentBytes.count
        out.documentBytes.append(contentsOf: id)
        var back = out.documentBytes.count..<out.documentBytes.count
        defer { out.documents.append((idStart..<(idStart + id.count), firstRow..<out.rows.count, back)) }
        let winner = record.tree.winner
        guard !winner.deleted else { return }
        let idString = String(decoding: id, as: UTF8.self)
        // The properties as Document.properties shows them (`_id`, `_rev`, then the body), parsed in one pass
        // with `_id` and `_rev` already in place.
        let document: JSON
        func parsedBody(leading: [(String, JSON)]) throws -> JSON? {
            guard let inlineBody else { return try snapshot.body(winner.body, leading: leading) }
            return try DocumentSnapshot.parseBody(inlineBody, leading: leading, path: snapshot.path, offset: 0)
        }
        if let parsed = try parsedBody(leading: [("_id", .string(idString)),
                                                 ("_rev", .string(winner.id.description))]) {
            document = parsed
        } else {
            // The body has an `_id` or `_rev` member of its own (a put never stores one): it keeps its place.
            var body = try parsedBody(leading: [])!  // no leading member, so no name can collide
            guard case .object(var members) = body else { return }
            body = .null  // `members` is now the only reference: inserting does not copy it
            members.updateValue(.string(idString), forKey: "_id", insertingAt: 0)
            members.updateValue(.string(winner.id.description), forKey: "_rev", insertingAt: 1)
            document = .object(members)
        }
        if let documentType, document["type"] != .string(documentType) { return }
        out.emitted.removeAll(keepingCapacity: true)
        calls?.count.add(1, ordering: .relaxed)
        map(document) { key, value in out.emitted.append((key, value)) }
        guard !out.emitted.isEmpty else { return }
        let emitted = out.emitted
        let backStart = out.documentBytes.count
        out.documentBytes.appendVarint(UInt64(emitted.count))
        for (index, (key, value)) in emitted.enumerated() {
            let start = out.arena.count
            do {
                try CollationKey.encode(key, into: &out.arena)
            } catch let error as SofaError {
                throw SofaError(error.code, "document \"\(idString)\" emitted a key that cannot be indexed: "
                                + error.message)
            }
            if let value, PackedJSON.containsNonFinite(value) {
                throw SofaError(.invalidValue, "document \"\(idString)\" emitted a value holding NaN or infinity, "
                                + "which JSON cannot express")
            }
            let keyLength = out.arena.count - start
            out.documentBytes.appendVarint(UInt64(keyLength))
            out.arena.withUnsafeBytes {
                out.documentBytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: $0[start...]))
            }
            RowKey.appendID(id, to: &out.arena)
            out.arena.appendVarint(UInt64(index))
            let valueStart = out.arena.count
            RowValue.append(keyLength: keyLength, sequence: record.sequence, key: key, value: value, to: &out.arena)
            out.rows.append((start, valueStart - start, out.arena.count - valueStart))
        }
        back = backStart..<out.documentBytes.count
    }
}

/// The rows a run of documents produced, in one arena: each row's key and value back to back, and per
/// document its rows, and its ID and encoded back-index entry (empty when it emitted nothing) as ranges of
/// `documentBytes` (two buffers for a chunk rather than two arrays per document).
struct MappedChunk {
    var arena: [UInt8] = []
    var rows: [(start: Int, keyLength: Int, valueLength: Int)] = []
    var documents: [(id: Range<Int>, rows: Range<Int>, back: Range<Int>)] = []
    var documentBytes: [UInt8] = []
    /// Incremental updates: each document's entry in the back-index being updated (nil when it had none),
    /// parallel to `documents`.
    var previousBack: [[UInt8]?] = []
    /// The current document's emits (reused from document to document).
    var emitted: [(JSON, JSON?)] = []

    init() {}

    /// An empty chunk with room for `documents` documents of a typical size (a few hundred bytes of rows and
    /// back-index entries each), so that filling it does not grow its buffers one doubling at a time.
    init(reservingFor documents: Int) {
        arena.reserveCapacity(documents * 256)
        rows.reserveCapacity(documents)
        self.documents.reserveCapacity(documents)
        documentBytes.reserveCapacity(documents * 128)
    }

    /// Empties the chunk, keeping its buffers.
    mutating func removeAll() {
        arena.removeAll(keepingCapacity: true)
        rows.removeAll(keepingCapacity: true)
        documents.removeAll(keepingCapacity: true)
        documentBytes.removeAll(keepingCapacity: true)
        previousBack.removeAll(keepingCapacity: true)
    }

    /// Calls `body` with document `i`'s ID and back-index entry (empty when it emitted nothing).
    func withDocument<R>(_ i: Int, _ body: (_ id: UnsafeRawBufferPointer, _ back: UnsafeRawBufferPointer) throws -> R)
        rethrows -> R
    {
        let document = documents[i]
        return try documentBytes.withUnsafeBytes { bytes in
            try body(UnsafeRawBufferPointer(rebasing: bytes[document.id]),
                     UnsafeRawBufferPointer(rebasing: bytes[document.back]))
        }
    }

    /// Calls `body` with row `i`'s key and value.
    func withRow<R>(_ i: Int, _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let row = rows[i]
        return try arena.withUnsafeBytes { a in
            let k = row.start, v = row.start + row.keyLength
            return try body(UnsafeRawBufferPointer(rebasing: a[k..<v]),
                            UnsafeRawBufferPointer(rebasing: a[v..<(v + row.valueLength)]))
        }
    }
}

/// Counts map calls.
final class MapCallCounter: Sendable {
    let count = Atomic<Int>(0)
}

/// A batch being mapped in the background while the previous one is written.
final class PendingBatch: @unchecked Sendable {
    let group = DispatchGroup()
    var result: Result<[MappedChunk], any Error> = .success([])

    func wait() throws -> [MappedChunk] {
        group.wait()
        return try result.get()
    }
}

extension ViewIndex {
    /// Documents mapped per batch: bounds the rows held in memory during an update.
    static let batchSize = 8192
    /// Bytes of collected changes (keys, values and ``actionOverhead`` per change) from which an incremental
    /// update applies them to the trees in one pass before going on: the changes it holds stay below this plus
    /// one mapped chunk's (64 documents'; tests lower it to exercise several passes). Applying a pass briefly
    /// needs about as much again (the modify copies the changes, in key order, into one buffer). Not bounded by
    /// it: the keys of the touched groups, one per distinct group per pass, kept until the update's end.
    static let passBudget = Atomic<Int>(32 << 20)
    /// What one collected change costs beyond its key and value bytes: its entry in the action buffer, its
    /// number in the sort's order and its place in the modify's copy.
    static let actionOverhead = 3 * BTreeActionBuffer.itemOverhead
    /// Incremental update passes so far (tests check that a large update takes several).
    static let updatePasses = Atomic<Int>(0)
    /// Bytes of rows a first build sorts in memory before spilling a sorted run to disk (tests lower it to
    /// exercise the merge).
    static let sortBudget = Atomic<Int>(64 << 20)

    /// Brings the index up to `snapshot`: a bulk build when the index is empty, else the changed documents
    /// only. Commits once at the end, so a failure leaves the previous commit as it was.
    ///
    /// - Returns: the number of documents read.
    @discardableResult
    func update(to snapshot: DocumentSnapshot, mapper: Mapper, header: ViewHeader) throws -> Int {
        let current = try self.snapshot()
        guard current.header.lastSequence < snapshot.lastSequence else { return 0 }
        do {
            var newHeader = header
            newHeader.lastSequence = snapshot.lastSequence
            if current.rows.root == nil && current.backIndex.root == nil {
                return try build(from: snapshot, mapper: mapper, header: newHeader)
            }
            return try apply(changesSince: current.header.lastSequence, from: snapshot, to: current, mapper: mapper,
                             header: newHeader)
        } catch {
            storage.discardUncommitted()
            throw error
        }
    }

    /// Starts mapping `batch` (doc IDs, with their by-ID entries when the caller has them) on every core, in
    /// the background, so the caller can write the previous batch meanwhile. With `previousBack` (an
    /// incremental update), each document's entry in that committed back-index is looked up there too, on the
    /// same threads: lookups miss the node cache on a large index, and the writer has enough to do.
    private func startMapping(_ batch: DocumentBatch, snapshot: DocumentSnapshot, mapper: Mapper,
                              previousBack: BTree? = nil) -> PendingBatch {
        let pending = PendingBatch()
        DispatchQueue.global().async(group: pending.group) {
            let chunk = 64
            let chunks = (batch.count + chunk - 1) / chunk
            var results = [Result<MappedChunk, any Error>](repeating: .success(MappedChunk()), count: chunks)
            results.withUnsafeMutableBufferPointer { out in
                let out = UnsafeSendableBuffer(out)
                // One worker per core takes chunks in turn, each with its own readers of the two trees, kept from
                // chunk to chunk: their memos hold the upper nodes every lookup descends through.
                DispatchQueue.forEachChunk(chunks) { c, readers in
                    let byID = readers.reader(WorkerReaders.byID, of: snapshot.byID)
                    out.buffer[c] = Result {
                        var mapped = MappedChunk(reservingFor: chunk)
                        try batch.bytes.withUnsafeBytes { bytes in
                            for i in (c * chunk)..<min(batch.count, (c + 1) * chunk) {
                                let item = batch.items[i]
                                let id = UnsafeRawBufferPointer(rebasing: bytes[item.id])
                                // The document's by-ID entry, mapped in place: its winner's inline body is parsed
                                // from the entry's bytes, never copied out of them.
                                func mapEntry(_ entry: UnsafeRawBufferPointer?) throws {
                                    guard let entry else {
                                        let start = mapped.documentBytes.count
                                        mapped.documentBytes.append(contentsOf: id)
                                        let end = mapped.documentBytes.count
                                        mapped.documents.append((start..<end, mapped.rows.count..<mapped.rows.count,
                                                                 end..<end))
                                        return
                                    }
                                    var body: Range<Int>?
                                    let record = try DocumentRecord(decoding: entry, path: snapshot.path, bodyOf: nil,
                                                                    at: &body)
                                    try mapper.map(id: id, record: record,
                                                   inlineBody: body.map { UnsafeRawBufferPointer(rebasing: entry[$0]) },
                                                   snapshot: snapshot, into: &mapped)
                                }
                                if let entry = item.entry {
                                    try mapEntry(UnsafeRawBufferPointer(rebasing: bytes[entry]))
                                } else {
                                    // Scattered lookups, each leaf read once: kept out of the node cache.
                                    try snapshot.withEntry(for: id, reader: byID, cachingLeaf: false, mapEntry)
                                }
                                if let previousBack {
                                    let back = readers.reader(WorkerReaders.previousBackIndex, of: previousBack)
                                    mapped.previousBack.append(try back.get(id, cachingLeaf: false))
                                }
                            }
                        }
                        return mapped
                    }
                }
            }
            pending.result = Result { try results.map { try $0.get() } }
        }
        return pending
    }

    /// First build: every live document in ID order; the back-index is bulk-loaded as it comes (ID order is
    /// its order), the rows go through an external sort and are bulk-loaded at the end.
    private func build(from snapshot: DocumentSnapshot, mapper: Mapper, header: ViewHeader) throws -> Int {
        let sorter = ExternalSorter(directory: StorageFile.directoryName(of: path),
                                    budget: ViewIndex.sortBudget.load(ordering: .relaxed), system: storage.system)
        let backBuilder = TreeBuilder(file: storage, configuration: backConfiguration)
        let documents = try mapInBatches(from: snapshot, mapper: mapper, feed: { add in
            try snapshot.forEachByID { leaf, i in
                let entry = leaf.value(i)
                // Deleted documents emit nothing; their summary byte says so without decoding the record.
                if entry.first.map({ $0 & DocumentRecord.flagDeleted != 0 }) == true { return true }
                try add(leaf.key(i), entry)
                return true
            }
        }, write: { pending in
            for chunk in try pending.wait() {
                try sorter.add(rowsOf: chunk)
                try chunk.documentBytes.withUnsafeBytes { bytes in
                    for doc in chunk.documents where !doc.back.isEmpty {
                        try backBuilder.add(key: UnsafeRawBufferPointer(rebasing: bytes[doc.id]),
                                            value: UnsafeRawBufferPointer(rebasing: bytes[doc.back]))
                    }
                }
            }
        })
        // Merging on this thread, bulk loading (leaf encoding, LZ4, writes) on another.
        let rowsBuilder = BackgroundTreeBuilder(TreeBuilder(file: storage, configuration: rowsConfiguration))
        defer { rowsBuilder.drain() }
        try sorter.finish { key, value in try rowsBuilder.add(key: key, value: value) }
        let rows = try rowsBuilder.finish()
        try commit(rows: rows, backIndex: try backBuilder.finish(),
                   groups: try buildGroups(rows: rows, levels: header.groupLevels), header: header)
        return documents
    }

    /// Incremental update: the documents changed after `since`, mapped batch by batch; their changes are
    /// collected into passes of about ``passBudget`` bytes at most, each pass one sorted batch modify of each tree
    /// (removals of the rows the back-index says a document emitted before, insertions of its new rows). An
    /// update smaller than the budget (1 % of a 1M-document database is ~3 MB) is a single pass, so each
    /// touched node is rewritten once.
    private func apply(changesSince since: UInt64, from snapshot: DocumentSnapshot, to current: ViewSnapshot,
                       mapper: Mapper, header: ViewHeader) throws -> Int {
        var rows = BTree(file: storage, root: current.rows.root, configuration: rowsConfiguration,
                         limit: StorageFile.unlimited)
        var back = BTree(file: storage, root: current.backIndex.root, configuration: backConfiguration,
                         limit: StorageFile.unlimited)
        let range = KeyRange(lower: KeyBound(DocumentFile.sequenceKey(since), inclusive: false))
        var groupChanges = GroupChanges(levels: header.groupLevels)
        var rowActions = BTreeActionBuffer()
        var backActions = BTreeActionBuffer()
        var pendingBytes = 0
        let budget = ViewIndex.passBudget.load(ordering: .relaxed)
        func pass() throws {
            ViewIndex.updatePasses.add(1, ordering: .relaxed)
            let rowOrder = rowActions.sortedUnique()
            // The rows' groups are noted on another thread while the rows tree is rewritten.
            let noting = GroupNoting(taking: &groupChanges, actions: rowActions, order: rowOrder)
            do {
                rows = try rows.modified(by: rowActions, order: rowOrder)
            } catch {
                _ = try? noting.result()  // nothing outlives the update
                throw error
            }
            groupChanges = try noting.result()
            back = try back.modified(by: backActions, order: backActions.sortedUnique())
            rowActions.removeAll()
            backActions.removeAll()
            pendingBytes = 0
        }
        // Each changed document comes once (the by-sequence tree holds its newest sequence only), so its
        // previous back-index entry is the one in `current`, whichever batch it is in; and no two documents'
        // actions share a key, so a pass may hold several batches.
        let documents = try mapInBatches(from: snapshot, mapper: mapper, previousBack: current.backIndex, feed: { add in
            try snapshot.forEachBySequence(in: range) { _, id in
                try add(id, nil)
                return true
            }
        }, write: { pending in
            for chunk in try pending.wait() {
                for (d, doc) in chunk.documents.enumerated() {
                    try chunk.withDocument(d) { id, newBack in
                        // A document that emitted the same keys as before (a change to what the view does not
                        // key on) has the same row keys: its puts replace its rows, and its back-index entry, and
                        // that tree's leaf, stay as they are.
                        let old = chunk.previousBack[d]
                        let sameKeys = old?.withUnsafeBytes { compareBytes($0, newBack) == 0 } ?? false
                        if let old, !sameKeys {
                            let id = Array(id)
                            for (i, key) in try old.withUnsafeBytes(BackIndexEntry.decode).enumerated() {
                                let rowKey = RowKey.make(key: key, id: id, index: i)
                                rowKey.withUnsafeBytes { rowActions.remove($0) }
                                pendingBytes += rowKey.count + ViewIndex.actionOverhead
                            }
                        }
                        for i in doc.rows {
                            chunk.withRow(i) { k, v in
                                rowActions.put(k, v)
                                pendingBytes += k.count + v.count + ViewIndex.actionOverhead
                            }
                        }
                        if newBack.isEmpty {
                            if old != nil {
                                backActions.remove(id)
                                pendingBytes += id.count + ViewIndex.actionOverhead
                            }
                        } else if !sameKeys {
                            backActions.put(id, newBack)
                            pendingBytes += id.count + newBack.count + ViewIndex.actionOverhead
                        }
                    }
                }
                if pendingBytes >= budget { try pass() }
            }
        })
        if !rowActions.isEmpty || !backActions.isEmpty { try pass() }
        // The trees' new nodes are final: their writeback runs while the group aggregates are recomputed.
        try storage.flushAppendedStartingWriteback()
        try commit(rows: rows, backIndex: back,
                   groups: try groupChanges.apply(to: current.groups, rows: rows, index: self), header: header)
        return documents
    }

    /// The pipeline both builds share: documents are mapped in batches of ``batchSize`` on all cores, and each
    /// batch's rows are written while the next batch maps. `feed` hands over the documents (ID, and the by-ID
    /// entry when it is already at hand), `write` stores one mapped batch; with `previousBack`, each mapped
    /// chunk carries the documents' entries in it. Returns how many documents were mapped.
    private func mapInBatches(
        from snapshot: DocumentSnapshot, mapper: Mapper, previousBack: BTree? = nil,
        feed: (_ add: (_ id: UnsafeRawBufferPointer, _ entry: UnsafeRawBufferPointer?) throws -> Void) throws -> Void,
        write: @escaping (PendingBatch) throws -> Void
    ) throws -> Int {
        var batch = DocumentBatch()
        var documents = 0
        var inFlight: PendingBatch?
        defer { _ = try? inFlight?.wait() }
        func flush() throws {
            let next = startMapping(batch, snapshot: snapshot, mapper: mapper, previousBack: previousBack)
            documents += batch.count
            batch.removeAll()
            // Write the previous batch while this one maps. `next` is in flight first, so that a failing write
            // still waits for it (the `defer` above): no mapping outlives the update.
            let previous = inFlight
            inFlight = next
            if let previous { try write(previous) }
            if documents % (ViewIndex.batchSize * 32) == 0 { releasePages(snapshot) }
        }
        try feed { id, entry in
            batch.append(id: id, entry: entry)
            if batch.count == ViewIndex.batchSize { try flush() }
        }
        try flush()
        if let last = inFlight { try write(last) }
        inFlight = nil
        return documents
    }

    /// Keeps a long update's resident set bounded: pages of the document and index files it has read so far
    /// stay in the page cache but leave this process's RSS.
    private func releasePages(_ snapshot: DocumentSnapshot) {
        snapshot.storage.releaseResidentPages()
        storage.releaseResidentPages()
    }

    /// The indices of `keys` in ascending `memcmp` order of the keys, equal keys in index order: the keys are
    /// copied into one buffer and ordered there (``byteOrder(count:in:span:)``).
    static func byteOrder(_ keys: [[UInt8]]) -> [Int] {
        var flat: [UInt8] = []
        flat.reserveCapacity(keys.reduce(0) { $0 + $1.count })
        var spans: [Range<Int>] = []
        spans.reserveCapacity(keys.count)
        for key in keys {
            spans.append(flat.count..<(flat.count + key.count))
            flat.append(contentsOf: key)
        }
        return flat.withUnsafeBytes { bytes in
            spans.withUnsafeBufferPointer { spans in
                SofaStorage.byteOrder(count: spans.count, in: bytes) { spans[$0] }
            }
        }
    }
}

/// Documents waiting to be mapped: each one's ID and (when the caller has it) by-ID entry, copied into one
/// buffer, so that handing a document to the mappers costs no allocation of its own.
struct DocumentBatch {
    var bytes: [UInt8] = []
    var items: [(id: Range<Int>, entry: Range<Int>?)] = []

    init() {
        items.reserveCapacity(ViewIndex.batchSize)
    }

    /// The number of documents.
    var count: Int { items.count }

    /// Adds a document: its ID and its by-ID entry, if the caller has it.
    mutating func append(id: UnsafeRawBufferPointer, entry: UnsafeRawBufferPointer?) {
        let idStart = bytes.count
        bytes.append(contentsOf: id)
        let entryRange = entry.map { entry in
            let start = bytes.count
            bytes.append(contentsOf: entry)
            return start..<bytes.count
        }
        items.append((idStart..<(idStart + id.count), entryRange))
    }

    /// Empties the batch, keeping its buffers when no mapper holds them any longer.
    mutating func removeAll() {
        bytes.removeAll(keepingCapacity: true)
        items.removeAll(keepingCapacity: true)
    }
}

/// A buffer written from several threads at distinct indices.
struct UnsafeSendableBuffer<T>: @unchecked Sendable {
    let buffer: UnsafeMutableBufferPointer<T>
    init(_ buffer: UnsafeMutableBufferPointer<T>) { self.buffer = buffer }
}
