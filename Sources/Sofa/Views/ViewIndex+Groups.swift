import Dispatch
import SofaStorage
import Synchronization

/// One group's entry in a view index's groups tree (FORMAT.md §10.2.6): the row count, reduction and key of
/// every row whose key starts with the group's prefix at one level.
///
/// Key: `u8 level ‖ group prefix`. Value: `varint row count ‖ varint length ‖ reduction ‖ packed group key`.
struct GroupAggregate {
    var rowCount: UInt64
    var reduction: UnsafeRawBufferPointer
    /// The packed JSON of the group's key (its first row's key, cut to `level` items when an array).
    var packedKey: UnsafeRawBufferPointer

    /// Decodes a groups-tree value in place; the buffers point into `bytes`.
    init(_ bytes: UnsafeRawBufferPointer) throws {
        var r = ByteReader(bytes, fileOffset: 0, path: "view group aggregate")
        rowCount = try r.readVarint()
        reduction = try r.readLengthPrefixed()
        packedKey = try r.readSlice(r.remaining)
        guard rowCount > 0, !packedKey.isEmpty else { throw r.corruption("a group aggregate with no row or no key") }
    }

    static func encode(rowCount: UInt64, reduction: [UInt8], packedKey: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(reduction.count + packedKey.count + 12)
        out.appendVarint(rowCount)
        out.appendVarint(UInt64(reduction.count))
        out.append(contentsOf: reduction)
        out.append(contentsOf: packedKey)
        return out
    }

    /// The groups-tree key of the group with `prefix` at `level`.
    static func treeKey<C: Collection<UInt8>>(level: UInt8, prefix: C) -> [UInt8] {
        var key: [UInt8] = [level]
        key.append(contentsOf: prefix)
        return key
    }

    /// The groups-tree entries of one level.
    static func levelRange(_ level: UInt8) -> KeyRange {
        KeyRange(lower: KeyBound([level], inclusive: true),
                 upper: level == 0xFF ? nil : KeyBound([level + 1], inclusive: false))
    }

    /// The rows-tree range of the rows whose key starts with `prefix`: ≥ prefix, < the prefix's successor
    /// (trailing FF bytes dropped, the last byte incremented; none when every byte is FF).
    static func rowRange(_ prefix: [UInt8]) -> KeyRange {
        var successor = prefix
        while successor.last == 0xFF { successor.removeLast() }
        guard !successor.isEmpty else { return KeyRange(lower: KeyBound(prefix, inclusive: true)) }
        successor[successor.count - 1] += 1
        return KeyRange(lower: KeyBound(prefix, inclusive: true), upper: KeyBound(successor, inclusive: false))
    }

    /// The group prefix of a row key at `level`, copied.
    static func prefix(of rowKey: UnsafeRawBufferPointer, level: UInt8) throws -> [UInt8] {
        Array(rowKey[..<(try CollationKey.groupPrefixLength(rowKey, level: Int(level)))])
    }

    /// The group key a grouped query shows, packed, from a row value.
    static func packedGroupKey(_ rowValue: UnsafeRawBufferPointer, level: UInt8) throws -> [UInt8] {
        PackedJSON.encode(try RowValue.groupKey(rowValue, items: Int(level)))
    }
}

extension KeyRange {
    /// The keys in both ranges.
    func intersection(_ other: KeyRange) -> KeyRange {
        func pick(_ a: KeyBound?, _ b: KeyBound?, higher: Bool) -> KeyBound? {
            guard let a else { return b }
            guard let b else { return a }
            let c = compareArrays(a.key, b.key)
            if c == 0 { return KeyBound(a.key, inclusive: a.inclusive && b.inclusive) }
            return (c > 0) == higher ? a : b
        }
        return KeyRange(lower: pick(lower, other.lower, higher: true), upper: pick(upper, other.upper, higher: false))
    }
}

/// The groups an update touched, at every materialized level; after the last batch ``apply(to:rows:index:)``
/// recomputes each of them from the new rows tree (FORMAT.md §10.2.6, "Maintenance").
struct GroupChanges {
    let levels: [UInt8]
    /// Groups-tree keys of the touched groups, in no order; a group touched by several passes is listed once
    /// per pass.
    private(set) var touched: [[UInt8]] = []

    init(levels: [UInt8]) { self.levels = levels }

