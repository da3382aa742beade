import SofaStorage
import Synchronization

/// One document's change as a log record carries it (FORMAT.md §10.1.7): its ID, its new by-ID entry, and
/// what the trees held for it, so that a reader can hide the trees' by-sequence entry it supersedes and correct
/// the trees' counts without reading them. A class, kept alive by its chain's ``LogArena``: each commit's
/// ``PendingChanges`` lists the entries of the one before without counting references.
final class LogEntry: Sendable {
    let id: [UInt8]
    /// The document's by-ID value (FORMAT.md §10.1.1), as ``DocumentRecord/encoded()`` writes it.
    let record: [UInt8]
    /// The sequence in `record`.
    let sequence: UInt64
    /// The document's sequence in the trees (its by-sequence entry there), or nil when the trees lack it.
    let storedSequence: UInt64?
    /// The document flags of the trees' by-ID entry (0 when the trees lack it).
    let storedFlags: UInt8

    init(id: [UInt8], record: [UInt8], sequence: UInt64, storedSequence: UInt64?, storedFlags: UInt8) {
        self.id = id
        self.record = record
        self.sequence = sequence
        self.storedSequence = storedSequence
        self.storedFlags = storedFlags
    }

    /// What the entry adds to the trees' counts (live, deleted, conflicted, rows): its record's, less the
    /// trees' entry's it replaces.
    var countDelta: (live: Int64, deleted: Int64, conflicted: Int64, rows: Int64) {
        let new = DocumentCountReducer.Counts(flags: record[0])
        guard storedSequence != nil else { return (Int64(new.live), Int64(new.deleted), Int64(new.conflicted), 1) }
        let old = DocumentCountReducer.Counts(flags: storedFlags)
        return (Int64(new.live) - Int64(old.live), Int64(new.deleted) - Int64(old.deleted),
                Int64(new.conflicted) - Int64(old.conflicted), 0)
    }
}

/// The first index in `0..<count` at which `isBelow` is false, for a predicate true up to some index and false
/// from there on (a binary search over a sorted collection).
private func lowerBound(_ count: Int, _ isBelow: (Int) -> Bool) -> Int {
    var low = 0, high = count
    while low < high {
        let mid = (low + high) / 2
        if isBelow(mid) { low = mid + 1 } else { high = mid }
    }
    return low
}

/// Keeps every entry of one chain alive while any of the chain's ``PendingChanges`` lives: they list entries as
/// unowned references, so that making each commit's set copies plain words (no reference counting per entry,
/// which was ~14,000 instructions of a single-document commit with ~64 entries pending). Only the writer
/// appends; nothing reads `kept`. Entries a later commit replaced stay until the chain is folded: at most the
/// chain's bound of bytes (``PendingChanges/maximumBytes`` counts them).
final class LogArena: @unchecked Sendable {
    private var kept: [LogEntry] = []

    func keep(_ entry: LogEntry) { kept.append(entry) }
}

/// The small commits made since the last commit that rewrote the trees: their documents, merged, as readers
/// see them on top of the trees (FORMAT.md §10.1.7).
///
/// A commit of a few documents (``PendingChanges/deltaLimit``) does not rewrite a path in each tree (~170,000
/// instructions and ~11 KiB at a million documents, BENCHMARKS.md §3): it appends one log record naming its
/// changes and the previous record, and a commit header whose roots are the trees' as they were. Readers look
/// here before the trees; the next commit that has to rewrite the trees anyway, or that finds the chain at its
/// bounds, folds every pending change into them at once. Immutable: each commit makes a new one from the one
/// before (``applying(_:head:)``), sharing its entries.
final class PendingChanges: Sendable {
    /// Changed documents by ascending ID (one entry per document: a later change replaces an earlier one),
    /// unowned: `arena` keeps them.
    private let byID: [Unmanaged<LogEntry>]
    /// The same entries by ascending new sequence: the pending part of the changes feed.
    private let bySequenceOrder: [Unmanaged<LogEntry>]
    /// What keeps the entries alive.
    private let arena: LogArena
    /// The trees' by-sequence entries the pending changes supersede, ascending: a scan of the trees skips them.
    let hiddenSequences: [UInt64]
    /// The offset of the newest log record, 0 when there is none.
    let head: UInt64
    /// Log records in the chain.
    let length: Int
    /// Bytes of the chain's entries (IDs and records), replaced ones included: what its arena holds.
    let bytes: Int
    /// The by-ID counts less the trees': what the pending changes add and take away.
    let liveDelta: Int64, deletedDelta: Int64, conflictedDelta: Int64
    /// Pending documents the trees do not hold at all (by-ID rows beyond the tree's count).
    let addedRows: UInt64
    /// The entries as an in-memory leaf, for callers that hand rows out as (leaf, index): made on first use.
    private let leafCache = Mutex<Node?>(nil)

