import Dispatch
import SofaStorage

extension View {
    /// A query over this view: every row in key order until you set options.
    ///
    /// ```swift
    /// var query = db.view(named: "carsByColorAndModel").createQuery()
    /// query.startKey = ["red"]
    /// query.endKey = ["red", [:]]
    /// for row in try query.run() { print(row.key(at: 1)!, row.documentID!) }
    /// ```
    public func createQuery() -> Query {
        Query(database: database, source: .view(self))
    }
}

/// How a view query runs (CouchDB's view semantics, as Couchbase Lite 1.x documents them):
///
/// 1. the key ranges: one from the start/end keys (swapped when descending, doc-ID bounds applied to rows
///    whose key equals the bound's key, the prefix-matched key widened), or one per distinct key of `keys`;
/// 2. the rows of those ranges — or, when the view reduces and `mapOnly` is off, one reduced row for all of
///    them, or one per group at `groupLevel`, using the reductions stored with whole subtrees — or, at a level
///    the index keeps group aggregates for, reading one stored entry per group (`Query+GroupAggregates.swift`);
/// 3. `postFilter`, then `sortDescriptors`, then `skip` and `limit`, all on the output rows.
extension Query {
    func runView(_ view: View) throws -> QueryEnumerator {
        var opened = try view.index()
        if indexUpdateMode == .before && view.hasMap && !database.options.readOnly {
            // Checked without the writer lock first: most queries find the index current, and read it as opened.
            let documents = database.documents.storage.latestCommit
            let indexed = try opened?.snapshot().header.lastSequence ?? 0
            if try indexed < DocumentFile.lastSequence(in: documents, path: database.documents.path) {
                try view.updateIndex()
                opened = try view.index()
            }
        }
        defer {
            if indexUpdateMode == .after && view.hasMap && !database.options.readOnly {
                DispatchQueue.global().async { try? view.updateIndex() }
            }
        }
        guard let index = opened else {
            return QueryEnumerator(rows: [], sequenceNumber: 0, totalRows: 0, database: database)
        }
        if groupLevel > 0 && keys == nil && !mapOnly { try view.prepareGroupAggregate(level: groupLevel, index: index) }
        let snapshot = try index.snapshot()
        let source = RowSource(snapshot: try database.documents.committedSnapshot())
        let ranges = try keyRanges()
        let reducer = index.reduce.map { ViewReducer(reduce: $0) }
        let reducing = !mapOnly && (reducer != nil || groupLevel > 0)
        let sorting = !sortDescriptors.isEmpty
        var collector = RowCollector(skip: sorting ? 0 : skip, limit: sorting ? nil : limit, filter: postFilter)
        if !collector.isFull {
            if !reducing {
                // Without a filter every row is output, so a single range skips with the stored counts.
                let treeSkip = postFilter == nil && !sorting && ranges.count == 1 ? skip : 0
                // Room for a small page up front, so 20 rows take one allocation rather than six.
                if let limit = collector.window.limit { collector.store.reserveCapacity(min(limit, 256)) }
                collector.window.toSkip -= treeSkip
                for range in descending ? ranges.reversed() : ranges {
                    var more = true
                    try snapshot.rows.forEach(in: range, descending: descending, skip: UInt64(treeSkip)) { key, value in
                        more = collector.offer(try Query.row(key: key, value: value, source: source))
                        return more
                    }
                    if !more { break }
                }
            } else if groupLevel == 0 {
                try reduceAll(snapshot.rows, ranges, reducer!, into: &collector)
            } else if usesGroupAggregate(snapshot) {
                try reduceGroupsFromAggregate(snapshot, ranges[0], reducer, into: &collector)
            } else {
                try reduceGroups(snapshot.rows, ranges, reducer, into: &collector)
            }
        }
        var rows = collector.store.rows
        if sorting { rows = Query.page(Query.sorted(rows, by: sortDescriptors), skip: skip, limit: limit) }
        return QueryEnumerator(rows: rows, sequenceNumber: snapshot.header.lastSequence,
                               totalRows: Int(snapshot.rows.rowCount), database: database)
    }

