import CSofaSys
import SofaStorage

/// How an all-documents query runs: a range scan of the by-ID tree (or of the by-sequence tree for
/// ``AllDocsMode/bySequence``), or point lookups for ``Query/keys``; rows filtered by mode, then by the post
/// filter, then skipped and limited.
extension Query {
    func runAllDocuments() throws -> QueryEnumerator {
        let snapshot = try database.readSnapshot()
        let source = RowSource(snapshot: snapshot)
        let total = totalRows(snapshot)
        var store = RowStore(source: source, keyIsSequence: allDocsMode == .bySequence)
        // A whole-index scan's size is known from the stored counts; a range's is not, so it grows as it goes.
        // Without a post filter every counted row is kept, so the whole count is reserved at once (growing a
        // million-row array by doubling copies it ~4 times over); with one, at most 64 Ki rows up front.
        let expected = keys?.count ?? (startKey == nil && endKey == nil ? Int(clamping: total) : 0)
        let reserved = postFilter == nil ? expected : min(expected, 1 << 16)
        store.reserveCapacity(min(limit ?? Int.max, reserved))
        store = try scanAllDocuments(snapshot, source: source, into: consume store)
        return QueryEnumerator(store: store, sequenceNumber: snapshot.lastSequence, totalRows: Int(clamping: total),
                               database: database)
    }

    /// Hands each row of an all-documents query to `body` as the scan reaches it (see ``forEachRow(_:)``).
    func forEachAllDocumentsRow(_ body: (QueryRow) throws -> Void) throws {
        let snapshot = try database.readSnapshot()
        let source = RowSource(snapshot: snapshot)
        try withoutActuallyEscaping(body) { body in
            let visitor = RowVisitor(source: source, keyIsSequence: allDocsMode == .bySequence, body: body)
            _ = try scanAllDocuments(snapshot, source: source, into: visitor)
        }
    }

    /// The documents the mode covers, from the by-ID tree's stored counts.
    private func totalRows(_ snapshot: DocumentSnapshot) -> UInt64 {
        let counts = snapshot.counts
        switch allDocsMode {
        case .includeDeleted: return counts.live &+ counts.deleted  // wrapping: damaged counts must not trap
        case .onlyConflicts: return counts.conflicted
        case .allDocs, .showConflicts, .bySequence: return counts.live
        }
    }

