import SofaStorage

/// One row of a query result: a key, a value, and the document it came from.
///
/// For an all-documents query the key is the document ID (the sequence number for
/// ``AllDocsMode/bySequence``) and the value is `{"rev": …}`, with `"deleted": true` for a deleted document,
/// as CouchDB's `_all_docs` shows it.
public struct QueryRow: Sendable, Equatable {
    /// How the value is held: computed on demand for all-documents rows, so a scan builds no objects.
    package enum Value: Sendable, Equatable {
        case json(JSON?)
        case revision(RevisionIDBox, deleted: Bool)
    }

    /// A revision ID inside a row's value (keeps ``RevisionID`` internal to the module).
    package struct RevisionIDBox: Sendable, Equatable {
        let id: RevisionID
    }

    /// An all-documents row's by-ID leaf (which keeps its bytes alive); the row keeps the entry's index
    /// beside it. The ID, key, value and document are decoded when asked for, so a scan builds no strings or
    /// values nobody reads.
    package struct Entry: Sendable {
        let leaf: Node
        /// Whether the key is the sequence (``AllDocsMode/bySequence``) rather than the ID.
        let keyIsSequence: Bool

        func documentID(_ index: Int) -> String { String(storedUTF8: leaf.key(index)) }

        /// The document entry `index` holds, as of `snapshot` (the query's); nil when it cannot be read.
        func document(_ index: Int, in snapshot: DocumentSnapshot) -> Document? {
            withExtendedLifetime(leaf) {
                try? snapshot.document(id: documentID(index), entry: leaf.value(index), revision: nil)
            }
        }

        /// Entry `index`'s summary. The query checked that it decodes when it took the row, from bytes the
        /// immutable leaf still holds, so decoding it now cannot fail.
        func summary(_ index: Int) -> RecordSummary {
            do {
                return try RecordSummary(decoding: leaf.value(index), path: "")
            } catch {
                preconditionFailure("a by-ID entry checked by its query no longer decodes: \(error)")
            }
        }
    }

    // The fields as given (view and reduced rows), or, when `entry` is set, an all-documents entry read on
    // demand (the given fields are then unused). Stored properties rather than an enum with payloads: reading
    // one field of an enum payload copied (retained and released) all of them, a third of a view query's
    // reference counting.
    private let givenKey: JSON
    private let givenValue: Value
    private let givenDocumentID: String?
    private let givenSourceDocumentID: String?
    private let givenSequence: UInt64
    private let givenConflicts: [String]
    private let entry: Entry?
    /// The entry's index in `entry`'s leaf. A separate stored `var` of a plain type: making `entry` itself
    /// mutable made copies of every row more expensive (the optimizer stopped forwarding them).
    private var entryIndex = 0
    package let source: RowSource?

    package init(key: JSON, value: Value, documentID: String?, sourceDocumentID: String?, sequenceNumber: UInt64,
                 conflictingRevisions: [String] = [], source: RowSource?) {
        givenKey = key
        givenValue = value
        givenDocumentID = documentID
        givenSourceDocumentID = sourceDocumentID
        givenSequence = sequenceNumber
        givenConflicts = conflictingRevisions
        entry = nil
        self.source = source
    }

    /// An all-documents row read from entry `index` of `entry`'s leaf on demand.
    package init(entry: Entry, index: Int, source: RowSource) {
        givenKey = .null
        givenValue = .json(nil)
        givenDocumentID = nil
        givenSourceDocumentID = nil
        givenSequence = 0
        givenConflicts = []
        self.entry = entry
        entryIndex = index
        self.source = source
    }

    /// Makes this all-documents row the row of entry `index` of the same leaf: a streaming scan hands out one
    /// row value per run of a leaf's entries, moved along, instead of making (and destroying) one per entry.
    /// Copies taken of the row before are values of their own and keep the entry they had.
    mutating func moveEntry(to index: Int) {
        entryIndex = index
    }