    /// A map row from its stored bytes.
    static func row(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, source: RowSource) throws -> QueryRow {
        let stored = try RowValue(value)
        let id = try RowKey.documentIDString(key, keyLength: stored.keyLength)
        // An emitted value {"_id": X} points the row at document X; the emitter stays the source.
        let target = stored.value?["_id"]?.stringValue ?? id
        return QueryRow(key: stored.key, value: .json(stored.value), documentID: target, sourceDocumentID: id,
                        sequenceNumber: stored.sequence, source: source)
    }

    /// One reduced row for all the ranges' rows; none when they hold no row.
    private func reduceAll(_ rows: BTree, _ ranges: [KeyRange], _ reducer: ViewReducer,
                           into collector: inout RowCollector) throws {
        var count: UInt64 = 0
        var parts: [[UInt8]] = []
        for range in ranges {
            let reduction = try rows.reduce(in: range)
            if reduction.rowCount > 0 {
                count += reduction.rowCount
                parts.append(reduction.value)
            }
        }
        guard count > 0 else { return }
        let value = parts.count == 1 ? parts[0] : try Query.rereduce(parts, reducer)
        _ = collector.offer(QueryRow(key: .null, value: .json(try reducer.output(value, rowCount: count)),
                                     documentID: nil, sourceDocumentID: nil, sequenceNumber: 0, source: nil))
    }

    static func rereduce(_ parts: [[UInt8]], _ reducer: ViewReducer) throws -> [UInt8] {
        try withPointers(parts) { try reducer.rereduce($0) }
    }

    /// Calls `body` with buffers over every array.
    private static func withPointers<R>(_ arrays: [[UInt8]],
                                        _ body: ([UnsafeRawBufferPointer]) throws -> R) rethrows -> R {
        var pointers: [UnsafeRawBufferPointer] = []
        func step(_ i: Int) throws -> R {
            if i == arrays.count { return try body(pointers) }
            return try arrays[i].withUnsafeBytes { p in
                pointers.append(p)
                return try step(i + 1)
            }
        }
        return try step(0)
    }

    /// One row per group at ``groupLevel``: array keys cut to their first items, other keys whole. Groups of
    /// adjacent ranges (several `keys`) that share a prefix are merged.
    private func reduceGroups(_ rows: BTree, _ ranges: [KeyRange], _ reducer: ViewReducer?,
                              into collector: inout RowCollector) throws {
        let level = groupLevel
        struct Group {
            var prefix: [UInt8]
            var key: JSON
            var count: UInt64
            var parts: [[UInt8]]
        }
        var pending: Group?
        var groups: [QueryRow] = []
        let streaming = !descending
        let merging = ranges.count > 1
        var more = true
        func close(_ group: Group) throws {
            var value: JSON?
            if let reducer {
                let bytes = group.parts.count == 1 ? group.parts[0] : try Query.rereduce(group.parts, reducer)
                value = try reducer.output(bytes, rowCount: group.count)
            }
            let row = QueryRow(key: group.key, value: .json(value), documentID: nil, sourceDocumentID: nil,
                               sequenceNumber: 0, source: nil)
            if streaming { more = collector.offer(row) } else { groups.append(row) }
        }
        for range in ranges where more {
            let groupPrefix = { (key: UnsafeRawBufferPointer) throws -> Int in
                try CollationKey.groupPrefixLength(key, level: level)
            }
            try rows.reduceGroups(in: range, groupPrefix: groupPrefix) { g in
                // One range never yields a group twice; only adjacent `keys` ranges may need merging.
                let prefix = merging
                    ? Array(g.firstKey[..<(try CollationKey.groupPrefixLength(g.firstKey, level: level))]) : []
                if merging, pending?.prefix == prefix {
                    pending!.count += g.reduction.rowCount
                    pending!.parts.append(g.reduction.value)
                    return true
                }
                if let previous = pending {
                    pending = nil
                    try close(previous)
                    if !more { return false }
                }
                let key = try g.firstValue.withUnsafeBytes { try RowValue.groupKey($0, items: level) }
                pending = Group(prefix: prefix, key: key, count: g.reduction.rowCount, parts: [g.reduction.value])
                return true
            }
        }
        if more, let last = pending { try close(last) }
        if !streaming {
            for row in groups.reversed() where !collector.offer(row) { break }
        }
    }

