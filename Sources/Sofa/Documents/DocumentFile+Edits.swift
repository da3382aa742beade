import SofaStorage

extension SofaError.Code {
    /// A write based on a revision that is not current: a `put` without `rev` (or with a stale one) on a live
    /// document, or a `delete` of a revision that is not a live leaf. Read the document again and retry.
    public static let conflict = SofaError.Code(rawValue: "conflict")
}

/// A put's body: its compact JSON text, with room before it for the two bytes that precede a first
/// revision's body in the digest's input (FORMAT.md §10.1.3), so the body is hashed where it lies.
///
/// Valid only inside the ``DocumentInput/withUnsafeInput(_:_:)`` call that made it: the text is usually the
/// serializer's stack buffer.
struct UnsafeDocumentBody {
    /// Bytes before the text that ``prefixRoom`` points at.
    static let headroom = 2

    /// The body's bytes; empty for an empty object.
    let bytes: UnsafeRawBufferPointer
    /// ``headroom`` writable bytes just before ``bytes``, or nil (an empty body made without them).
    let prefixRoom: UnsafeMutableRawPointer?

    /// No body, as a deletion has.
    static var empty: UnsafeDocumentBody {
        UnsafeDocumentBody(bytes: UnsafeRawBufferPointer(start: nil, count: 0), prefixRoom: nil)
    }

    /// The bytes as an array, for the paths that keep the body (a record's inline body, a value chunk).
    var array: [UInt8] { Array(bytes) }
}

/// A document's properties split into the stored body and the special members CBL lets a caller pass in it.
///
/// Noncopyable: it is made once per put and read in place. As a copyable struct its initializer built it in a
/// temporary and copied it out (four retains, then four releases: ~340 instructions per put, callgrind D1).
struct DocumentInput: ~Copyable {
    /// Compact JSON of the members not starting with `_`, in the order given; empty for an empty object.
    let body: UnsafeDocumentBody
    /// The properties without their special members, when they had any; nil when the properties as given are
    /// the body (most documents), so that no copy of them is made here.
    let strippedProperties: JSON?
    let id: String?
    let rev: String?
    let deleted: Bool

    /// The input whose body is `body` after its headroom (``JSONSerializer/withUnsafeText(of:headroom:_:)``'s
    /// buffer).
    ///
    /// - Throws: `.invalidArgument` for a body over 64 MiB.
    private init(body: UnsafeMutableRawBufferPointer, strippedProperties: JSON?,
                 special: (id: String?, rev: String?, deleted: Bool)) throws {
        let text = UnsafeRawBufferPointer(rebasing: body[UnsafeDocumentBody.headroom...])
        if text.count > DocumentFile.maximumBodySize {
            throw SofaError(.invalidArgument, "document body of \(text.count) bytes; the limit is 64 MiB")
        }
        // "{}": an empty body is stored as none.
        self.body = text.count == 2 ? .empty : UnsafeDocumentBody(bytes: text, prefixRoom: body.baseAddress)
        self.strippedProperties = strippedProperties
        self.id = special.id
        self.rev = special.rev
        self.deleted = special.deleted
    }

    /// Splits `properties`, which must be an object whose `_` members are only `_id` (string), `_rev` (string)
    /// and `_deleted` (boolean), and calls `use` with the result, whose body is valid only during the call.
    ///
    /// - Throws: `.invalidArgument` for a non-object or another `_` member; `.invalidValue` for NaN, infinity
    ///   or nesting deeper than the serializer allows (reported first: the properties are serialized before
    ///   their `_` members are looked at); `.invalidArgument` for a body over 64 MiB; then what `use` throws.
    static func withUnsafeInput<R>(_ properties: JSON, _ use: (borrowing DocumentInput) throws -> R) throws -> R {
        try checkObject(properties)
        // Serialized as given, on the stack unless the text outgrows the serializer's staging buffer; the
        // serializer tells whether a member name starts with `_` as it writes the names, so the special
        // members are looked for only then (a pass over the names of every put was ~300 instructions,
        // callgrind D1).
        let headroom = UnsafeDocumentBody.headroom
        return try JSONSerializer.withUnsafeText(of: properties, headroom: headroom) { text, underscore in
            guard underscore else {
                return try use(DocumentInput(body: text, strippedProperties: nil, special: (nil, nil, false)))
            }
            let (special, stripped) = try specialMembers(of: properties)
            guard let stripped else {
                return try use(DocumentInput(body: text, strippedProperties: nil, special: special))
            }
            return try JSONSerializer.withUnsafeText(of: stripped, headroom: headroom) { text, _ in
                try use(DocumentInput(body: text, strippedProperties: stripped, special: special))
            }
        }
    }