    /// The row's key.
    public var key: JSON {
        guard let e = entry else { return givenKey }
        return e.keyIsSequence ? .number(Double(e.summary(entryIndex).sequence)) : .string(e.documentID(entryIndex))
    }

    package var storedValue: Value {
        guard let e = entry else { return givenValue }
        let summary = e.summary(entryIndex)
        return .revision(RevisionIDBox(id: summary.winner), deleted: summary.isDeleted)
    }

    /// The ID of the document the row stands for (nil for a reduced row).
    public var documentID: String? {
        // Optional chaining reads the entry in place; `if let e = entry` would copy it (a leaf retain and
        // release per row of a scan).
        entry?.documentID(entryIndex) ?? givenDocumentID
    }

    /// The ID of the document that produced the row; differs from ``documentID`` only when a view's value
    /// redirects with `_id`.
    public var sourceDocumentID: String? {
        entry?.documentID(entryIndex) ?? givenSourceDocumentID
    }

    /// The document's sequence when the row was read (0 for a reduced row).
    public var sequenceNumber: UInt64 {
        entry?.summary(entryIndex).sequence ?? givenSequence
    }

    /// In ``AllDocsMode/showConflicts`` and ``AllDocsMode/onlyConflicts``, for a conflicted document: every
    /// non-deleted leaf revision, the winner first. Empty otherwise.
    public var conflictingRevisions: [String] {
        givenConflicts  // empty for entry rows: they are made only where no conflict list is shown
    }

    /// The row's value; nil when the index holds none.
    public var value: JSON? {
        switch storedValue {
        case .json(let v): return v
        case .revision(let box, let deleted):
            let rev = JSON.string(box.id.description)
            return deleted ? ["rev": rev, "deleted": true] : ["rev": rev]
        }
    }

    /// The document, read on access from the snapshot the query read (so it matches the row whatever was
    /// written since); nil when the row has no document or it cannot be read. An all-documents row decodes
    /// the entry it holds, without looking the ID up again.
    public var document: Document? {
        guard let source else { return nil }
        if case .some = entry { return entry?.document(entryIndex, in: source.snapshot) }  // read in place, not copied
        guard let documentID else { return nil }
        return try? source.snapshot.document(id: documentID)
    }

    /// Item `index` of an array key; nil when the key is not an array or is shorter.
    ///
    /// - Parameter index: the position in the key.
    public func key(at index: Int) -> JSON? { key[index] }

    /// Decodes the value as a Swift type.
    ///
    /// ```swift
    /// struct Info: Decodable { var rev: String }
    /// let rev = try row.decode(Info.self).rev
    /// ```
    ///
    /// - Parameter type: the type to decode.
    /// - Throws: ``SofaError`` with code `.decodingFailed` when the value does not match.
    public func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try (value ?? .null).decode(type)
    }

    /// The row as CouchDB writes it: `{"id": …, "key": …, "value": …}` (no `id` for a reduced row, no `value`
    /// when there is none), plus `"conflicts"` when ``conflictingRevisions`` is not empty.
    public func toJSON() -> JSON {
        var members = JSONObject()
        if let documentID { members["id"] = .string(documentID) }
        members["key"] = key
        if let value { members["value"] = value }
        if !conflictingRevisions.isEmpty { members["conflicts"] = .array(conflictingRevisions.map { .string($0) }) }
        return .object(members)
    }

    /// Rows are equal when key, value, document IDs, sequence and conflicts are; the loaded document is not
    /// compared.
    public static func == (a: QueryRow, b: QueryRow) -> Bool {
        a.key == b.key && a.storedValue == b.storedValue && a.documentID == b.documentID
            && a.sourceDocumentID == b.sourceDocumentID && a.sequenceNumber == b.sequenceNumber
            && a.conflictingRevisions == b.conflictingRevisions
    }
}

/// The snapshot a query read, shared by all its rows, from which a row's document is loaded on demand.
package final class RowSource: Sendable {
    let snapshot: DocumentSnapshot

    init(snapshot: DocumentSnapshot) {
        self.snapshot = snapshot
    }
}
