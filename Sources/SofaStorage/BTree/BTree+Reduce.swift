/// The count and reduction of a set of rows.
public struct Reduction: Sendable, Equatable {
    /// Rows summarized.
    public var rowCount: UInt64
    /// The reducer's output for those rows (empty when the tree has no reducer or there are no rows).
    public var value: [UInt8]
}

/// One group of a grouped reduce: rows sharing a group prefix, summarized.
public struct ReducedGroup {
    /// The first row of the group, in key order (key and value bytes).
    public var firstKey: [UInt8]
    /// The first row's value.
    public var firstValue: [UInt8]
    /// Count and reduction of the group's rows inside the range.
    public var reduction: Reduction
}

extension BTree {
    /// Rows in `range`, from stored counts: O(log n) node reads.
    public func count(in range: KeyRange = .all) throws -> UInt64 {
        if range.lower == nil && range.upper == nil { return rowCount }
        return try reduce(in: range, countOnly: true).rowCount
    }

    /// The count and reduction of the rows in `range`, using the stored reductions of every subtree that
    /// lies wholly inside it, so only the O(log n) nodes on the range's two edges are read.
    public func reduce(in range: KeyRange = .all) throws -> Reduction {
        try reduce(in: range, countOnly: false)
    }

    /// ``reduce(in:)`` and the first row of `range` (nil when the range is empty). The first row is taken from
    /// the leaf the reduce reads on the range's lower edge when it has rows of the range, as it nearly always
    /// does; only when the range begins with whole subtrees whose leaves the reduce does not read is it found
    /// by one more descent.
    package func reduceAndFirstEntry(in range: KeyRange) throws -> (reduction: Reduction, first: NodeSlice?) {
        try reduceAndFirstEntry(in: range, through: self)
    }

    /// ``reduceAndFirstEntry(in:)`` reading the nodes of its descent from `source` (a thread's ``BTreeReader``).
    func reduceAndFirstEntry<Source: NodeSource>(in range: KeyRange, through source: Source) throws
        -> (reduction: Reduction, first: NodeSlice?)
    {
        var parts = try reduceParts(in: range, reducer: configuration.reducer, wantsFirst: true, through: source)
        let reduction = try parts.finish()
        guard reduction.rowCount > 0 else { return (reduction, nil) }
        if let first = parts.first { return (reduction, first) }
        // The range's first row lies in a subtree wholly inside it: descend to it.
        var first: NodeSlice?
        try forEachEntry(in: range) { leaf, i in
            first = NodeSlice(node: leaf, index: i)
            return false
        }
        return (reduction, first)
    }

    private func reduce(in range: KeyRange, countOnly: Bool) throws -> Reduction {
        var parts = try reduceParts(in: range, reducer: countOnly ? nil : configuration.reducer, wantsFirst: false,
                                    through: self)
        return try parts.finish()
    }

    /// The pieces of the reduction of `range`: stored reductions of the subtrees wholly inside it, plus the rows
    /// of the leaves on its edges (and, when `wantsFirst`, the first of them, if a leaf gave the first rows).
    private func reduceParts<Source: NodeSource>(in range: KeyRange, reducer: (any Reducer)?, wantsFirst: Bool,
                                                 through source: Source) throws -> ReduceParts {
        var parts = ReduceParts(reducer: reducer, wantsFirst: wantsFirst)
        guard let root, !range.isEmpty else { return parts }
        if range.lower == nil && range.upper == nil {
            parts.addSubtree(root.rowCount, root.reduction)
        } else {
            try accumulate(root.offset, depth: 0, low: nil, range: range, into: &parts, through: source)
        }
        return parts
    }

    private func accumulate<Source: NodeSource>(_ offset: UInt64, depth: Int, low: UnsafeRawBufferPointer?,
                                                range: KeyRange, into parts: inout ReduceParts,
                                                through source: Source) throws {
        if try source.reduceLeafInPlace(at: offset, depth: depth, range: range, into: &parts) { return }
        try source.withNode(at: offset, depth: depth) { node in
            try accumulate(node, depth: depth, low: low, range: range, into: &parts, through: source)
        }
    }

    private func accumulate<Source: NodeSource>(_ node: Node, depth: Int, low: UnsafeRawBufferPointer?,
                                                range: KeyRange, into parts: inout ReduceParts,
                                                through source: Source) throws {
        if node.isLeaf {
            let span = leafSpan(node, range)
            if !span.isEmpty {
                if parts.wantsFirst && parts.rows == 0 {
                    parts.first = NodeSlice(node: node, index: span.lowerBound)
                }
                try parts.addRows(span.map { (node.key($0), node.value($0)) })
            }
            return
        }
        guard let span = childSpan(node, range) else { return }
        // Runs of children wholly inside the range are rereduced together, straight from the node's bytes:
        // one reduction per run instead of one copy per child.
        var run: [UnsafeRawBufferPointer] = []
        var runRows: UInt64 = 0
        for i in span {
            let childLow = i == 0 ? low : node.key(i - 1)
            let placement = placement(ofChild: i, in: node, span: span, low: childLow, range: range)
            switch placement {
            case .below, .above: continue
            case .inside:
                run.append(node.value(i))
                runRows += node.childRowCount(i)
            case .partial:
                try parts.addSubtrees(runRows, run)
                run.removeAll(keepingCapacity: true)
                runRows = 0
                try accumulate(node.childOffset(i), depth: depth + 1, low: childLow, range: range, into: &parts,
                               through: source)
            }
        }
        try parts.addSubtrees(runRows, run)
    }

