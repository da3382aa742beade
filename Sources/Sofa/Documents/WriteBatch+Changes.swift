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
    /// D1's CPU time (BENCHMARKS.md §3, "D1, twelfth round"). The flush copies the encoded bytes into leaves or
    /// action buffers as they are.
    ///
    /// A document changed again in the same overlay gets its new record appended and its entry pointed at it;
    /// the old bytes stay until the overlay is emptied (``pendingBytes`` counts both).
    struct Changes {
        /// Where one document's ID and record are in ``bytes``, and what a flush needs without decoding it.
        struct Entry {
            var idStart: Int
            var idCount: Int
            var recordStart: Int
            var recordCount: Int
            /// The record's sequence (its first `varint` after the flags byte, kept here to sort by).
            var sequence: UInt64
            /// The document's sequence in the working by-sequence tree, whose entry the flush removes.
            var storedSequence: UInt64?
            /// The document flags of its entry in the working by-ID tree (0 when it has none).
            var storedFlags: UInt8
        }

        private(set) var entries: [Entry] = []
        /// The IDs and encoded records the entries point into.
        private(set) var bytes: [UInt8] = []

        var count: Int { entries.count }
        var isEmpty: Bool { entries.isEmpty }
        var indices: Range<Int> { entries.indices }

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

        /// Replaces the state of the document at `i`.
        mutating func replace(at i: Int, with state: Pending) {
            let recordStart = bytes.count
            state.record.encode(into: &bytes)
            entries[i].recordStart = recordStart
            entries[i].recordCount = bytes.count - recordStart
            entries[i].sequence = state.record.sequence
            entries[i].storedSequence = state.storedSequence
            entries[i].storedFlags = state.storedFlags
        }

        /// Calls `body` with the index, ID, encoded record and entry of every document in `order` (all, in
        /// first-write order, when nil).
        func forEach(in order: [Int]? = nil,
                     _ body: (Int, UnsafeRawBufferPointer, UnsafeRawBufferPointer, Entry) throws -> Void) rethrows {
            try bytes.withUnsafeBytes { raw in
                func visit(_ i: Int) throws {
                    let e = entries[i]
                    try body(i, UnsafeRawBufferPointer(rebasing: raw[e.idStart ..< e.idStart + e.idCount]),
                             UnsafeRawBufferPointer(rebasing: raw[e.recordStart ..< e.recordStart + e.recordCount]), e)
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
            return try bytes.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[e.idStart ..< e.idStart + e.idCount])) }
        }

        /// The ID of the document at `i`.
        func id(at i: Int) -> [UInt8] {
            let e = entries[i]
            return Array(bytes[e.idStart ..< e.idStart + e.idCount])
        }

        /// The state of the document at `i`, its record decoded (`path` names the file in a decoding error).
        func state(at i: Int, path: String) throws -> Pending {
            let e = entries[i]
            let record = try bytes.withUnsafeBytes {
                try DocumentRecord(decoding: UnsafeRawBufferPointer(rebasing: $0[e.recordStart ..< e.recordStart + e.recordCount]),
                                   path: path)
            }
            return Pending(record: record, storedSequence: e.storedSequence, storedFlags: e.storedFlags)
        }

        /// The order of the ID at `i` against `id`: negative, zero or positive as it sorts before, equal or after.
        func compareID(at i: Int, to id: [UInt8]) -> Int {
            let e = entries[i]
            return bytes.withUnsafeBytes { raw in
                id.withUnsafeBytes { compareBytes(UnsafeRawBufferPointer(rebasing: raw[e.idStart ..< e.idStart + e.idCount]), $0) }
            }
        }

        /// The order of the IDs at `i` and `j`, as ``compareID(at:to:)``.
        func compareIDs(_ i: Int, _ j: Int) -> Int {
            withID(at: i) { a in withID(at: j) { compareBytes(a, $0) } }
        }

        /// The indices of the documents by ascending ID.
        func sortedByID() -> [Int] {
            bytes.withUnsafeBytes { raw in
                let id = { (i: Int) in
                    UnsafeRawBufferPointer(rebasing: raw[entries[i].idStart ..< entries[i].idStart + entries[i].idCount])
                }
                return indices.sorted { compareBytes(id($0), id($1)) < 0 }
            }
        }
    }
}
