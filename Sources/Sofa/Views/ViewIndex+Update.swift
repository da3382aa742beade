import Dispatch
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

    /// Runs the map on one document's winning revision.
    func rows(id: [UInt8], record: DocumentRecord, snapshot: DocumentSnapshot) throws -> MappedDocument {
        var mapped = MappedDocument(id: id)
        let winner = record.tree.winner
        guard !winner.deleted else { return mapped }
        let idString = String(decoding: id, as: UTF8.self)
        guard let document = try snapshot.document(id: idString, record: record, revision: nil) else { return mapped }
        if let documentType, document.userProperties["type"] != .string(documentType) { return mapped }
        var emitted: [(JSON, JSON?)] = []
        calls?.count.add(1, ordering: .relaxed)
        map(document.properties) { key, value in emitted.append((key, value)) }
        mapped.keys.reserveCapacity(emitted.count)
        mapped.rows.reserveCapacity(emitted.count)
        for (index, (key, value)) in emitted.enumerated() {
            var keyBytes: [UInt8] = []
            do {
                try CollationKey.encode(key, into: &keyBytes)
            } catch let error as SofaError {
                throw SofaError(error.code, "document \"\(idString)\" emitted a key that cannot be indexed: "
                                + error.message)
            }
            if let value, PackedJSON.containsNonFinite(value) {
                throw SofaError(.invalidValue, "document \"\(idString)\" emitted a value holding NaN or infinity, "
                                + "which JSON cannot express")
            }
            mapped.rows.append((RowKey.make(key: keyBytes, id: id, index: index),
                                RowValue.encode(keyLength: keyBytes.count, sequence: record.sequence, key: key, value: value)))
            mapped.keys.append(keyBytes)
        }
        return mapped
    }
}

/// Counts map calls.
final class MapCallCounter: Sendable {
    let count = Atomic<Int>(0)
}

/// The rows one document produced: its emitted collation keys (for the back-index) and full rows.
struct MappedDocument {
    var id: [UInt8]
    var keys: [[UInt8]] = []
    var rows: [(key: [UInt8], value: [UInt8])] = []
}

extension ViewIndex {
    /// Documents mapped per batch: bounds the rows held in memory during an update.
    static let batchSize = 4096

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

    /// Maps `batch` (doc IDs, with their by-ID entries when the caller has them) on every core.
    private func map(_ batch: [(id: [UInt8], entry: [UInt8]?)], snapshot: DocumentSnapshot,
                     mapper: Mapper) throws -> [MappedDocument] {
        let chunk = 32
        let chunks = (batch.count + chunk - 1) / chunk
        var results = [Result<MappedDocument, any Error>](repeating: .success(MappedDocument(id: [])),
                                                          count: batch.count)
        results.withUnsafeMutableBufferPointer { out in
            let out = UnsafeSendableBuffer(out)
            // Each iteration writes only its own slots of `out`.
            DispatchQueue.concurrentPerform(iterations: chunks) { c in
                for i in (c * chunk)..<min(batch.count, (c + 1) * chunk) {
                    out.buffer[i] = Result {
                        let (id, entry) = batch[i]
                        let record: DocumentRecord?
                        if let entry {
                            record = try entry.withUnsafeBytes { try DocumentRecord(decoding: $0, path: snapshot.path) }
                        } else {
                            record = try snapshot.record(id)
                        }
                        guard let record else { return MappedDocument(id: id) }
                        return try mapper.rows(id: id, record: record, snapshot: snapshot)
                    }
                }
            }
        }
        return try results.map { try $0.get() }
    }