    /// No pending changes: the trees are the whole state.
    static let none = PendingChanges(byID: [], bySequence: [], arena: LogArena(), hiddenSequences: [], head: 0,
                                     length: 0, bytes: 0, deltas: (0, 0, 0, 0))

    /// A commit of at most this many documents may be a log record instead of a rewrite of the trees.
    static let deltaLimit = 16
    /// A chain is folded into the trees by the commit that would make it longer than this many records…
    static let maximumLength = 128
    /// …or hold more than this many bytes of entries.
    static let maximumBytes = 128 << 10

    private init(byID: [Unmanaged<LogEntry>], bySequence: [Unmanaged<LogEntry>], arena: LogArena,
                 hiddenSequences: [UInt64], head: UInt64, length: Int, bytes: Int,
                 deltas: (live: Int64, deleted: Int64, conflicted: Int64, rows: Int64)) {
        self.byID = byID
        bySequenceOrder = bySequence
        self.arena = arena
        self.hiddenSequences = hiddenSequences
        self.head = head
        self.length = length
        self.bytes = bytes
        liveDelta = deltas.live
        deletedDelta = deltas.deleted
        conflictedDelta = deltas.conflicted
        addedRows = UInt64(deltas.rows)
    }

    /// Whether there are no pending changes: the trees hold everything.
    var isEmpty: Bool { byID.isEmpty }

    /// Pending documents.
    var count: Int { byID.count }

    /// Pending document `i` in ID order.
    func entry(_ i: Int) -> LogEntry { byID[i].takeUnretainedValue() }

    /// The pending documents in ID order.
    var entries: [LogEntry] { byID.map { $0.takeUnretainedValue() } }

    /// The pending documents in sequence order.
    var bySequence: [LogEntry] { bySequenceOrder.map { $0.takeUnretainedValue() } }

    /// Whether `entry`'s ID sorts before `id`.
    private static func precedes(_ entry: Unmanaged<LogEntry>, _ id: [UInt8]) -> Bool {
        entry._withUnsafeGuaranteedRef { compareArrays($0.id, id) < 0 }
    }