    /// Reduces the rows of `range` group by group, in ascending key order, calling `body` once per group.
    ///
    /// `groupPrefix` returns, for a row key, the length of the prefix that names its group; rows are in one
    /// group when those prefixes are byte-equal. Prefixes must be self-delimiting (no group's prefix is a
    /// proper prefix of another's) so that every group is one contiguous key interval. Then a subtree whose
    /// largest key has the prefix of the group in progress lies wholly inside that group, and its stored
    /// reduction is used without reading it (CouchDB's `fold_reduce`): the cost is O(log n + groups × depth).
    /// Return `false` from `body` to stop.
    public func reduceGroups(
        in range: KeyRange = .all,
        groupPrefix: (UnsafeRawBufferPointer) throws -> Int,
        _ body: (ReducedGroup) throws -> Bool
    ) throws {
        guard let root, !range.isEmpty else { return }
        try withoutActuallyEscaping(groupPrefix) { groupPrefix in
            try withoutActuallyEscaping(body) { body in
                var fold = GroupFold(reducer: configuration.reducer, groupPrefix: groupPrefix, body: body)
                if try foldGroups(root.offset, low: nil, range: range, fold: &fold) {
                    try fold.closeGroup()
                }
            }
        }
    }

    /// Returns false when `body` asked to stop.
    private func foldGroups(_ offset: UInt64, low: UnsafeRawBufferPointer?, range: KeyRange,
                            fold: inout GroupFold) throws -> Bool {
        let node = try node(at: offset)
        if node.isLeaf {
            let span = leafSpan(node, range)
            var i = span.lowerBound
            while i < span.upperBound {
                guard fold.currentGroupContains(node.key(i)) else {
                    if try !fold.addRow(node.key(i), node.value(i)) { return false }  // a new group starts
                    i += 1
                    continue
                }
                // The rest of the group in this leaf: groups are contiguous, so its end is found by binary
                // search instead of comparing every row.
                var low = i + 1, high = span.upperBound
                while low < high {
                    let mid = (low + high) / 2
                    if fold.currentGroupContains(node.key(mid)) { low = mid + 1 } else { high = mid }
                }
                for j in i..<low { fold.pendingRows.append((node.key(j), node.value(j))) }
                i = low
            }
            return try fold.leaveLeaf()
        }
        guard let span = childSpan(node, range) else { return true }
        for i in span {
            let childLow = i == 0 ? low : node.key(i - 1)
            let placement = placement(ofChild: i, in: node, span: span, low: childLow, range: range)
            switch placement {
            case .below: continue
            case .above: return true
            case .inside where fold.currentGroupContains(node.key(i)):
                fold.parts.addSubtree(node.childRowCount(i), Array(node.value(i)))
            case .inside, .partial:
                if try !foldGroups(node.childOffset(i), low: childLow, range: range, fold: &fold) { return false }
            }
        }
        return true
    }
}

/// Pieces of a reduction being assembled: leaf rows reduced as they come, plus stored subtree reductions.
struct ReduceParts {
    let reducer: (any Reducer)?
    var rows: UInt64 = 0
    var reductions: [[UInt8]] = []
    /// Whether to keep ``first`` (``BTree/reduceAndFirstEntry(in:)``; a plain reduce makes no slice).
    let wantsFirst: Bool
    /// The first row added, when it came from a leaf rather than a stored subtree.
    var first: NodeSlice?

    init(reducer: (any Reducer)?, wantsFirst: Bool = false) {
        self.reducer = reducer
        self.wantsFirst = wantsFirst
    }

    /// Adds a whole subtree: its row count and its stored reduction.
    mutating func addSubtree(_ count: UInt64, _ reduction: [UInt8]) {
        rows &+= count
        if reducer != nil { reductions.append(reduction) }
    }

    /// Adds consecutive subtrees at once: their total row count and their stored reductions (views into a
    /// node that outlives the call), rereduced into one.
    mutating func addSubtrees(_ count: UInt64, _ stored: [UnsafeRawBufferPointer]) throws {
        guard !stored.isEmpty else { return }
        rows &+= count
        guard let reducer else { return }
        reductions.append(stored.count == 1 ? Array(stored[0]) : try reducer.rereduce(stored))
    }