    /// Throws unless `properties` is an object.
    private static func checkObject(_ properties: JSON) throws {
        guard case .object = properties else {
            throw SofaError(.invalidArgument, "document properties must be a JSON object, not a \(properties.typeName)")
        }
    }

    /// The special members of `properties`, and the properties without them when there were any.
    private static func specialMembers(of properties: JSON) throws
        -> (special: (id: String?, rev: String?, deleted: Bool), stripped: JSON?) {
        guard case .object(let members) = properties else {
            throw SofaError(.invalidArgument, "document properties must be a JSON object, not a \(properties.typeName)")
        }
        var special: (id: String?, rev: String?, deleted: Bool) = (nil, nil, false)
        var hasSpecial = false
        // By key alone, from the keys' own array: a value is copied (retained) only for the rare `_` member.
        let keys = members.keys.elements
        for index in keys.indices where Self.isSpecial(keys[index]) {
            hasSpecial = true
            switch (keys[index], members.values[index]) {
            case ("_id", .string(let s)): special.id = s
            case ("_rev", .string(let s)): special.rev = s
            case ("_deleted", .bool(let b)): special.deleted = b
            default:
                throw SofaError(.invalidArgument, "property \"\(keys[index])\" is reserved (only _id, _rev and " +
                                "_deleted may start with '_', as a string, string and boolean)")
            }
        }
        return (special, hasSpecial ? .object(members.filter { !Self.isSpecial($0.key) }) : nil)
    }

    /// Whether `key` starts with `_`, reading only its first UTF-8 byte.
    @inline(__always)
    private static func isSpecial(_ key: String) -> Bool {
        var bytes = key.utf8.makeIterator()
        return bytes.next() == UInt8(ascii: "_")
    }
}

extension DocumentFile {
    /// What ``edit(_:body:rev:deleted:)`` made: the new revision, and the document's revision tree.
    struct Edit {
        /// The new revision's ID.
        let revision: RevisionID
        /// The document's new sequence.
        let sequence: UInt64
        /// Whether the new revision is a deletion.
        let deleted: Bool
        /// The document's revision tree, or nil when the new revision is all of it (a new document's first,
        /// stored without building a tree: ``DocumentFile/saveFirst(_:revision:body:)``).
        let tree: RevisionTree?
    }