    /// These changes with a newer log record's on top: `changes` (ascending IDs, sequences newer than every
    /// pending one) replace or join the entries. O(pending) reference copies, O(changes × log pending) searches.
    func applying(_ changes: [LogEntry], head: UInt64) -> PendingChanges {
        // A fresh chain (after a fold, or the first record read back) gets an arena of its own.
        let arena = isEmpty ? LogArena() : self.arena
        var merged: [Unmanaged<LogEntry>] = []
        merged.reserveCapacity(byID.count + changes.count)
        var replaced: [LogEntry] = []
        var next = 0
        for c in changes {
            arena.keep(c)
            // Where `c` goes among the entries not yet copied: a binary search, then the run before it in one copy.
            let low = next + lowerBound(byID.count - next) { Self.precedes(byID[next + $0], c.id) }
            merged.append(contentsOf: byID[next..<low])
            next = low
            if next < byID.count, entry(next).id == c.id {
                replaced.append(entry(next))
                next += 1
            }
            merged.append(Unmanaged.passUnretained(c))
        }
        merged.append(contentsOf: byID[next...])

        var bySequence = bySequenceOrder
        var hidden = hiddenSequences
        var deltas = (live: liveDelta, deleted: deletedDelta, conflicted: conflictedDelta, rows: Int64(addedRows))
        for old in replaced {
            if let i = bySequence.firstIndex(where: { $0.toOpaque() == Unmanaged.passUnretained(old).toOpaque() }) {
                bySequence.remove(at: i)
            }
            if let s = old.storedSequence, let i = hidden.firstIndex(of: s) { hidden.remove(at: i) }
            let d = old.countDelta
            deltas = (deltas.live - d.live, deltas.deleted - d.deleted, deltas.conflicted - d.conflicted,
                      deltas.rows - d.rows)
        }
        var bytes = isEmpty ? 0 : self.bytes
        for c in changes.sorted(by: { $0.sequence < $1.sequence }) {
            bySequence.append(Unmanaged.passUnretained(c))
            if let s = c.storedSequence { hidden.insert(s, at: lowerBound(hidden.count) { hidden[$0] < s }) }
            bytes += c.id.count + c.record.count
            let d = c.countDelta
            deltas = (deltas.live + d.live, deltas.deleted + d.deleted, deltas.conflicted + d.conflicted,
                      deltas.rows + d.rows)
        }
        return PendingChanges(byID: merged, bySequence: bySequence, arena: arena, hiddenSequences: hidden,
                              head: head, length: length + 1, bytes: bytes, deltas: deltas)
    }

    /// Whether a record of `documents` more documents (`bytes` of IDs and records) may join the chain: at most
    /// ``deltaLimit`` documents, and the chain after it at most `lengthLimit` records (never more than the
    /// format's ``maximumLength``; tests fold sooner) holding at most ``maximumBytes`` of IDs and records.
    func admits(documents: Int, bytes: Int, lengthLimit: Int = PendingChanges.maximumLength) -> Bool {
        documents <= PendingChanges.deltaLimit && length < min(lengthLimit, PendingChanges.maximumLength)
            && self.bytes + bytes <= PendingChanges.maximumBytes
    }

    /// The index of `id` in ID order.
    func index(of id: UnsafeRawBufferPointer) -> Int? {
        func order(_ i: Int) -> Int {
            byID[i]._withUnsafeGuaranteedRef { $0.id.withUnsafeBytes { compareBytes($0, id) } }
        }
        let i = lowerBound(byID.count) { order($0) < 0 }
        return i < byID.count && order(i) == 0 ? i : nil
    }

    /// The index of `id` in ID order.
    func index(of id: [UInt8]) -> Int? {
        id.withUnsafeBytes { index(of: $0) }
    }

    /// Whether the trees' by-sequence entry `sequence` is superseded by a pending change.
    func hides(_ sequence: UInt64) -> Bool {
        let i = lowerBound(hiddenSequences.count) { hiddenSequences[$0] < sequence }
        return i < hiddenSequences.count && hiddenSequences[i] == sequence
    }

    /// The pending document with new sequence `sequence`.
    func entry(atSequence sequence: UInt64) -> LogEntry? {
        func at(_ i: Int) -> UInt64 { bySequenceOrder[i]._withUnsafeGuaranteedRef { $0.sequence } }
        let i = lowerBound(bySequenceOrder.count) { at($0) < sequence }
        return i < bySequenceOrder.count && at(i) == sequence ? bySequenceOrder[i].takeUnretainedValue() : nil
    }

    /// The entries as a leaf node whose entry i is ``entry(_:)`` i (ID → by-ID value); nil when there are none.
    var leaf: Node? {
        guard !isEmpty else { return nil }
        return leafCache.withLock { cached in
            if let cached { return cached }
            let node = Node.inMemoryLeaf(entries.map { (key: $0.id, value: $0.record) })
            cached = node
            return node
        }
    }

    // MARK: - Log records (FORMAT.md §10.1.7)

    /// The first byte of every log record's payload.
    static let recordFormat: UInt8 = 1

