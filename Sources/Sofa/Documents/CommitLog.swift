import SofaStorage
import Synchronization

/// One document's change as a log record carries it (FORMAT.md §10.1.7): its ID, its new by-ID entry, and
/// what the trees held for it, so that a reader can hide the trees' by-sequence entry it supersedes and correct
/// the trees' counts without reading them. A class: each commit's ``PendingChanges`` shares the entries of the
/// one before, one reference count each.
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
        func counts(_ flags: UInt8) -> (Int64, Int64, Int64) {
            (flags & DocumentRecord.flagDeleted != 0 ? 0 : 1, flags & DocumentRecord.flagDeleted != 0 ? 1 : 0,
             flags & DocumentRecord.flagConflicted != 0 ? 1 : 0)
        }
        let new = counts(record[0])
        guard storedSequence != nil else { return (new.0, new.1, new.2, 1) }
        let old = counts(storedFlags)
        return (new.0 - old.0, new.1 - old.1, new.2 - old.2, 0)
    }
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
    /// Changed documents by ascending ID (one entry per document: a later change replaces an earlier one).
    let entries: [LogEntry]
    /// The same entries by ascending new sequence: the pending part of the changes feed.
    let bySequence: [LogEntry]
    /// The trees' by-sequence entries the pending changes supersede, ascending: a scan of the trees skips them.
    let hiddenSequences: [UInt64]
    /// The offset of the newest log record, 0 when there is none.
    let head: UInt64
    /// Log records in the chain.
    let length: Int
    /// Bytes of the pending entries (IDs and records), which bound the merge each new record costs.
    let bytes: Int
    /// The by-ID counts less the trees': what the pending changes add and take away.
    let liveDelta: Int64, deletedDelta: Int64, conflictedDelta: Int64
    /// Pending documents the trees do not hold at all (by-ID rows beyond the tree's count).
    let addedRows: UInt64
    /// The entries as an in-memory leaf, for callers that hand rows out as (leaf, index): made on first use.
    private let leafCache = Mutex<Node?>(nil)

    /// No pending changes: the trees are the whole state.
    static let none = PendingChanges(entries: [], bySequence: [], hiddenSequences: [], head: 0, length: 0,
                                     bytes: 0, deltas: (0, 0, 0, 0))

    /// A commit of at most this many documents may be a log record instead of a rewrite of the trees.
    static let deltaLimit = 16
    /// A chain is folded into the trees by the commit that would make it longer than this many records…
    static let maximumLength = 128
    /// …or hold more than this many bytes of entries.
    static let maximumBytes = 128 << 10

    private init(entries: [LogEntry], bySequence: [LogEntry], hiddenSequences: [UInt64], head: UInt64,
                 length: Int, bytes: Int, deltas: (live: Int64, deleted: Int64, conflicted: Int64, rows: Int64)) {
        self.entries = entries
        self.bySequence = bySequence
        self.hiddenSequences = hiddenSequences
        self.head = head
        self.length = length
        self.bytes = bytes
        liveDelta = deltas.live
        deletedDelta = deltas.deleted
        conflictedDelta = deltas.conflicted
        addedRows = UInt64(deltas.rows)
    }

    var isEmpty: Bool { entries.isEmpty }

    /// These changes with a newer log record's on top: `changes` (ascending IDs, sequences newer than every
    /// pending one) replace or join the entries. O(pending) reference copies, O(changes × log pending) searches.
    func applying(_ changes: [LogEntry], head: UInt64) -> PendingChanges {
        var merged: [LogEntry] = []
        merged.reserveCapacity(entries.count + changes.count)
        var replaced: [LogEntry] = []
        var next = 0
        for c in changes {
            // Where `c` goes among the entries not yet copied: a binary search, then the run before it in one copy.
            var low = next, high = entries.count
            while low < high {
                let mid = (low + high) / 2
                if compareArrays(entries[mid].id, c.id) < 0 { low = mid + 1 } else { high = mid }
            }
            merged.append(contentsOf: entries[next..<low])
            next = low
            if next < entries.count, compareArrays(entries[next].id, c.id) == 0 {
                replaced.append(entries[next])
                next += 1
            }
            merged.append(c)
        }
        merged.append(contentsOf: entries[next...])

        var bySequence = self.bySequence
        var hidden = hiddenSequences
        var bytes = self.bytes
        var deltas = (live: liveDelta, deleted: deletedDelta, conflicted: conflictedDelta, rows: Int64(addedRows))
        for old in replaced {
            if let i = bySequence.firstIndex(where: { $0 === old }) { bySequence.remove(at: i) }
            if let s = old.storedSequence, let i = hidden.firstIndex(of: s) { hidden.remove(at: i) }
            bytes -= old.id.count + old.record.count
            let d = old.countDelta
            deltas = (deltas.live - d.live, deltas.deleted - d.deleted, deltas.conflicted - d.conflicted,
                      deltas.rows - d.rows)
        }
        for c in changes.sorted(by: { $0.sequence < $1.sequence }) {
            bySequence.append(c)
            if let s = c.storedSequence {
                var low = 0, high = hidden.count
                while low < high {
                    let mid = (low + high) / 2
                    if hidden[mid] < s { low = mid + 1 } else { high = mid }
                }
                hidden.insert(s, at: low)
            }
            bytes += c.id.count + c.record.count
            let d = c.countDelta
            deltas = (deltas.live + d.live, deltas.deleted + d.deleted, deltas.conflicted + d.conflicted,
                      deltas.rows + d.rows)
        }
        return PendingChanges(entries: merged, bySequence: bySequence, hiddenSequences: hidden, head: head,
                              length: length + 1, bytes: bytes, deltas: deltas)
    }

    /// Whether a record of `documents` more documents (`bytes` of IDs and records) may join the chain, which
    /// may be at most `maximumLength` records long (at most ``maximumLength``; tests fold more often).
    func admits(documents: Int, bytes: Int, maximumLength: Int = PendingChanges.maximumLength) -> Bool {
        documents <= PendingChanges.deltaLimit && length < min(maximumLength, PendingChanges.maximumLength)
            && self.bytes + bytes <= PendingChanges.maximumBytes
    }

    /// The index of `id` in `entries`.
    func index(of id: UnsafeRawBufferPointer) -> Int? {
        var low = 0, high = entries.count - 1
        while low <= high {
            let mid = (low + high) / 2
            let order = entries[mid].id.withUnsafeBytes { compareBytes($0, id) }
            if order == 0 { return mid }
            if order < 0 { low = mid + 1 } else { high = mid - 1 }
        }
        return nil
    }

    func index(of id: [UInt8]) -> Int? {
        id.withUnsafeBytes { index(of: $0) }
    }

    /// Whether the trees' by-sequence entry `sequence` is superseded by a pending change.
    func hides(_ sequence: UInt64) -> Bool {
        var low = 0, high = hiddenSequences.count - 1
        while low <= high {
            let mid = (low + high) / 2
            if hiddenSequences[mid] == sequence { return true }
            if hiddenSequences[mid] < sequence { low = mid + 1 } else { high = mid - 1 }
        }
        return false
    }

    /// The pending document with new sequence `sequence`.
    func entry(atSequence sequence: UInt64) -> LogEntry? {
        var low = 0, high = bySequence.count - 1
        while low <= high {
            let mid = (low + high) / 2
            let e = bySequence[mid]
            if e.sequence == sequence { return e }
            if e.sequence < sequence { low = mid + 1 } else { high = mid - 1 }
        }
        return nil
    }

    /// The entries as a leaf node whose entry i is `entries[i]` (ID → by-ID value); nil when there are none.
    var leaf: Node? {
        guard !entries.isEmpty else { return nil }
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

    /// The pending changes of `commit`: its log chain (``records(head:length:commit:storage:)``) applied oldest
    /// first.
    static func read(head: UInt64, length: Int, commit: CommitHeader, storage: StorageFile) throws -> PendingChanges {
        guard head != 0 else { return .none }
        let records = try records(head: head, length: length, commit: commit, storage: storage)
        var pending = PendingChanges.none
        for record in records.reversed() { pending = pending.applying(record.entries, head: head) }
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
        if let i = pending.index(of: id) { return try pending.entries[i].record.withUnsafeBytes { try body($0) } }
        if let reader { return try reader.withValue(for: id, cachingLeaf: cachingLeaf, body) }
        if let slice = try byID.value(for: id, cachingLeaf: cachingLeaf) { return try slice.withUnsafeBytes(body) }
        return try body(nil)
    }

    /// Every by-ID entry in `range`, as leaf and index, in ID order (descending when asked): the tree's, with the
    /// pending changes put in their places (a pending change of a document the tree holds replaces its entry).
    /// Stop by returning false.
    func forEachByID(in range: KeyRange = .all, descending: Bool = false,
                     _ body: (_ leaf: Node, _ index: Int) throws -> Bool) throws {
        guard let leaf = pending.leaf else {
            return try byID.forEachEntry(in: range, descending: descending, body)
        }
        var mine = (0..<leaf.count).filter { range.contains(leaf.key($0)) }
        if descending { mine.reverse() }
        var next = 0
        var stopped = false
        try byID.forEachEntry(in: range, descending: descending) { node, i in
            let key = node.key(i)
            while next < mine.count {
                let order = compareBytes(leaf.key(mine[next]), key)
                if descending ? order < 0 : order > 0 { break }
                let p = mine[next]
                next += 1
                if try !body(leaf, p) {
                    stopped = true
                    return false
                }
                if order == 0 { return true }  // the pending change replaced this entry
            }
            if try !body(node, i) {
                stopped = true
                return false
            }
            return true
        }
        while !stopped, next < mine.count {
            if try !body(leaf, mine[next]) { return }
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
