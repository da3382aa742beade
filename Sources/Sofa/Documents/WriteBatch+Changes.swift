import SofaStorage

extension WriteBatch {
    /// The overlay's changed documents in first-write order, each with its latest state: IDs and encoded records
    /// in one byte buffer, fixed-size entries pointing into it.
    ///
    /// A document costs no allocation of its own here: `put` encodes the record (FORMAT.md §10.1.1) into
    /// ``bytes`` and frees its temporaries (the serialized body, the ID and revision arrays) before it returns, on
    /// its own thread, where the allocator hands the same memory to the next `put`. Held as Swift values (an ID
    /// array, a revision array and a body array per document), a chunk's records were freed hundreds at a time,
    /// on the flush queue or at the next hand-off, and the writer's allocations around them went down glibc's
    /// slow paths: this layout (with the buffers kept from chunk to chunk and batch to batch) took a fifth off
    /// D1's CPU time (BENCHMARKS.md §3, "D1, twelfth round"). The flush copies the encoded records into leaves or
    /// action buffers as they are.
    ///
    /// A document changed again in the same overlay gets its new record written over the old one when it fits
    /// there (the usual case: a revision tree at its pruning depth keeps its size), else appended, its entry
    /// pointed at it and the old bytes left until the overlay is emptied; ``replace(at:with:)`` says how many
    /// bytes that added, for the batch to count towards its flush (``WriteBatch/pendingBytes``).
    struct Changes {
        /// Where one document's ID and record are in ``bytes``, and what a flush needs without decoding it.
        struct Entry {
            /// Where the document's ID starts in ``Changes/bytes``.
            var idStart: Int
            /// The ID's length in bytes.
            var idCount: Int
            /// Where the document's encoded record starts in ``Changes/bytes``.
            var recordStart: Int
            /// The record's length in bytes.
            var recordCount: Int
            /// The record's sequence (its first `varint` after the flags byte, kept here to sort by).
            var sequence: UInt64
            /// The document's sequence in the working by-sequence tree, whose entry the flush removes.
            var storedSequence: UInt64?
            /// The document flags of its entry in the working by-ID tree (0 when it has none).
            var storedFlags: UInt8
        }

        /// One per document, in first-write order.
        private(set) var entries: [Entry] = []
        /// The IDs and encoded records the entries point into.
        private(set) var bytes: [UInt8] = []

        /// Documents held.
        var count: Int { entries.count }
        /// Whether no document is held.
        var isEmpty: Bool { entries.isEmpty }
        /// The documents' indices, in first-write order.
        var indices: Range<Int> { entries.indices }
        /// Bytes the storage holds room for (entries and buffer).
        var capacityBytes: Int { entries.capacity * MemoryLayout<Entry>.stride + bytes.capacity }

        /// Room for `documents` documents of about `bytesEach` bytes each (ID and record).
        mutating func reserveCapacity(_ documents: Int, bytesEach: Int = 256) {
            entries.reserveCapacity(documents)
            bytes.reserveCapacity(documents * bytesEach)
        }

        /// Forgets every document; the storage stays for the next overlay when `keepingCapacity`.
        mutating func removeAll(keepingCapacity: Bool) {
            entries.removeAll(keepingCapacity: keepingCapacity)
            bytes.removeAll(keepingCapacity: keepingCapacity)
        }

        /// Adds document `id` in `state`, after every document here.
        mutating func append(_ id: [UInt8], _ state: Pending) {
            let idStart = bytes.count
            bytes.append(contentsOf: id)
            let recordStart = bytes.count
            state.record.encode(into: &bytes)
            entries.append(Entry(idStart: idStart, idCount: id.count, recordStart: recordStart,
                                 recordCount: bytes.count - recordStart, sequence: state.record.sequence,
                                 storedSequence: state.storedSequence, storedFlags: state.storedFlags))
        }

