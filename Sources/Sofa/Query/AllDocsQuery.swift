import SofaStorage

/// How an all-documents query runs: a range scan of the by-ID tree (or of the by-sequence tree for
/// ``AllDocsMode/bySequence``), or point lookups for ``Query/keys``; rows filtered by mode, then by the post
/// filter, then skipped and limited.
extension Query {
    func runAllDocuments() throws -> QueryEnumerator {
        let snapshot = try database.readSnapshot()
        let source = RowSource(snapshot: snapshot)
        let counts = snapshot.counts
        let total: UInt64
        switch allDocsMode {
        case .includeDeleted: total = counts.live + counts.deleted
        case .onlyConflicts: total = counts.conflicted
        case .allDocs, .showConflicts, .bySequence: total = counts.live
        }
        // Without a filter, every by-ID row is output in includeDeleted mode, so the tree skips with its
        // stored counts instead of reading the skipped rows.
        let treeSkip = allDocsMode == .includeDeleted && postFilter == nil && keys == nil ? skip : 0
        var collector = RowCollector(skip: skip - treeSkip, limit: limit, filter: postFilter,
                                     store: RowStore(source: source, keyIsSequence: allDocsMode == .bySequence))
        // A whole-index scan's size is known from the stored counts; a range's is not, so it grows as it goes.
        // Without a post filter every counted row is kept, so the whole count is reserved at once (growing a
        // million-row array by doubling copies it ~4 times over); with one, at most 64 Ki rows up front.
        let expected = keys?.count ?? (startKey == nil && endKey == nil ? Int(clamping: total) : 0)
        let reserved = postFilter == nil ? expected : min(expected, 1 << 16)
        collector.store.reserveCapacity(min(limit ?? Int.max, reserved))
        if !collector.isFull {
            if let keys {
                try lookUp(keys, in: source, into: &collector)
            } else if allDocsMode == .bySequence {
                try scanBySequence(source, into: &collector)
            } else {
                let range = try idRange()
                try snapshot.byID.forEachEntry(in: range, descending: descending, skip: UInt64(treeSkip)) { leaf, i in
                    try offerEntry(leaf: leaf, index: i, source: source, to: &collector)
                }
            }
        }
        return QueryEnumerator(store: collector.store, sequenceNumber: snapshot.lastSequence, totalRows: Int(total),
                               database: database)
    }

    /// The by-ID key range: start and end swap roles when descending; with ``prefixMatchLevel`` the high end
    /// (the end key, or the start key when descending) matches every ID it prefixes.
    private func idRange() throws -> KeyRange {
        var (low, lowInclusive, high, highInclusive) = try bounds(Query.idBytes)
        if prefixMatchLevel > 0, high != nil {
            // CBL appends U+FFFF to the string. IDs compare here as UTF-8 bytes, where U+FFFF (EF BF BF) sorts
            // below characters beyond the BMP (F0…); the byte FF, which UTF-8 never contains, sorts above every
            // continuation, so every ID beginning with the prefix matches.
            high!.append(0xFF)
            highInclusive = true
        }
        if low != nil && low!.isEmpty && lowInclusive { low = nil }
        return KeyRange(lower: low.map { KeyBound($0, inclusive: lowInclusive) },
                        upper: high.map { KeyBound($0, inclusive: highInclusive) })
    }

    /// The start and end keys, converted, as the low and high ends of the scan: swapped when descending.
    private func bounds<T>(_ convert: (JSON?) throws -> T?) throws -> (T?, Bool, T?, Bool) {
        let start = try convert(startKey), end = try convert(endKey)
        return descending ? (end, inclusiveEnd, start, inclusiveStart) : (start, inclusiveStart, end, inclusiveEnd)
    }

    private static func idBytes(_ key: JSON?) throws -> [UInt8]? {
        guard let key else { return nil }
        guard case .string(let s) = key else {
            throw SofaError(.invalidArgument, "all-documents keys are document IDs (strings), not a \(key.typeName)")
        }
        return Array(s.utf8)
    }

    private static func sequenceNumber(_ key: JSON?) throws -> UInt64? {
        guard let key else { return nil }
        guard case .number(let n) = key, n >= 0, n <= 9_007_199_254_740_992, n.rounded(.towardZero) == n else {
            throw SofaError(.invalidArgument, "bySequence keys are sequence numbers (whole, not negative), not \(key)")
        }
        return UInt64(n)
    }