    /// Records the groups of every row the changes of `actions` numbered in `order` (ascending by key) remove or
    /// put.
    mutating func note(_ actions: BTreeActionBuffer, order: [Int]) throws {
        guard !levels.isEmpty else { return }
        // Rows of one group are adjacent in key order: a group is recorded once per run of its rows.
        var previous = [[UInt8]](repeating: [], count: levels.count)
        try actions.forEach(in: order) { key, _ in
            for (l, level) in levels.enumerated() {
                let n = try CollationKey.groupPrefixLength(key, level: Int(level))
                let prefix = UnsafeRawBufferPointer(rebasing: key[..<n])
                let samePrefix = !previous[l].isEmpty && previous[l].withUnsafeBytes {
                    compareBytes(UnsafeRawBufferPointer(rebasing: $0.dropFirst()), prefix) == 0
                }
                if samePrefix { continue }
                var treeKey: [UInt8] = [level]
                treeKey.append(contentsOf: prefix)
                touched.append(treeKey)
                previous[l] = treeKey
            }
        }
    }

    /// `groups` with every touched group recomputed over `rows`; nil when no level is materialized.
    func apply(to groups: BTree, rows: BTree, index: ViewIndex) throws -> BTree? {
        guard !levels.isEmpty else { return nil }
        var writer = BTree(file: index.storage, root: groups.root, configuration: index.groupsConfiguration,
                           limit: StorageFile.unlimited)
        var sorted: [[UInt8]] = []
        sorted.reserveCapacity(touched.count)
        for i in ViewIndex.byteOrder(touched) where sorted.last != touched[i] { sorted.append(touched[i]) }
        let keys = sorted
        // The groups are recomputed on every core: each is a few reads of the new rows tree, written out
        // first so that other threads can read it (below its written length, never flushing).
        try index.storage.flushAppended()
        let reader = BTree(file: index.storage, root: rows.root, configuration: rows.configuration,
                           limit: index.storage.writtenLength)
        var values = [Result<[UInt8]?, any Error>](repeating: .success(nil), count: keys.count)
        values.withUnsafeMutableBufferPointer { out in
            let out = UnsafeSendableBuffer(out)
            let chunk = 64
            // Each chunk writes only its own slots of `out`. A worker's reader keeps the nodes its reduces went
            // through: the groups are sorted, so consecutive ones share most of their descent.
            DispatchQueue.forEachChunk((keys.count + chunk - 1) / chunk) { c, readers in
                let rows = readers.reader(WorkerReaders.groupRows, of: reader)
                for i in (c * chunk)..<min(keys.count, (c + 1) * chunk) {
                    out.buffer[i] = Result {
                        try ViewIndex.groupValue(rows: rows, level: keys[i][0], prefix: Array(keys[i].dropFirst()))
                    }
                }
            }
        }
        var actions: [BTreeAction] = []
        actions.reserveCapacity(keys.count)
        for (treeKey, value) in zip(keys, values) {
            actions.append(try value.get().map { .put(treeKey, $0) } ?? .remove(treeKey))
        }
        writer = try writer.modified(by: actions)
        return writer
    }
}

extension ViewIndex {
    /// Grouped queries answered from the groups tree (tests check that the aggregate path is taken).
    static let aggregateQueries = Atomic<Int>(0)

    /// The groups-tree value of the group with `prefix` at `level`, computed over `rows`: an O(log n) range
    /// reduce that also picks up its first row (from the leaf on the range's lower edge). Nil when the group
    /// has no row.
    /// `rows` is a thread's reader of the rows tree: a run of groups in key order shares its descents.
    static func groupValue(rows: BTreeReader, level: UInt8, prefix: [UInt8]) throws -> [UInt8]? {
        let (reduction, first) = try rows.reduceAndFirstEntry(in: GroupAggregate.rowRange(prefix))
        guard reduction.rowCount > 0 else { return nil }
        guard let first else {
            throw SofaError(.corruption, "a group with \(reduction.rowCount) rows has no first row")
        }
        let packedKey = try first.withUnsafeBytes { try GroupAggregate.packedGroupKey($0, level: level) }
        return GroupAggregate.encode(rowCount: reduction.rowCount, reduction: reduction.value, packedKey: packedKey)
    }