    /// Adds leaf rows (views valid during the call), reduced into one reduction now.
    mutating func addRows(_ entries: [(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)]) throws {
        guard !entries.isEmpty else { return }
        rows &+= UInt64(entries.count)
        if let reducer { reductions.append(try reducer.reduce(entries)) }
    }

    /// Adds the rows of `range` in the leaf whose payload is `bytes` (the leaf chunk at `chunkOffset`, read in
    /// place: ``BTreeReader``), walking its entries in order up to the first one past the range with
    /// ``LeafLookup/forEachEntry(inLeaf:chunkOffset:path:_:)``: every length is checked before use, so damage
    /// gives a corruption error, and a leaf read to its end must end after its last entry. When ``wantsFirst``
    /// and no row came before, ``first`` is a copy of the first row's value (the bytes do not outlive the
    /// reader's next read).
    mutating func addLeafRows(_ bytes: UnsafeRawBufferPointer, chunkOffset: UInt64, range: KeyRange,
                              path: String) throws {
        var inRange: [(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)] = []
        let lower = range.lower, upper = range.upper
        try (lower?.key ?? []).withUnsafeBytes { lowerKey in
            try (upper?.key ?? []).withUnsafeBytes { upperKey in
                try LeafLookup.forEachEntry(inLeaf: bytes, chunkOffset: chunkOffset, path: path) { key, value in
                    if let lower {
                        let c = LeafLookup.order(key, lowerKey)
                        if c < 0 || (c == 0 && !lower.inclusive) { return true }
                    }
                    if let upper {
                        let c = LeafLookup.order(key, upperKey)
                        if c > 0 || (c == 0 && !upper.inclusive) { return false }
                    }
                    inRange.append((key, value))
                    return true
                }
            }
        }
        guard !inRange.isEmpty else { return }
        if wantsFirst && rows == 0 { first = NodeSlice(copying: inRange[0].value) }
        try addRows(inRange)
    }

    /// The reduction of everything added (rereduced when there is more than one piece), and the parts emptied
    /// for the next range; ``first`` is left to the caller.
    mutating func finish() throws -> Reduction {
        defer {
            rows = 0
            reductions.removeAll(keepingCapacity: true)
        }
        guard let reducer, rows > 0 else { return Reduction(rowCount: rows, value: []) }
        if reductions.count == 1 { return Reduction(rowCount: rows, value: reductions[0]) }
        return Reduction(rowCount: rows, value: try rereduce(reductions, with: reducer))
    }
}

/// The state of a grouped reduce: the group in progress and the rows of the current leaf not yet reduced.
private struct GroupFold {
    var parts: ReduceParts
    let groupPrefix: (UnsafeRawBufferPointer) throws -> Int
    let body: (ReducedGroup) throws -> Bool
    var group: [UInt8]?
    var firstKey: [UInt8] = []
    var firstValue: [UInt8] = []
    /// Rows of the current leaf in the current group, reduced when the leaf or the group ends.
    var pendingRows: [(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)] = []

    init(reducer: (any Reducer)?, groupPrefix: @escaping (UnsafeRawBufferPointer) throws -> Int,
         body: @escaping (ReducedGroup) throws -> Bool) {
        self.parts = ReduceParts(reducer: reducer)
        self.groupPrefix = groupPrefix
        self.body = body
    }

    func currentGroupContains(_ key: UnsafeRawBufferPointer) -> Bool {
        guard let group, key.count >= group.count else { return false }
        return group.withUnsafeBytes { compareBytes(UnsafeRawBufferPointer(rebasing: key[0..<group.count]), $0) } == 0
    }

    /// Returns false when `body` asked to stop.
    mutating func addRow(_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool {
        if !currentGroupContains(key) {
            if try !closeGroup() { return false }
            let n = try groupPrefix(key)
            guard n >= 0, n <= key.count else {
                throw SofaError(.invalidArgument, "group prefix length \(n) is outside a \(key.count)-byte key")
            }
            group = Array(key[0..<n])
            firstKey = Array(key)
            firstValue = Array(value)
        }
        pendingRows.append((key, value))
        return true
    }

    /// The leaf's rows are about to become invalid: reduce the pending ones now.
    mutating func leaveLeaf() throws -> Bool {
        try parts.addRows(pendingRows)
        pendingRows.removeAll(keepingCapacity: true)
        return true
    }

    /// Emits the group in progress, if any. Returns false when `body` asked to stop.
    @discardableResult
    mutating func closeGroup() throws -> Bool {
        guard group != nil else { return true }
        try parts.addRows(pendingRows)
        pendingRows.removeAll(keepingCapacity: true)
        let reduction = try parts.finish()
        group = nil
        return try body(ReducedGroup(firstKey: firstKey, firstValue: firstValue, reduction: reduction))
    }
}
