import SofaStorage

extension Database {
    // MARK: - Writing

    /// Creates or updates a document: one commit, or part of the enclosing ``inBatch(_:)``.
    ///
    /// Updates are optimistic: pass the revision you read (`rev`, or `_rev` in `properties`). The new
    /// revision's ID is `generation-digest`, the digest an XXH3-128 hash of the parent revision, the deleted
    /// flag and the body (FORMAT.md §10.1.3), so two replicas making the same edit make the same revision
    /// (Sofa before XXH3 digests made MD5 ones: a replica of that version makes a different ID for it).
    ///
    /// ```swift
    /// let created = try db.put(["title": "Qux"])                       // a generated ID
    /// let updated = try db.put(["title": "Quux"], id: created.id, rev: created.revisionID)
    /// ```
    ///
    /// - Parameters:
    ///   - properties: a JSON object. Members starting with `_` are reserved: `_id` and `_rev` (strings,
    ///     taken when `id`/`rev` are nil) and `_deleted` (`true` makes the revision a deletion); any other is an
    ///     error. The body is stored without them.
    ///   - id: the document ID; nil generates a unique one (unless `properties` has `_id`).
    ///   - rev: the current revision, required to update a live document; nil to create one, or to recreate
    ///     a deleted one.
    /// - Returns: the document at its new revision.
    /// - Throws: ``SofaError`` — `.conflict` when `rev` is missing or stale; `.invalidArgument` for a
    ///   non-object, a reserved member, a bad ID (empty, over 1024 UTF-8 bytes, starting with `_`) or a body over
    ///   64 MiB; `.invalidValue` for NaN/infinity; `.readOnly`; storage errors (nothing is committed then).
    ///   Inside ``inBatch(_:)`` a storage error may be one of an earlier put's (the batch writes on another
    ///   thread while puts go on): after any storage error the batch can only fail.
    @discardableResult
    public func put(_ properties: JSON, id: String? = nil, rev: String? = nil) throws -> Document {
        try DocumentInput.withUnsafeInput(properties) { input in
            let docID = try Database.resolve(id, input.id, what: "_id") ?? DocumentID.generate()
            try DocumentID.check(docID)
            let parent = try Database.resolve(rev, input.rev, what: "_rev")
            return try write {
                let edit = try documents.edit(documents.idBytes(docID), body: input.body, rev: parent,
                                              deleted: input.deleted)
                return Document(id: docID, edit: edit, body: input.strippedProperties ?? properties)
            }
        }
    }

    /// Deletes a document by adding a deletion revision (a tombstone) on top of leaf `rev`.
    ///
    /// Deleting a losing leaf of a conflicted document resolves that conflict branch.
    ///
    /// ```swift
    /// let doc = try db.document(id: "track-1")!
    /// try db.delete(id: doc.id, rev: doc.revisionID)
    /// ```
    ///
    /// - Parameters:
    ///   - id: the document ID.
    ///   - rev: a non-deleted leaf revision of it (normally the current revision).
    /// - Returns: the tombstone revision.
    /// - Throws: ``SofaError`` — `.notFound` when there is no such document; `.conflict` when `rev` is not a
    ///   live leaf; `.invalidArgument`; `.readOnly`; storage errors.
    @discardableResult
    public func delete(id: String, rev: String) throws -> Document {
        let idBytes = try DocumentID.validated(id)
        return try write {
            let edit = try documents.edit(idBytes, body: .empty, rev: rev, deleted: true)
            return Document(id: id, edit: edit, body: .object([:]))
        }
    }

    /// Inserts a revision with its history, as a replicator does: ancestors not yet known are added, and the
    /// revision may start a new branch — a conflict. Does nothing when the revision is already present.
    ///
    /// ```swift
    /// try db.forceInsert(["title": "Theirs"], id: "track-1", revisionHistory: ["2-bb", "1-aa"])
    /// ```
    ///
    /// - Parameters:
    ///   - properties: the revision's body (a JSON object; `_id`, `_rev`, `_deleted` are ignored).
    ///   - id: the document ID.
    ///   - revisionHistory: the revision's ID then its ancestors', newest first, generations consecutive.
    ///   - deleted: whether the revision is a deletion.
    /// - Returns: true when the revision was inserted, false when it was already there.
    /// - Throws: ``SofaError`` — `.invalidArgument` for a bad ID, body or history; `.readOnly`; storage errors.
    @discardableResult
    public func forceInsert(_ properties: JSON, id: String, revisionHistory: [String],
                            deleted: Bool = false) throws -> Bool {
        try DocumentInput.withUnsafeInput(properties) { input in
            let idBytes = try DocumentID.validated(id)
            let history = try DocumentFile.parseHistory(revisionHistory)
            return try write {
                try documents.forceInsert(idBytes, body: input.body.array, history: history, deleted: deleted) != nil
            }
        }
    }