    /// Reads the rows the query selects, in order, into `output`, and returns it. `output` is consumed so that
    /// a result store's arrays stay uniquely referenced and grow in place into the capacity reserved for them.
    private func scanAllDocuments<Output: AllDocsOutput>(_ snapshot: DocumentSnapshot, source: RowSource,
                                                         into output: consuming Output) throws -> Output {
        // Without a filter, every by-ID row is output in includeDeleted mode, so the tree skips with its
        // stored counts instead of reading the skipped rows.
        // (Not through pending changes: the tree's counts do not count them.)
        let treeSkip = allDocsMode == .includeDeleted && postFilter == nil && keys == nil
            && snapshot.pending.isEmpty ? skip : 0
        var collector = AllDocsCollector(skip: skip - treeSkip, limit: limit, filter: postFilter, source: source,
                                         keyIsSequence: allDocsMode == .bySequence, output: output)
        if !collector.isFull {
            if let keys {
                try lookUp(keys, in: source, into: &collector)
            } else if allDocsMode == .bySequence {
                try scanBySequence(source, into: &collector)
            } else {
                // A leaf at a time: every visited entry's flags are checked first, in one pass whose loads the
                // CPU overlaps (at 1M documents the leaves are ~200 MB, and an entry's first touch is a cache
                // miss), then the span's rows are offered.
                let range = try idRange()
                // Pending changes of the commit log cut the tree's spans (and no tree skip is taken then).
                try snapshot.forEachByIDSpan(in: range, descending: descending, skip: UInt64(treeSkip)) { leaf, span in
                    try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: span.count) { flags in
                        let first = span.lowerBound
                        for i in span {
                            let entry = leaf.value(i)
                            // ~1 KiB on: the entries a few ahead (a by-ID entry with its inline body is ~200 bytes
                            // at 1M documents), whose first touch would otherwise stall the pass.
                            sofa_prefetch(entry.baseAddress.map { $0 + Query.prefetchDistance })
                            flags[i - first] = try Query.checkedFlags(of: entry, source: source)
                        }
                        return try offerSpan(leaf: leaf, span: span, flags: UnsafeBufferPointer(flags),
                                             source: source, to: &collector)
                    }
                }
            }
        }
        return collector.output
    }

    /// How far ahead of the entry it checks a scan's flags pass asks for memory, in bytes.
    static let prefetchDistance = 1_024

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
    private func scanBySequence<Output>(_ source: RowSource, into collector: inout AllDocsCollector<Output>) throws {
        let snapshot = source.snapshot
        let (low, lowInclusive, high, highInclusive) = try bounds(Query.sequenceNumber)
        let range = KeyRange(lower: low.map { KeyBound(DocumentFile.sequenceKey($0), inclusive: lowInclusive) },
                             upper: high.map { KeyBound(DocumentFile.sequenceKey($0), inclusive: highInclusive) })
        try snapshot.forEachBySequence(in: range, descending: descending) { _, id in
            try offerSequenceEntry(idBytes: id, source: source, to: &collector)
        }
    }

    /// Offers the by-ID entry of the ID a by-sequence entry names.
    private func offerSequenceEntry<Output>(idBytes: UnsafeRawBufferPointer, source: RowSource,
                                            to collector: inout AllDocsCollector<Output>) throws -> Bool {
        guard let entry = try source.snapshot.entry(for: idBytes) else {
            throw SofaError(.corruption, "by-sequence entry names a document missing from by-ID",
                            path: source.snapshot.path)
        }
        return try offerEntry(leaf: entry.node, index: entry.index, source: source, to: &collector)
    }

    /// Rows for the listed keys, in the order given (reversed when descending).
    private func lookUp<Output>(_ keys: [JSON], in source: RowSource,
                                into collector: inout AllDocsCollector<Output>) throws {
        let snapshot = source.snapshot
        for key in descending ? keys.reversed() : keys {
            let more: Bool
            if allDocsMode == .bySequence {
                let sequence = try Query.sequenceNumber(key)!
                guard let id = try snapshot.documentID(atSequence: sequence) else { continue }
                more = try id.withUnsafeBytes { try offerSequenceEntry(idBytes: $0, source: source, to: &collector) }
            } else {
                let id = try Query.idBytes(key)!
                more = try id.withUnsafeBytes { idBytes in
                    guard let entry = try snapshot.entry(for: idBytes) else { return true }
                    return try offerEntry(leaf: entry.node, index: entry.index, source: source, to: &collector)
                }
            }
            if !more { return }
        }
    }

    /// Offers the row for by-ID entry `index` of `leaf` unless the mode leaves the document out; returns false
    /// once the collector is full. The entry's summary is checked now (its flags are all a scan needs); the row
    /// decodes its ID, key, value and document only when asked.
    private func offerEntry<Output>(leaf: Node, index: Int, source: RowSource,
                                    to collector: inout AllDocsCollector<Output>) throws -> Bool {
        switch rowKind(try Query.checkedFlags(of: leaf.value(index), source: source)) {
        case .none: return true
        case .entry: return try collector.offer(leaf: leaf, index: index)
        case .conflicts: return try collector.offer(conflictRow(leaf: leaf, index: index, source: source))
        }
    }

    /// The document flags of a by-ID entry whose summary decodes (the fast check, else the full decoder, which
    /// names any damage).
    @inline(__always)
    private static func checkedFlags(of entry: UnsafeRawBufferPointer, source: RowSource) throws -> UInt8 {
        try RecordSummary.checkedFlags(of: entry) ?? RecordSummary(decoding: entry, path: source.snapshot.path).flags
    }

    /// Offers the rows of the entries `span` of `leaf` (in descending order when the query is), whose checked
    /// flags are `flags` (`flags[0]` is `span.lowerBound`'s); returns false once the collector is full. The
    /// admitted entries are handed to the output a run at a time, so that a streaming output moves one row
    /// value along the run (see ``RowVisitor``); a conflict row ends a run, and with a post filter every run is
    /// one row, so that the filter and the output see the rows alternately, in order.
    private func offerSpan<Output>(leaf: Node, span: ClosedRange<Int>, flags: UnsafeBufferPointer<UInt8>,
                                   source: RowSource, to collector: inout AllDocsCollector<Output>) throws -> Bool {
        try withUnsafeTemporaryAllocation(of: Int.self, capacity: span.count) { run in
            var count = 0
            /// Hands the run collected so far to the output and starts a new one.
            func endRun() throws {
                try collector.output.take(leaf: leaf, indices: UnsafeBufferPointer(rebasing: run[..<count]))
                count = 0
            }
            let step = descending ? -1 : 1
            var i = descending ? span.upperBound : span.lowerBound
            for _ in 0..<span.count {
                defer { i += step }
                switch rowKind(flags[i - span.lowerBound]) {
                case .none:
                    continue
                case .entry:
                    guard collector.admits(leaf: leaf, index: i) else { continue }
                    run[count] = i
                    count += 1
                    // The filter sees each row just before the output does, as forEachRow promises.
                    if collector.window.filter != nil { try endRun() }
                case .conflicts:
                    try endRun()
                    guard try collector.offer(conflictRow(leaf: leaf, index: i, source: source)) else { return false }
                }
                if collector.isFull { break }
            }
            try endRun()
            return !collector.isFull
        }
    }

    /// What a by-ID entry with document flags `flags` gives in this query's mode.
    private enum RowKind {
        /// No row: the mode leaves the document out.
        case none
        /// A row read from the entry on demand.
        case entry
        /// A row built in full with the document's conflicting revisions.
        case conflicts
    }

    @inline(__always)
    private func rowKind(_ flags: UInt8) -> RowKind {
        let isDeleted = flags & DocumentRecord.flagDeleted != 0
        let isConflicted = flags & DocumentRecord.flagConflicted != 0
        switch allDocsMode {
        case .allDocs, .bySequence: return isDeleted ? .none : .entry
        case .includeDeleted: return .entry
        case .showConflicts: return isDeleted ? .none : isConflicted ? .conflicts : .entry
        case .onlyConflicts: return isDeleted || !isConflicted ? .none : .conflicts
        }
    }

    /// The row of a conflicted document's entry, with its conflicting revisions (the whole revision tree is
    /// decoded for them).
    private func conflictRow(leaf: Node, index: Int, source: RowSource) throws -> QueryRow {
        let entry = leaf.value(index)
        let summary = try RecordSummary(decoding: entry, path: source.snapshot.path)
        let tree = try DocumentRecord(decoding: entry, path: source.snapshot.path).tree
        let conflicts = ([tree.winner.id] + tree.conflictingRevisions).map(\.description)
        let id = String(storedUTF8: leaf.key(index))
        let value = QueryRow.Value.revision(QueryRow.RevisionIDBox(id: summary.winner), deleted: false)
        return QueryRow(key: .string(id), value: value, documentID: id, sourceDocumentID: id,
                        sequenceNumber: summary.sequence, conflictingRevisions: conflicts, source: source)
    }
}