    /// Calls `body` with the groups-tree key and value of every group of `rows` at `level`, in order: one
    /// grouped fold of the whole rows tree (stored subtree reductions used for subtrees inside one group).
    static func foldGroups(rows: BTree, level: UInt8,
                           _ body: (_ key: [UInt8], _ value: [UInt8]) throws -> Void) throws {
        try rows.reduceGroups(groupPrefix: { try CollationKey.groupPrefixLength($0, level: Int(level)) }) { g in
            let n = try CollationKey.groupPrefixLength(g.firstKey, level: Int(level))
            let packedKey = try g.firstValue.withUnsafeBytes { try GroupAggregate.packedGroupKey($0, level: level) }
            try body(GroupAggregate.treeKey(level: level, prefix: g.firstKey[..<n]),
                     GroupAggregate.encode(rowCount: g.reduction.rowCount, reduction: g.reduction.value,
                                           packedKey: packedKey))
            return true
        }
    }

    /// A groups tree holding `levels` for `rows`, bulk-loaded level by level: a level `previous` already has is
    /// copied from it, any other is folded from `rows`. Nil when `levels` is empty.
    func buildGroups(rows: BTree, levels: [UInt8], previous: ViewSnapshot? = nil) throws -> BTree? {
        guard !levels.isEmpty else { return nil }
        let builder = TreeBuilder(file: storage, configuration: groupsConfiguration)
        for level in levels {
            if let previous, previous.header.groupLevels.contains(level) {
                try previous.groups.forEach(in: GroupAggregate.levelRange(level)) { key, value in
                    try builder.add(key: key, value: value)
                    return true
                }
            } else {
                try ViewIndex.foldGroups(rows: rows, level: level) { key, value in
                    try builder.add(key: key, value: value)
                }
            }
        }
        return try builder.finish()
    }

    /// Materializes group level `level` (FORMAT.md §10.2.6, "Which levels"): folds the newest commit's rows
    /// into the level's aggregates and commits them with the header listing the level. Does nothing when the
    /// level is there already or ``ViewHeader/maxGroupLevels`` are. Call with the view's update lock held.
    func addGroupLevel(_ level: UInt8) throws {
        do {
            let current = try snapshot()
            var header = current.header
            guard level > 0, !header.groupLevels.contains(level),
                  header.groupLevels.count < ViewHeader.maxGroupLevels else { return }
            // Reductions of a custom reduce not registered in this process cannot be computed: no aggregates
            // (they would be stored empty and read as corrupt once the reduce is registered).
            guard header.reduceKind == 0 || reduce != nil else { return }
            header.groupLevels = (header.groupLevels + [level]).sorted()
            let groups = try buildGroups(rows: current.rows, levels: header.groupLevels, previous: current)
            try commit(rows: current.rows, backIndex: current.backIndex, groups: groups, header: header)
        } catch {
            storage.discardUncommitted()
            throw error
        }
    }

    /// Problems with the groups tree of `snapshot`: entries of levels the header does not list, and for each
    /// listed level any difference from a fresh fold of the rows tree.
    func verifyGroups(_ snapshot: ViewSnapshot, reducer: ViewReducer?) throws -> [String] {
        var problems: [String] = []
        problems += snapshot.groups.verify().problems.map(\.message)
        guard problems.isEmpty else { return problems }
        var listed: UInt64 = 0
        for level in snapshot.header.groupLevels {
            var folded: UInt64 = 0
            try ViewIndex.foldGroups(rows: snapshot.rows, level: level) { key, value in
                folded += 1
                guard problems.count < 20 else { return }
                guard let stored = try snapshot.groups.get(key) else {
                    problems.append("group level \(level): a group of the rows has no aggregate")
                    return
                }
                if let difference = try GroupAggregate.difference(stored, value, reducer: reducer) {
                    problems.append("group level \(level): an aggregate \(difference)")
                }
            }
            let stored = try snapshot.groups.count(in: GroupAggregate.levelRange(level))
            if stored != folded {
                problems.append("group level \(level): \(stored) aggregates for \(folded) groups of rows")
            }
            listed += stored
        }
        if snapshot.groups.rowCount > listed {
            problems.append(
                "the groups tree holds \(snapshot.groups.rowCount - listed) entries of levels the header does not list")
        } else if snapshot.groups.rowCount < listed {
            problems.append("the groups tree's root counts \(snapshot.groups.rowCount) entries, its levels \(listed)")
        }
        return problems
    }
}

