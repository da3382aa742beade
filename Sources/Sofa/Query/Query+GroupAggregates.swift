import SofaStorage

extension Query {
    /// Whether this query can be answered from the group aggregates of `snapshot` (FORMAT.md §10.2.6): grouped,
    /// without `keys`, at a level the index materializes.
    func usesGroupAggregate(_ snapshot: ViewSnapshot) -> Bool {
        keys == nil && !mapOnly && (1...255).contains(groupLevel)
            && snapshot.header.groupLevels.contains(UInt8(groupLevel))
    }

    /// One row per group of `range` at ``groupLevel``, from the groups tree: the groups holding the range's
    /// first and last rows may lie partly outside it and are reduced directly over their rows in the range;
    /// every group between them lies wholly inside it (groups are contiguous) and is read from its aggregate.
    /// Output order, `skip`, `limit` and `postFilter` are those of the rows-tree computation.
    func reduceGroupsFromAggregate(_ snapshot: ViewSnapshot, _ range: KeyRange, _ reducer: ViewReducer?,
                                   into collector: inout RowCollector) throws {
        ViewIndex.aggregateQueries.add(1, ordering: .relaxed)
        let level = UInt8(groupLevel)
        let rows = snapshot.rows
        var firstKey: [UInt8]?, firstValue: [UInt8] = []
        try rows.forEach(in: range) { key, value in
            (firstKey, firstValue) = (Array(key), Array(value))
            return false
        }
        guard let firstKey else { return }
        var lastKey: [UInt8] = []
        try rows.forEach(in: range, descending: true) { key, _ in
            lastKey = Array(key)
            return false
        }
        let low = try firstKey.withUnsafeBytes { try GroupAggregate.prefix(of: $0, level: level) }
        let high = try lastKey.withUnsafeBytes { try GroupAggregate.prefix(of: $0, level: level) }

        func output(key: JSON, rowCount: UInt64, reduction: UnsafeRawBufferPointer) throws -> QueryRow {
            let value = try reducer?.output(reduction, rowCount: rowCount)
            return QueryRow(key: key, value: .json(value), documentID: nil, sourceDocumentID: nil, sequenceNumber: 0,
                            source: nil)
        }
        /// The group `prefix` restricted to `range`, reduced over the rows.
        func edge(_ prefix: [UInt8], firstValue known: [UInt8]?) throws -> QueryRow {
            let within = low == high ? range : range.intersection(GroupAggregate.rowRange(prefix))
            let reduction = try rows.reduce(in: within)
            var value = known ?? []
            if known == nil {
                try rows.forEach(in: within) { _, v in
                    value = Array(v)
                    return false
                }
            }
            let key = try value.withUnsafeBytes { try RowValue.groupKey($0, items: groupLevel) }
            return try reduction.value.withUnsafeBytes {
                try output(key: key, rowCount: reduction.rowCount, reduction: $0)
            }
        }
        func lowEdge() throws -> Bool { collector.offer(try edge(low, firstValue: firstValue)) }
        func highEdge() throws -> Bool { collector.offer(try edge(high, firstValue: nil)) }
        guard low != high else {
            _ = try lowEdge()
            return
        }
        func middle() throws -> Bool {
            let between = KeyRange(
                lower: KeyBound(GroupAggregate.treeKey(level: level, prefix: low), inclusive: false),
                upper: KeyBound(GroupAggregate.treeKey(level: level, prefix: high), inclusive: false))
            let count = Int(clamping: try snapshot.groups.count(in: between))
            // Without a filter every group is an output row: skipped ones are passed by their subtree counts.
            var treeSkip = 0
            if collector.window.filter == nil && collector.window.toSkip > 0 {
                treeSkip = min(collector.window.toSkip, count)
                collector.window.toSkip -= treeSkip
            }
            let groupsOut = min(count - treeSkip, collector.window.limit ?? .max)
            collector.store.reserveCapacity(collector.store.count + groupsOut + 1)
            var more = true
            try snapshot.groups.forEach(in: between, descending: descending, skip: UInt64(treeSkip)) { _, value in
                let aggregate = try GroupAggregate(value)
                let key = try PackedJSON.decode(aggregate.packedKey) ?? .null
                more = collector.offer(try output(key: key, rowCount: aggregate.rowCount,
                                                  reduction: aggregate.reduction))
                return more
            }
            return more
        }
        if descending {
            _ = try highEdge() && middle() && lowEdge()
        } else {
            _ = try lowEdge() && middle() && highEdge()
        }
    }
}