/// The post filter, then skip, then limit, applied to rows as they come: which rows are output, and when the
/// output is full. Shared by ``RowCollector`` and ``AllDocsCollector``, which differ only in where rows go.
struct RowWindow {
    var toSkip: Int
    let limit: Int?
    let filter: (@Sendable (QueryRow) -> Bool)?
    /// Rows admitted so far.
    private(set) var taken = 0

    init(skip: Int, limit: Int?, filter: (@Sendable (QueryRow) -> Bool)?) {
        toSkip = skip
        self.limit = limit
        self.filter = filter
    }

    var isFull: Bool { limit.map { taken >= $0 } ?? false }

    /// Whether the next row is to be output (then it is counted, and the caller outputs it): false when the
    /// filter rejects it or the skip takes it. `passes` applies the filter to the row, so a caller makes the
    /// row, or borrows it, only when there is a filter.
    @inline(__always)
    mutating func admits(_ passes: (_ filter: @Sendable (QueryRow) -> Bool) throws -> Bool) rethrows -> Bool {
        if let filter, try !passes(filter) { return false }
        if toSkip > 0 {
            toSkip -= 1
            return false
        }
        taken += 1
        return true
    }
}

/// A ``RowWindow`` over rows collected into a ``RowStore``.
struct RowCollector {
    var window: RowWindow
    var store = RowStore()