    /// A log record's payload: `entries` (ascending IDs, at least one) after the record at `previous`.
    static func encodeRecord(_ entries: [LogEntry], previous: UInt64) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(16 + entries.reduce(0) { $0 + $1.id.count + $1.record.count + 16 })
        out.append(recordFormat)
        out.appendVarint(previous)
        out.appendVarint(UInt64(entries.count))
        for e in entries {
            out.appendVarint(UInt64(e.id.count))
            out.append(contentsOf: e.id)
            if let stored = e.storedSequence {
                out.appendVarint(stored + 1)
                out.append(e.storedFlags)
            } else {
                out.appendVarint(0)
            }
            out.appendVarint(UInt64(e.record.count))
            out.append(contentsOf: e.record)
        }
        return out
    }

    /// Decodes a log record's payload: the previous record's offset and the entries.
    static func decodeRecord(_ bytes: UnsafeRawBufferPointer, offset: UInt64,
                             path: String) throws -> (previous: UInt64, entries: [LogEntry]) {
        var r = ByteReader(bytes, fileOffset: offset + UInt64(FileFormat.chunkPrefixSize), path: path)
        let format = try r.readByte()
        guard format == recordFormat else {
            throw r.corruption("document log record of format \(format); this build reads \(recordFormat)")
        }
        let previous = try r.readVarint()
        let count = try r.readLength(limit: bytes.count)
        guard count > 0 else { throw r.corruption("document log record without entries") }
        var entries: [LogEntry] = []
        entries.reserveCapacity(count)
        for _ in 0..<count {
            let id = Array(try r.readLengthPrefixed())
            guard !id.isEmpty, id.count <= DocumentFile.maximumIDLength else {
                throw r.corruption("document log record names an ID of \(id.count) bytes")
            }
            if let last = entries.last, compareArrays(last.id, id) >= 0 {
                throw r.corruption("document log record's IDs are not in ascending order")
            }
            let stored = try r.readVarint()
            let storedFlags = stored == 0 ? 0 : try r.readByte()
            let recordAt = r.position
            let record = try r.readLengthPrefixed()
            let decoded = try DocumentRecord(decoding: record, path: path,
                                             offset: offset + UInt64(FileFormat.chunkPrefixSize + recordAt))
            entries.append(LogEntry(id: id, record: Array(record), sequence: decoded.sequence,
                                    storedSequence: stored == 0 ? nil : stored - 1, storedFlags: storedFlags))
        }
        guard r.isAtEnd else { throw r.corruption("document log record has \(r.remaining) bytes after its entries") }
        return (previous, entries)
    }

    /// One log record of a chain, as read back.
    struct Record {
        /// The record's value chunk.
        let offset: UInt64
        /// Bytes the chunk takes in the file, prefix included.
        let storedBytes: Int
        /// The previous record's offset, 0 for the chain's first.
        let previous: UInt64
        /// Its entries, ascending IDs.
        let entries: [LogEntry]
    }

    /// The log records of `commit`'s chain (`head`, `length` records), newest first. Each record must lie
    /// before the commit header and before the record after it, and there must be exactly `length` of them.
    static func records(head: UInt64, length: Int, commit: CommitHeader, storage: StorageFile) throws -> [Record] {
        var records: [Record] = []
        var offset = head
        var limit = commit.offset
        while offset != 0 {
            guard offset < limit, records.count < length else {
                throw SofaError(.corruption, "document log chain of commit \(commit.commitNumber) is broken at "
                                + "\(offset) (\(records.count) of \(length) records read)", path: storage.path,
                                offset: Int(clamping: offset))
            }
            let payload = try storage.readChunk(at: offset, kind: .value, limit: commit.endOffset)
            let (previous, entries) = try payload.withUnsafeBytes {
                try decodeRecord($0, offset: offset, path: storage.path)
            }
            records.append(Record(offset: offset, storedBytes: payload.fileLength, previous: previous,
                                  entries: entries))
            limit = offset
            offset = previous
        }
        guard records.count == length else {
            throw SofaError(.corruption, "document log chain of commit \(commit.commitNumber) has \(records.count) "
                            + "records; its header says \(length)", path: storage.path,
                            offset: Int(clamping: commit.offset))
        }
        return records
    }

    /// The pending changes of `commit`, whose metadata says `metadata`: its log chain
    /// (``records(head:length:commit:storage:)``) applied oldest first. Beyond what `records` checks, each
    /// record's sequences must all be newer than the records' before it and at most the commit's last sequence
    /// (readers put pending changes after the trees' in sequence order), and the chain must hold at most
    /// ``maximumBytes`` of IDs and records.
    static func read(_ metadata: DocumentFile.Metadata, commit: CommitHeader,
                     storage: StorageFile) throws -> PendingChanges {
        guard metadata.logHead != 0 else { return .none }
        let records = try records(head: metadata.logHead, length: metadata.logLength, commit: commit,
                                  storage: storage)
        var pending = PendingChanges.none
        var newest: UInt64 = 0
        for record in records.reversed() {
            let sequences = record.entries.map(\.sequence)
            guard sequences.min()! > newest, sequences.max()! <= metadata.lastSequence else {
                throw SofaError(.corruption, "document log record at \(record.offset) has sequences "
                                + "\(sequences.min()!)–\(sequences.max()!), not above \(newest) (its chain's earlier "
                                + "records) and at most \(metadata.lastSequence) (the commit's last)",
                                path: storage.path, offset: Int(clamping: record.offset))
            }
            newest = sequences.max()!
            pending = pending.applying(record.entries, head: metadata.logHead)
        }
        guard pending.bytes <= maximumBytes else {
            throw SofaError(.corruption, "document log chain of commit \(commit.commitNumber) holds \(pending.bytes) "
                            + "bytes of entries; the limit is \(maximumBytes)", path: storage.path,
                            offset: Int(clamping: metadata.logHead))
        }
        return pending
    }
}