        /// Adds new document `id` at `sequence`, after every document here: a record of one revision,
        /// `revision` (generation 1, binary digest), with `body` inline — what ``append(_:_:)`` adds for a
        /// ``RevisionTree/init(first:deleted:body:)`` tree, encoded without one.
        mutating func appendFirst(_ id: [UInt8], sequence: UInt64, revision: RevisionID,
                                  body: UnsafeRawBufferPointer) {
            guard case .binary(let high, let low) = revision.digest else {
                preconditionFailure("a first revision made here has a binary digest")
            }
            let idStart = bytes.count
            let recordStart = idStart + id.count
            // The ID and the record in one copy (an append of the ID of its own was ~100 instructions, callgrind D1).
            id.withUnsafeBytes {
                DocumentRecord.appendFirstRevision(sequence: sequence, generation: revision.generation, deleted: false,
                                                   high: high, low: low, body: body, after: $0, into: &bytes)
            }
            entries.append(Entry(idStart: idStart, idCount: id.count, recordStart: recordStart,
                                 recordCount: bytes.count - recordStart, sequence: sequence,
                                 storedSequence: nil, storedFlags: 0))
        }

        /// Replaces the state of the document at `i`: its record over the old one's bytes when it fits there,
        /// else appended.
        ///
        /// - Returns: the bytes the buffer grew by (0 when the record fitted in place).
        @discardableResult
        mutating func replace(at i: Int, with state: Pending) -> Int {
            let size = state.record.encodedSize
            let grown: Int
            if size <= entries[i].recordCount {
                let start = entries[i].recordStart
                bytes.withUnsafeMutableBytes {
                    state.record.encode(to: UnsafeMutableRawBufferPointer(rebasing: $0[start..<start + size]))
                }
                grown = 0
            } else {
                entries[i].recordStart = bytes.count
                state.record.encode(into: &bytes)
                grown = size
            }
            entries[i].recordCount = size
            entries[i].sequence = state.record.sequence
            entries[i].storedSequence = state.storedSequence
            entries[i].storedFlags = state.storedFlags
            return grown
        }

        /// Calls `body` with the index, ID, encoded record and entry of every document in `order` (all, in
        /// first-write order, when nil).
        func forEach(in order: [Int]? = nil,
                     _ body: (Int, UnsafeRawBufferPointer, UnsafeRawBufferPointer, Entry) throws -> Void) rethrows {
            try bytes.withUnsafeBytes { raw in
                func visit(_ i: Int) throws {
                    let e = entries[i]
                    let id = Changes.slice(raw, e.idStart, e.idCount)
                    try body(i, id, Changes.slice(raw, e.recordStart, e.recordCount), e)
                }
                if let order {
                    for i in order { try visit(i) }
                } else {
                    for i in entries.indices { try visit(i) }
                }
            }
        }

        /// Calls `body` with the ID of the document at `i`.
        func withID<R>(at i: Int, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
            let e = entries[i]
            return try bytes.withUnsafeBytes { try body(Changes.slice($0, e.idStart, e.idCount)) }
        }

        /// The ID of the document at `i`.
        func id(at i: Int) -> [UInt8] {
            let e = entries[i]
            return Array(bytes[e.idStart..<e.idStart + e.idCount])
        }

        /// The state of the document at `i`, its record decoded (`path` names the file in a decoding error).
        func state(at i: Int, path: String) throws -> Pending {
            let e = entries[i]
            let record = try bytes.withUnsafeBytes {
                try DocumentRecord(decoding: Changes.slice($0, e.recordStart, e.recordCount), path: path)
            }
            return Pending(record: record, storedSequence: e.storedSequence, storedFlags: e.storedFlags)
        }

        /// The order of the ID at `i` against `id`: negative, zero or positive as it sorts before, equal or after.
        func compareID(at i: Int, to id: [UInt8]) -> Int {
            withID(at: i) { mine in id.withUnsafeBytes { compareBytes(mine, $0) } }
        }

        /// The order of the IDs at `i` and `j`, as ``compareID(at:to:)``.
        func compareIDs(_ i: Int, _ j: Int) -> Int {
            withID(at: i) { a in withID(at: j) { compareBytes(a, $0) } }
        }

        /// The indices of the documents by ascending ID.
        func sortedByID() -> [Int] {
            bytes.withUnsafeBytes { raw in
                indices.sorted {
                    compareBytes(Changes.slice(raw, entries[$0].idStart, entries[$0].idCount),
                                 Changes.slice(raw, entries[$1].idStart, entries[$1].idCount)) < 0
                }
            }
        }

        /// `count` bytes of `raw` from `start`.
        private static func slice(_ raw: UnsafeRawBufferPointer, _ start: Int, _ count: Int) -> UnsafeRawBufferPointer {
            UnsafeRawBufferPointer(rebasing: raw[start..<start + count])
        }
    }
}
