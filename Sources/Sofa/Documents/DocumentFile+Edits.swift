import SofaStorage

extension SofaError.Code {
    /// A write based on a revision that is not current: a `put` without `rev` (or with a stale one) on a live
    /// document, or a `delete` of a revision that is not a live leaf. Read the document again and retry.
    public static let conflict = SofaError.Code(rawValue: "conflict")
}

/// A document's properties split into the stored body and the special members CBL lets a caller pass in it.
///
/// Noncopyable: it is made once per put and read in place. As a copyable struct its initializer built it in a
/// temporary and copied it out (four retains, then four releases: ~340 instructions per put, callgrind D1).
struct DocumentInput: ~Copyable {
    /// Compact JSON of the members not starting with `_`, in the order given; empty for an empty object.
    var body: [UInt8]
    /// The properties without their special members, when they had any; nil when the properties as given are
    /// the body (most documents), so that no copy of them is made here.
    var strippedProperties: JSON?
    var id: String?
    var rev: String?
    var deleted: Bool

    /// Splits `properties`, which must be an object whose `_` members are only `_id` (string), `_rev` (string)
    /// and `_deleted` (boolean).
    ///
    /// - Throws: `.invalidArgument` for a non-object or another `_` member; `.invalidValue` for NaN, infinity
    ///   or nesting deeper than the serializer allows (reported first: the properties are serialized before
    ///   their `_` members are looked at); `.invalidArgument` for a body over 64 MiB.
    init(_ properties: borrowing JSON) throws {
        // Borrowed, not taken: an owned argument was one more copy of the value in `put` and its release here.
        // Matching on a borrowed value needs an explicit copy (two retains and two releases of its storage per
        // put), so the checks below take it as an ordinary (guaranteed) argument.
        try Self.checkObject(properties)
        // Serialized as given, into a fresh array the serializer allocates at the body's size; the serializer
        // tells whether a member name starts with `_` as it writes the names, so the special members are looked
        // for only then (a pass over the names of every put was ~300 instructions, callgrind D1).
        var body: [UInt8] = []
        var special: (id: String?, rev: String?, deleted: Bool) = (nil, nil, false)
        var stripped: JSON?
        if try JSONSerializer.write(properties, into: &body, strict: true) {
            (special, stripped) = try Self.specialMembers(of: properties)
            body = try stripped?.serializedBytes() ?? body
        }
        if body.count > DocumentFile.maximumBodySize {
            throw SofaError(.invalidArgument, "document body of \(body.count) bytes; the limit is 64 MiB")
        }
        // All stored at once, once nothing can throw.
        self.body = body.count == 2 ? [] : body  // "{}": an empty body is stored as none
        self.strippedProperties = stripped
        self.id = special.id
        self.rev = special.rev
        self.deleted = special.deleted
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
    /// Adds a revision made by this database: a child of `rev` (which must be a leaf), or of the deleted
    /// winner when `rev` is nil and the document is deleted, or a first revision for a new ID.
    /// Must be called inside a batch.
    ///
    /// - Throws: `.conflict` when `rev` is missing, stale or unknown as the rules above say.
    ///
    /// - Returns: the stored record and the new revision's ID.
    func edit(_ id: [UInt8], body: [UInt8], rev: String?, deleted: Bool) throws -> (DocumentRecord, RevisionID) {
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
            let first = RevisionID.derived(parent: nil, deleted: false, body: body)
            let tree = RevisionTree(first: first, deleted: false, body: try storeBody(body))
            return (try save(id, tree: tree, storedSequence: nil, storedFlags: 0, isNew: true), first)
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
        let newID = RevisionID.derived(parent: tree.revisions[parent].id, deleted: deleted, body: body)
        tree.addChild(of: parent, id: newID, deleted: deleted, body: try storeBody(body))
        return (try save(id, tree: tree, storedSequence: stored, storedFlags: flags), newID)
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