    /// Runs `body` as one batch: every write inside it is one atomic commit when `body` returns. When `body`
    /// throws, nothing it wrote is kept or ever visible, and the error is rethrown.
    ///
    /// Other threads see the database as of the last commit until the batch commits (and their writes wait);
    /// inside the batch, this thread's reads see the batch's writes. A nested `inBatch` joins the outer batch.
    ///
    /// A batch of more than 256 writes may apply them to the trees on a second thread, in chunks, while `body`
    /// goes on; between chunks that thread spins (yielding its CPU to any thread that wants it) for up to 2 ms
    /// rather than sleeping, so a batch of many puts keeps about two cores busy until it commits.
    ///
    /// ```swift
    /// try db.inBatch {
    ///     for (id, body) in tracks { try db.put(body, id: id) }
    /// }
    /// ```
    ///
    /// - Throws: what `body` throws (after rolling back), `.readOnly`, or a storage error from the commit
    ///   (nothing of the batch is kept then) — also when a write failed inside `body` and the call it was
    ///   reported to had its error caught and ignored: a batch that lost data to a failed write never commits.
    public func inBatch(_ body: () throws -> Void) throws {
        try write(body)
    }

    // MARK: - Reading

    /// The document `id` at its winning revision, or nil when there is none. A deleted document is returned
    /// only with `includeDeleted` (as its tombstone, ``Document/isDeleted`` true).
    ///
    /// ```swift
    /// if let doc = try db.document(id: "track-1") { print(doc.properties) }
    /// ```
    ///
    /// - Throws: ``SofaError`` for a closed database or a storage failure.
    public func document(id: String, includeDeleted: Bool = false) throws -> Document? {
        guard let doc = try documentAt(id: id, revision: nil) else { return nil }
        return doc.isDeleted && !includeDeleted ? nil : doc
    }

    /// Leaf revision `rev` of document `id` (a conflicting revision, say), or nil when it is not a leaf here.
    /// Only leaves keep their bodies.
    ///
    /// - Throws: ``SofaError`` for a malformed `rev`, a closed database or a storage failure.
    public func document(id: String, rev: String) throws -> Document? {
        guard let revision = RevisionID(rev) else {
            throw SofaError(.invalidArgument, "\"\(rev.prefix(60))\" is not a revision ID (generation-digest)")
        }
        return try documentAt(id: id, revision: revision)
    }

    private func documentAt(id: String, revision: RevisionID?) throws -> Document? {
        try checkOpen()
        if isWriterThread, let batch = documents.batch {
            // The overlay answers without flushing the batch.
            guard let (record, _, _) = try batch.record(Array(id.utf8)) else { return nil }
            return try batch.bodyReader(storage: documents.storage).document(id: id, record: record, revision: revision)
        }
        return try documents.committedSnapshot().document(id: id, revision: revision)
    }

    /// The sequence of the newest change (0 for an empty database).
    public var lastSequence: UInt64 {
        if isWriterThread, let batch = documents.batch { return batch.lastSequence }
        return (try? readSnapshot().lastSequence) ?? 0
    }

    /// Documents that are not deleted, from the by-ID tree's stored counts: O(1).
    public var documentCount: Int { Int(clamping: (try? readSnapshot().counts.live) ?? 0) }

    /// Deleted documents (tombstones) kept, from the stored counts: O(1).
    public var deletedDocumentCount: Int { Int(clamping: (try? readSnapshot().counts.deleted) ?? 0) }

    /// Picks the value given as a parameter or as a special property; both given must agree.
    ///
    /// Inlined: called twice per put, each call copied both optional strings in and the answer out.
    @inline(__always)
    private static func resolve(_ parameter: String?, _ property: String?, what: String) throws -> String? {
        if let parameter, let property, parameter != property {
            throw SofaError(.invalidArgument, "\(what) in the properties (\(property.prefix(60))) differs from " +
                            "the argument (\(parameter.prefix(60)))")
        }
        return parameter ?? property
    }
}