    /// Rows of documents in sequence order: a scan of the by-sequence tree, each ID looked up in by-ID.
    private func scanBySequence(_ source: RowSource, into collector: inout RowCollector) throws {
        let snapshot = source.snapshot
        let (low, lowInclusive, high, highInclusive) = try bounds(Query.sequenceNumber)
        let range = KeyRange(lower: low.map { KeyBound(DocumentFile.sequenceKey($0), inclusive: lowInclusive) },
                             upper: high.map { KeyBound(DocumentFile.sequenceKey($0), inclusive: highInclusive) })
        try snapshot.bySequence.forEach(in: range, descending: descending) { _, id in
            try offerSequenceEntry(idBytes: id, source: source, to: &collector)
        }
    }

    /// Offers the by-ID entry of the ID a by-sequence entry names.
    private func offerSequenceEntry(idBytes: UnsafeRawBufferPointer, source: RowSource,
                                    to collector: inout RowCollector) throws -> Bool {
        guard let entry = try source.snapshot.byID.value(for: idBytes) else {
            throw SofaError(.corruption, "by-sequence entry names a document missing from by-ID",
                            path: source.snapshot.path)
        }
        return try offerEntry(leaf: entry.node, index: entry.index, source: source, to: &collector)
    }

    /// Rows for the listed keys, in the order given (reversed when descending).
    private func lookUp(_ keys: [JSON], in source: RowSource, into collector: inout RowCollector) throws {
        let snapshot = source.snapshot
        for key in descending ? keys.reversed() : keys {
            let more: Bool
            if allDocsMode == .bySequence {
                let sequence = try Query.sequenceNumber(key)!
                guard let id = try snapshot.bySequence.get(DocumentFile.sequenceKey(sequence)) else { continue }
                more = try id.withUnsafeBytes { try offerSequenceEntry(idBytes: $0, source: source, to: &collector) }
            } else {
                let id = try Query.idBytes(key)!
                more = try id.withUnsafeBytes { idBytes in
                    guard let entry = try snapshot.byID.value(for: idBytes) else { return true }
                    return try offerEntry(leaf: entry.node, index: entry.index, source: source, to: &collector)
                }
            }
            if !more { return }
        }
    }

    /// Offers the row for by-ID entry `index` of `leaf` unless the mode leaves the document out; returns false
    /// once the collector is full. The entry's summary is decoded (and so checked) now; the row decodes its ID,
    /// key and document only when asked.
    private func offerEntry(leaf: Node, index: Int, source: RowSource,
                            to collector: inout RowCollector) throws -> Bool {
        let entry = leaf.value(index)
        let summary = try RecordSummary(decoding: entry, path: source.snapshot.path)
        switch allDocsMode {
        case .allDocs, .bySequence:
            if summary.isDeleted { return true }
        case .includeDeleted:
            break
        case .showConflicts, .onlyConflicts:
            if summary.isDeleted || (allDocsMode == .onlyConflicts && !summary.isConflicted) { return true }
            if summary.isConflicted {
                // The conflict list needs the whole revision tree: such rows are built in full.
                let tree = try DocumentRecord(decoding: entry, path: source.snapshot.path).tree
                let conflicts = ([tree.winner.id] + tree.conflictingRevisions).map(\.description)
                let id = String(decoding: leaf.key(index), as: UTF8.self)
                let value = QueryRow.Value.revision(QueryRow.RevisionIDBox(id: summary.winner), deleted: false)
                return collector.offer(QueryRow(key: .string(id), value: value, documentID: id, sourceDocumentID: id,
                                                sequenceNumber: summary.sequence, conflictingRevisions: conflicts,
                                                source: source))
            }
        }
        return collector.offer(leaf: leaf, index: index)
    }
}

/// Applies the post filter, then skip, then limit, to rows as they come.
struct RowCollector {
    var toSkip: Int
    let limit: Int?
    let filter: (@Sendable (QueryRow) -> Bool)?
    var store: RowStore

    init(skip: Int, limit: Int?, filter: (@Sendable (QueryRow) -> Bool)?, store: RowStore = RowStore()) {
        self.toSkip = skip
        self.limit = limit
        self.filter = filter
        self.store = store
    }

    var isFull: Bool { limit.map { store.count >= $0 } ?? false }

    /// Takes by-ID entry `index` of `leaf` if its row passes, keeping only a reference to it; returns false
    /// once the limit is reached.
    mutating func offer(leaf: Node, index: Int) -> Bool {
        if let filter, !filter(store.entryRow(leaf: leaf, index: index)) { return true }
        if toSkip > 0 {
            toSkip -= 1
            return true
        }
        store.append(leaf: leaf, index: index)
        return !isFull
    }

    /// Takes a row if it passes; returns false once the limit is reached. The row is consumed, so a scan's
    /// row moves into the result instead of being copied and destroyed (a retain/release pair per field).
    mutating func offer(_ row: consuming QueryRow) -> Bool {
        if let filter, !filter(row) { return true }
        if toSkip > 0 {
            toSkip -= 1
            return true
        }
        store.append(row)
        return !isFull
    }
}