    init(skip: Int, limit: Int?, filter: (@Sendable (QueryRow) -> Bool)?) {
        window = RowWindow(skip: skip, limit: limit, filter: filter)
    }

    var isFull: Bool { window.isFull }

    /// Takes a row if it passes; returns false once the limit is reached. The row is consumed, so a scan's
    /// row moves into the result instead of being copied and destroyed (a retain/release pair per field).
    mutating func offer(_ row: consuming QueryRow) -> Bool {
        guard window.admits({ $0(row) }) else { return true }
        store.append(row)
        return !isFull
    }
}

/// Where an all-documents query's rows go: into a result (``RowStore``), or to the caller one at a time
/// (``RowVisitor``).
protocol AllDocsOutput {
    /// Takes the rows of by-ID entries `indices` of `leaf`, in that order.
    mutating func take(leaf: Node, indices: UnsafeBufferPointer<Int>) throws
    /// Takes a row given in full (a conflict row).
    mutating func take(_ row: consuming QueryRow) throws
}

/// A ``RowWindow`` for all-documents queries, whose rows go to an ``AllDocsOutput``.
struct AllDocsCollector<Output: AllDocsOutput> {
    var window: RowWindow
    let source: RowSource
    let keyIsSequence: Bool
    var output: Output

    init(skip: Int, limit: Int?, filter: (@Sendable (QueryRow) -> Bool)?, source: RowSource, keyIsSequence: Bool,
         output: Output) {
        window = RowWindow(skip: skip, limit: limit, filter: filter)
        self.source = source
        self.keyIsSequence = keyIsSequence
        self.output = output
    }

    var isFull: Bool { window.isFull }

    /// Whether the row of by-ID entry `index` of `leaf` is to be output (then it is counted, and the caller
    /// hands it to the output). The row is made for the filter only when there is one.
    @inline(__always)
    mutating func admits(leaf: Node, index: Int) -> Bool {
        let (source, keyIsSequence) = (source, keyIsSequence)
        return window.admits {
            $0(QueryRow(entry: QueryRow.Entry(leaf: leaf, keyIsSequence: keyIsSequence), index: index, source: source))
        }
    }

    /// Takes by-ID entry `index` of `leaf` if its row passes; returns false once the limit is reached.
    mutating func offer(leaf: Node, index: Int) throws -> Bool {
        guard admits(leaf: leaf, index: index) else { return true }
        // A run of one: a row value per call (key lookups and by-sequence scans offer entry by entry).
        try withUnsafePointer(to: index) {
            try output.take(leaf: leaf, indices: UnsafeBufferPointer(start: $0, count: 1))
        }
        return !isFull
    }

    /// Takes a row if it passes; returns false once the limit is reached.
    mutating func offer(_ row: consuming QueryRow) throws -> Bool {
        guard window.admits({ $0(row) }) else { return true }
        try output.take(row)
        return !isFull
    }
}

extension RowStore: AllDocsOutput {
    mutating func take(leaf: Node, indices: UnsafeBufferPointer<Int>) {
        for index in indices { append(leaf: leaf, index: index) }
    }

    mutating func take(_ row: consuming QueryRow) {
        append(row)
    }
}

/// Hands each row to the caller of ``Query/forEachRow(_:)`` as it is read; keeps none. One row value per run
/// of entries is made, a local moved from entry to entry (see ``QueryRow/moveEntry(to:)``): making and
/// destroying a row per entry, with a retain and release of its leaf and source, was a quarter of a scanned
/// row's cost, and a row kept in the visitor was copied (136 bytes) for every call of `body`.
struct RowVisitor: AllDocsOutput {
    let source: RowSource
    let keyIsSequence: Bool
    let body: (QueryRow) throws -> Void

    init(source: RowSource, keyIsSequence: Bool, body: @escaping (QueryRow) throws -> Void) {
        self.source = source
        self.keyIsSequence = keyIsSequence
        self.body = body
    }

    func take(leaf: Node, indices: UnsafeBufferPointer<Int>) throws {
        guard let first = indices.first else { return }
        var row = QueryRow(entry: QueryRow.Entry(leaf: leaf, keyIsSequence: keyIsSequence), index: first,
                           source: source)
        for index in indices {
            row.moveEntry(to: index)
            try body(row)
        }
    }

    func take(_ row: consuming QueryRow) throws {
        try body(row)
    }
}