    // MARK: - Key ranges

    /// The rows-tree ranges the query reads, ascending.
    func keyRanges() throws -> [KeyRange] {
        if let keys {
            var encoded = Set<[UInt8]>()
            for key in keys { encoded.insert(try CollationKey(key).bytes) }
            return encoded.sorted { compareArrays($0, $1) < 0 }.map {
                KeyRange(lower: KeyBound($0, inclusive: true), upper: KeyBound($0 + [0xFF], inclusive: false))
            }
        }
        var start = startKey, end = endKey
        if prefixMatchLevel > 0 {
            if descending { start = start.map { Query.prefixMatch($0, level: prefixMatchLevel) } }
            else { end = end.map { Query.prefixMatch($0, level: prefixMatchLevel) } }
        }
        let startBytes = try start.map { try CollationKey($0).bytes }
        let endBytes = try end.map { try CollationKey($0).bytes }
        let lower = descending ? endBytes.map { Query.lowerBound($0, endKeyDocID, inclusiveEnd) }
                               : startBytes.map { Query.lowerBound($0, startKeyDocID, inclusiveStart) }
        let upper = descending ? startBytes.map { Query.upperBound($0, startKeyDocID, inclusiveStart) }
                               : endBytes.map { Query.upperBound($0, endKeyDocID, inclusiveEnd) }
        return [KeyRange(lower: lower, upper: upper)]
    }

    /// The low end at (`key`, `docID`): row keys are `key ‖ escaped ID ‖ 00 ‖ emit index`, and no escaped ID
    /// starts with FF, so `key ‖ FF` lies above every row of `key`; `key ‖ ID ‖ 00` below the rows of ID;
    /// `key ‖ ID ‖ 01` above them and below every longer ID.
    static func lowerBound(_ key: [UInt8], _ docID: String?, _ inclusive: Bool) -> KeyBound {
        guard let docID else { return KeyBound(inclusive ? key : key + [0xFF], inclusive: true) }
        var bytes = key
        RowKey.appendID(Array(docID.utf8), to: &bytes)
        if !inclusive { bytes[bytes.count - 1] = 0x01 }
        return KeyBound(bytes, inclusive: true)
    }

    /// The high end at (`key`, `docID`); see ``lowerBound(_:_:_:)``.
    static func upperBound(_ key: [UInt8], _ docID: String?, _ inclusive: Bool) -> KeyBound {
        guard let docID else { return KeyBound(inclusive ? key + [0xFF] : key, inclusive: false) }
        var bytes = key
        RowKey.appendID(Array(docID.utf8), to: &bytes)
        if inclusive { bytes[bytes.count - 1] = 0x01 }
        return KeyBound(bytes, inclusive: false)
    }

    /// Couchbase Lite's prefix match: level 1 extends a string with U+FFFF (above every continuation in
    /// ICU's root collation) and an array with `{}` (above every other item type); level N applies level
    /// N-1 to an array's last item.
    static func prefixMatch(_ key: JSON, level: Int) -> JSON {
        guard level > 0 else { return key }
        switch key {
        case .string(let s) where level == 1: return .string(s + "\u{FFFF}")
        case .array(var items) where level == 1:
            items.append([:])
            return .array(items)
        case .array(var items) where !items.isEmpty:
            items[items.count - 1] = prefixMatch(items[items.count - 1], level: level - 1)
            return .array(items)
        default: return key
        }
    }
}