// MARK: - Reading the trees through the pending changes

extension DocumentSnapshot {
    /// The by-ID entry of `id` as a leaf and index: a pending change's (in ``PendingChanges/leaf``) or the
    /// tree's. For callers that hand rows out undecoded.
    func entry(for id: UnsafeRawBufferPointer) throws -> (node: Node, index: Int)? {
        if let i = pending.index(of: id), let leaf = pending.leaf { return (leaf, i) }
        guard let slice = try byID.value(for: id) else { return nil }
        // Caching the leaf (the default), the slice always holds the decoded node.
        guard let entry = slice.entry else { preconditionFailure("a cached lookup returned an undecoded leaf") }
        return entry
    }

    /// Calls `body` with the by-ID value of `id` (nil when absent), read in place; a tree leaf it reads is left
    /// out of the node cache when `cachingLeaf` is false.
    func withEntry<R>(for id: UnsafeRawBufferPointer, reader: BTreeReader? = nil, cachingLeaf: Bool = true,
                      _ body: (UnsafeRawBufferPointer?) throws -> R) throws -> R {
        if let i = pending.index(of: id) { return try pending.entry(i).record.withUnsafeBytes { try body($0) } }
        if let reader { return try reader.withValue(for: id, cachingLeaf: cachingLeaf, body) }
        if let slice = try byID.value(for: id, cachingLeaf: cachingLeaf) { return try slice.withUnsafeBytes(body) }
        return try body(nil)
    }

    /// Every by-ID entry in `range`, as leaf and index, in ID order (descending when asked): the tree's, with the
    /// pending changes put in their places (a pending change of a document the tree holds replaces its entry).
    /// Stop by returning false.
    func forEachByID(in range: KeyRange = .all, descending: Bool = false,
                     _ body: (_ leaf: Node, _ index: Int) throws -> Bool) throws {
        try forEachByIDSpan(in: range, descending: descending) { leaf, span in
            if descending {
                for i in span.reversed() where try !body(leaf, i) { return false }
            } else {
                for i in span where try !body(leaf, i) { return false }
            }
            return true
        }
    }