    /// First build: every live document in ID order; the back-index is bulk-loaded as it comes (ID order is
    /// its order), the rows go through an external sort and are bulk-loaded at the end.
    private func build(from snapshot: DocumentSnapshot, mapper: Mapper, header: ViewHeader) throws -> Int {
        let sorter = ExternalSorter(directory: StorageFile.directoryName(of: path))
        let backBuilder = TreeBuilder(file: storage, configuration: backConfiguration)
        var batch: [(id: [UInt8], entry: [UInt8]?)] = []
        batch.reserveCapacity(ViewIndex.batchSize)
        var documents = 0
        func flush() throws {
            for doc in try map(batch, snapshot: snapshot, mapper: mapper) {
                for row in doc.rows { try sorter.add(key: row.key, value: row.value) }
                if !doc.keys.isEmpty { try backBuilder.add(key: doc.id, value: BackIndexEntry.encode(doc.keys)) }
            }
            documents += batch.count
            batch.removeAll(keepingCapacity: true)
        }
        try snapshot.byID.forEach { id, entry in
            // Deleted documents emit nothing; their summary byte says so without decoding the record.
            if entry.first.map({ $0 & DocumentRecord.flagDeleted != 0 }) == true { return true }
            batch.append((Array(id), Array(entry)))
            if batch.count == ViewIndex.batchSize { try flush() }
            return true
        }
        try flush()
        let rowsBuilder = TreeBuilder(file: storage, configuration: rowsConfiguration)
        try sorter.finish { key, value in try rowsBuilder.add(key: key, value: value) }
        try commit(rows: try rowsBuilder.finish(), backIndex: try backBuilder.finish(), header: header)
        return documents
    }

    /// Incremental update: the documents changed after `since`, batch by batch, each batch one sorted pass of
    /// removals (the rows the back-index says a document emitted before) and insertions over each tree.
    private func apply(changesSince since: UInt64, from snapshot: DocumentSnapshot, to current: ViewSnapshot,
                       mapper: Mapper, header: ViewHeader) throws -> Int {
        var rows = BTree(file: storage, root: current.rows.root, configuration: rowsConfiguration)
        var back = BTree(file: storage, root: current.backIndex.root, configuration: backConfiguration)
        var batch: [(id: [UInt8], entry: [UInt8]?)] = []
        var documents = 0
        func flush() throws {
            let mapped = try map(batch, snapshot: snapshot, mapper: mapper)
            var rowActions: [BTreeAction] = []
            var backActions: [BTreeAction] = []
            for doc in mapped {
                if let old = try back.get(doc.id) {
                    for (i, key) in try old.withUnsafeBytes(BackIndexEntry.decode).enumerated() {
                        rowActions.append(.remove(RowKey.make(key: key, id: doc.id, index: i)))
                    }
                }
                for row in doc.rows { rowActions.append(.put(row.key, row.value)) }
                backActions.append(doc.keys.isEmpty ? .remove(doc.id) : .put(doc.id, BackIndexEntry.encode(doc.keys)))
            }
            rows = try rows.modified(by: ViewIndex.sortedUnique(rowActions))
            back = try back.modified(by: ViewIndex.sortedUnique(backActions))
            documents += batch.count
            batch.removeAll(keepingCapacity: true)
        }
        let range = KeyRange(lower: KeyBound(DocumentFile.sequenceKey(since), inclusive: false))
        try snapshot.bySequence.forEach(in: range) { _, id in
            batch.append((Array(id), nil))
            if batch.count == ViewIndex.batchSize { try flush() }
            return true
        }
        try flush()
        try commit(rows: rows, backIndex: back, header: header)
        return documents
    }

    /// Actions sorted by key; of several for one key (a row removed and emitted again) the last wins.
    static func sortedUnique(_ actions: [BTreeAction]) -> [BTreeAction] {
        let order = actions.indices.sorted { a, b in
            let c = compareArrays(actions[a].key, actions[b].key)
            return c != 0 ? c < 0 : a < b
        }
        var out: [BTreeAction] = []
        out.reserveCapacity(actions.count)
        for i in order {
            if let last = out.last, last.key == actions[i].key {
                out[out.count - 1] = actions[i]
            } else {
                out.append(actions[i])
            }
        }
        return out
    }
}

/// A buffer written from several threads at distinct indices.
struct UnsafeSendableBuffer<T>: @unchecked Sendable {
    let buffer: UnsafeMutableBufferPointer<T>
    init(_ buffer: UnsafeMutableBufferPointer<T>) { self.buffer = buffer }
}