    /// Adds a revision made by this database: a child of `rev` (which must be a leaf), or of the deleted
    /// winner when `rev` is nil and the document is deleted, or a first revision for a new ID.
    /// Must be called inside a batch.
    ///
    /// - Throws: `.conflict` when `rev` is missing, stale or unknown as the rules above say.
    ///
    /// - Returns: the new revision, and the tree it is in — nil when the revision is the whole tree (a new
    ///   document's first with an inline body, saved without building one).
    func edit(_ id: [UInt8], body: UnsafeDocumentBody, rev: String?, deleted: Bool) throws -> Edit {
        let parentID: RevisionID?
        if let rev {
            guard let parsed = RevisionID(rev) else {
                throw SofaError(.invalidArgument, "\"\(rev.prefix(60))\" is not a revision ID (generation-digest)")
            }
            parentID = parsed
        } else {
            parentID = nil
        }
        var name: String { String(decoding: id, as: UTF8.self) }  // for error messages only
        guard let (record, stored, flags) = try currentRecord(id) else {
            if deleted { throw SofaError(.notFound, "document \"\(name)\" does not exist") }
            if parentID != nil {
                throw SofaError(.conflict, "document \"\(name)\" does not exist; create it without a revision")
            }
            let first = RevisionID.derivedFirst(deleted: false, body: body)
            if storesInline(body.bytes.count) {
                // A new document with an inline body, every document of a bulk load: encoded straight from the
                // serializer's buffer into the batch, with no tree or body array made.
                return Edit(revision: first, sequence: try saveFirst(id, revision: first, body: body.bytes),
                            deleted: false, tree: nil)
            }
            let tree = RevisionTree(first: first, deleted: false, body: try storeBody(body))
            let record = try save(id, tree: tree, storedSequence: nil, storedFlags: 0, isNew: true)
            return Edit(revision: first, sequence: record.sequence, deleted: false, tree: record.tree)
        }
        var tree = record.tree
        let parent: Int
        if let parentID {
            guard let i = tree.index(of: parentID), tree.revisions[i].isLeaf else {
                throw SofaError(.conflict, "revision \(parentID) is not a current revision of \"\(name)\" " +
                                "(current: \(tree.winner.id)); read the document again")
            }
            if deleted && tree.revisions[i].deleted {
                throw SofaError(.conflict, "revision \(parentID) of \"\(name)\" is already deleted")
            }
            parent = i
        } else {
            guard tree.winner.deleted else {
                throw SofaError(.conflict, "document \"\(name)\" exists (revision \(tree.winner.id)); pass its " +
                                "current revision to update it")
            }
            if deleted { throw SofaError(.notFound, "document \"\(name)\" is already deleted") }
            parent = 0
        }
        let newID = RevisionID.derived(parent: tree.revisions[parent].id, deleted: deleted, body: body.bytes)
        tree.addChild(of: parent, id: newID, deleted: deleted, body: try storeBody(body))
        let saved = try save(id, tree: tree, storedSequence: stored, storedFlags: flags)
        return Edit(revision: newID, sequence: saved.sequence, deleted: deleted, tree: saved.tree)
    }

    /// Inserts a revision with its history as a replicator does (``RevisionTree/insert(history:deleted:body:)``).
    /// Must be called inside a batch.
    ///
    /// - Returns: the new record, or nil when the revision was already present.
    func forceInsert(_ id: [UInt8], body: [UInt8], history: [RevisionID], deleted: Bool) throws -> DocumentRecord? {
        if let (record, stored, flags) = try currentRecord(id) {
            var tree = record.tree
            guard tree.index(of: history[0]) == nil else { return nil }
            _ = tree.insert(history: history, deleted: deleted, body: try storeBody(body))
            return try save(id, tree: tree, storedSequence: stored, storedFlags: flags)
        }
        var tree = RevisionTree(revisions: [])
        _ = tree.insert(history: history, deleted: deleted, body: try storeBody(body))
        return try save(id, tree: tree, storedSequence: nil, storedFlags: 0, isNew: true)
    }

    /// Parses and checks a revision history (newest first): valid IDs, generations falling by one each step.
    static func parseHistory(_ history: [String]) throws -> [RevisionID] {
        guard !history.isEmpty else {
            throw SofaError(.invalidArgument, "a revision history needs at least the revision itself")
        }
        var out: [RevisionID] = []
        out.reserveCapacity(history.count)
        for text in history {
            guard let id = RevisionID(text) else {
                throw SofaError(.invalidArgument, "\"\(text.prefix(60))\" is not a revision ID (generation-digest)")
            }
            if let previous = out.last, previous.generation != id.generation + 1 {
                throw SofaError(.invalidArgument, "revision history must be newest first with consecutive " +
                                "generations: \(previous) is followed by \(id)")
            }
            out.append(id)
        }
        return out
    }
}