    /// ``forEachByID(in:descending:_:)`` a run of one leaf at a time, as ``BTree/forEachSpan(in:descending:skip:_:)``
    /// hands them out (entries in ascending index order; the caller visits them in descending order when
    /// `descending`): the tree's spans, cut where a pending change goes in, and each pending change as a span of one
    /// in ``PendingChanges/leaf``. A scan keeps its leaf-at-a-time pass; the cuts cost one search per pending change
    /// in the range, not a comparison per entry. `skip` rows are skipped by the tree's stored counts, which do not
    /// count pending changes: only without any (a caller skips rows itself otherwise).
    func forEachByIDSpan(in range: KeyRange = .all, descending: Bool = false, skip: UInt64 = 0,
                         _ body: (_ leaf: Node, _ span: ClosedRange<Int>) throws -> Bool) throws {
        guard let leaf = pending.leaf else {
            return try byID.forEachSpan(in: range, descending: descending, skip: skip, body)
        }
        precondition(skip == 0, "the tree's counts cannot skip rows that pending changes interleave")
        var mine = (0..<leaf.count).filter { range.contains(leaf.key($0)) }
        if descending { mine.reverse() }
        var next = 0
        var stopped = false
        try byID.forEachSpan(in: range, descending: descending) { node, span in
            // `low...high` is what is left of the span to hand out; pending changes cut it from the end the scan
            // starts at (the low end ascending, the high end descending).
            var low = span.lowerBound, high = span.upperBound
            while next < mine.count, low <= high {
                let key = leaf.key(mine[next])
                if descending {
                    let cut = min(node.lowerBound(key, strictly: true) - 1, high)  // the last tree entry ≤ key
                    guard cut >= low else { break }  // the pending change comes after this span
                    let replaces = compareBytes(node.key(cut), key) == 0
                    if cut + 1 <= high, try !body(node, (cut + 1)...high) { stopped = true; return false }
                    if try !body(leaf, mine[next]...mine[next]) { stopped = true; return false }
                    high = replaces ? cut - 1 : cut
                } else {
                    let cut = max(node.lowerBound(key), low)  // the first tree entry ≥ key
                    guard cut <= high else { break }
                    let replaces = compareBytes(node.key(cut), key) == 0
                    if low <= cut - 1, try !body(node, low...(cut - 1)) { stopped = true; return false }
                    if try !body(leaf, mine[next]...mine[next]) { stopped = true; return false }
                    low = replaces ? cut + 1 : cut
                }
                next += 1
            }
            if low <= high, try !body(node, low...high) {
                stopped = true
                return false
            }
            return true
        }
        while !stopped, next < mine.count {
            if try !body(leaf, mine[next]...mine[next]) { return }
            next += 1
        }
    }

    /// Every by-sequence entry in `range` (keys as ``DocumentFile/sequenceKey(_:)``), in sequence order
    /// (descending when asked): the tree's but those the pending changes superseded, then the pending changes',
    /// whose sequences are all newer. Stop by returning false.
    func forEachBySequence(in range: KeyRange = .all, descending: Bool = false,
                           _ body: (_ sequence: UInt64, _ id: UnsafeRawBufferPointer) throws -> Bool) throws {
        func pendingPart() throws -> Bool {
            let order = descending ? Array(pending.bySequence.reversed()) : pending.bySequence
            for e in order {
                let key = DocumentFile.sequenceKey(e.sequence)
                guard key.withUnsafeBytes({ range.contains($0) }) else { continue }
                if try !e.id.withUnsafeBytes({ try body(e.sequence, $0) }) { return false }
            }
            return true
        }
        if descending, try !pendingPart() { return }
        var stopped = false
        try bySequence.forEach(in: range, descending: descending) { key, id in
            let sequence = try DocumentFile.sequence(fromKey: key, path: path)
            if pending.hides(sequence) { return true }
            if try !body(sequence, id) {
                stopped = true
                return false
            }
            return true
        }
        if !descending, !stopped { _ = try pendingPart() }
    }

    /// The ID of the document whose latest change has `sequence`, or nil.
    func documentID(atSequence sequence: UInt64) throws -> [UInt8]? {
        if let e = pending.entry(atSequence: sequence) { return e.id }
        if pending.hides(sequence) { return nil }
        return try bySequence.get(DocumentFile.sequenceKey(sequence))
    }
}