extension GroupAggregate {
    /// What differs between a stored aggregate and a recomputed one, or nil when they agree: same row count
    /// and key, and reductions equal as bytes or, through `reducer`, as JSON whose numbers agree to 1e-9
    /// relative (a sum added in another order may differ in its last bits).
    static func difference(_ stored: [UInt8], _ computed: [UInt8], reducer: ViewReducer?) throws -> String? {
        try stored.withUnsafeBytes { s in
            try computed.withUnsafeBytes { c in
                let a = try GroupAggregate(s), b = try GroupAggregate(c)
                if a.rowCount != b.rowCount { return "counts \(a.rowCount) rows; the rows hold \(b.rowCount)" }
                if compareBytes(a.packedKey, b.packedKey) != 0 { return "records another key than its first row's" }
                if compareBytes(a.reduction, b.reduction) == 0 { return nil }
                guard let reducer else { return nil }  // reductions of a reduce not registered: not comparable
                let x = try reducer.output(Array(a.reduction), rowCount: a.rowCount)
                let y = try reducer.output(Array(b.reduction), rowCount: b.rowCount)
                return approximatelyEqual(x, y) ? nil : "holds reduction \(x); the rows reduce to \(y)"
            }
        }
    }

    private static func approximatelyEqual(_ x: JSON, _ y: JSON) -> Bool {
        switch (x, y) {
        case (.number(let a), .number(let b)):
            return a == b || abs(a - b) <= 1e-9 * max(abs(a), abs(b))
        case (.array(let a), .array(let b)):
            return a.count == b.count && zip(a, b).allSatisfy { approximatelyEqual($0, $1) }
        case (.object(let a), .object(let b)):
            return a.count == b.count && a.allSatisfy { e in b[e.key].map { approximatelyEqual(e.value, $0) } ?? false }
        default:
            return x == y
        }
    }
}

extension View {
    /// Makes sure the index has level `level`'s group aggregates before a grouped query, materializing them
    /// when the database is writable and fewer than ``ViewHeader/maxGroupLevels`` exist. The aggregates only
    /// speed queries up: when they cannot be made, the query reads the rows tree instead. Materializing takes
    /// the view's update lock, so the first grouped query at a new level waits for an update in progress.
    ///
    /// - Throws: what reading the index header throws (`.corruption`), and a failed commit of the aggregates
    ///   other than `.diskFull` (an I/O error leaves the file refusing writes, which the caller must learn now,
    ///   not at the next update). Disk full only leaves the aggregates unmade.
    func prepareGroupAggregate(level: Int, index: ViewIndex) throws {
        guard !database.options.readOnly, (1...255).contains(level) else { return }
        let header = try index.header
        guard !header.groupLevels.contains(UInt8(level)),
              header.groupLevels.count < ViewHeader.maxGroupLevels else { return }
        try shared.updateLock.withLock { _ in
            // A reset or deleteIndex may have replaced the index meanwhile.
            guard shared.state.withLock({ $0.checked && $0.index === index }) else { return }
            do {
                try index.addGroupLevel(UInt8(level))
            } catch let error as SofaError where error.code == .diskFull {
                return
            }
        }
    }
}

/// ``GroupChanges/note(_:order:)`` of one pass's row actions, run on a thread of its own while the pass rewrites the
/// rows tree (the writer's thread is the one a large pass waits for; the leaf workers have room).
final class GroupNoting: @unchecked Sendable {
    /// A queue of its own, as the leaf workers have: a pass may run while the next batch maps on the global
    /// pool's threads.
    private static let queue = DispatchQueue(label: "sofa.group-noting")
    private let done = DispatchGroup()
    // Written by the queue's task only, read after `done` is waited for.
    private var changes: GroupChanges
    private var failure: (any Error)?

    /// Takes `changes` over (leaving an empty set of the same levels: the list grows in place, never copied)
    /// and starts noting the changes of `actions` numbered in `order` (ascending by key) in it.
    init(taking changes: inout GroupChanges, actions: BTreeActionBuffer, order: [Int]) {
        self.changes = GroupChanges(levels: changes.levels)
        swap(&self.changes, &changes)
        guard !self.changes.levels.isEmpty, !order.isEmpty else { return }
        GroupNoting.queue.async(group: done) { [self] in
            do { try self.changes.note(actions, order: order) } catch { failure = error }
        }
    }

    /// The changes with the actions noted, once that is done.
    func result() throws -> GroupChanges {
        done.wait()
        if let failure { throw failure }
        return changes
    }
}
