/// A document as of one revision: its ID, revision, sequence and properties.
///
/// A value: it does not change when the database does; read the document again for a newer revision.
///
/// ```swift
/// let doc = try db.put(["type": "track", "title": "Qux"], id: "track-1")
/// doc.revisionID                   // "1-5f0c…" (generation-digest)
/// doc.properties["_rev"]           // the same, as CBL shows it
/// let next = try db.put(["type": "track", "title": "Quux"], id: "track-1", rev: doc.revisionID)
/// ```
public struct Document: Sendable, Equatable {
    /// The document's ID.
    public let id: String
    /// The sequence of the document's latest change (whatever revision this value shows).
    public let sequence: UInt64
    /// True when this revision is a deletion (a tombstone).
    public let isDeleted: Bool
    /// The body as stored: the properties without `_id`, `_rev` and `_deleted`.
    public let userProperties: JSON
    let revision: RevisionID
    /// The document's revision tree and this revision's place in it: conflicts and history are derived on
    /// demand, so reading or writing a document builds no lists it is not asked for. Nil when ``revision`` is
    /// the whole tree, a root and leaf (a new document's put builds no tree: ``tree`` makes one when asked).
    private let storedTree: RevisionTree?
    let index: Int

    /// The document's revision tree. One built on demand (``revision`` alone) holds no body (`.empty`): a
    /// `Document` carries its body as ``userProperties``, and comparisons of trees ignore bodies.
    var tree: RevisionTree { storedTree ?? RevisionTree(first: revision, deleted: isDeleted, body: .empty) }

    var conflicts: [RevisionID] {
        guard let tree = storedTree else { return [] }
        return tree.revisions.enumerated().filter { $0.offset != index && $0.element.isLeaf && !$0.element.deleted }
            .map(\.element.id)
    }
    var history: [RevisionID] { storedTree?.history(from: index) ?? [revision] }

    /// The ID of the revision this value shows, `generation-digest`.
    public var revisionID: String { revision.description }

    /// The body with `_id` and `_rev` first (and `"_deleted": true` for a tombstone), as Couchbase Lite shows
    /// a document. They are always this document's own: a stored body's `_id` or `_rev` member (a put never
    /// stores one) does not replace them, as it does not for the map function.
    public var properties: JSON {
        var members = JSONObject(minimumCapacity: (userProperties.objectValue?.count ?? 0) + 3)
        members["_id"] = .string(id)
        members["_rev"] = .string(revisionID)
        if isDeleted { members["_deleted"] = true }
        for (key, value) in userProperties.objectValue ?? [:]
        where key != "_id" && key != "_rev" && !(isDeleted && key == "_deleted") {
            members[key] = value
        }
        return .object(members)
    }

    /// The other non-deleted leaf revisions, best first: non-empty when the document is in conflict.
    /// Resolve a conflict by deleting the losing leaves (``Database/delete(id:rev:)`` with each leaf's ID).
    public var conflictingRevisions: [String] { conflicts.map(\.description) }

    /// This revision's ID and its ancestors', newest first, as far as they are kept (the revision tree is
    /// pruned to ``DatabaseOptions/revisionTreeDepth`` revisions per branch).
    public var revisionHistory: [String] { history.map(\.description) }

    /// The member named `key` of the properties (`_id` and `_rev` included).
    public subscript(key: String) -> JSON? {
        switch key {
        case "_id": return .string(id)
        case "_rev": return .string(revisionID)
        case "_deleted": return isDeleted ? true : userProperties[key]
        default: return userProperties[key]
        }
    }

    /// Documents are equal when they show the same revision of the same document with the same properties and
    /// the same revision tree (revision IDs, parents, leaves and deletions). The tree's stored bodies are not
    /// compared: a document read from the database carries only its own revision's body.
    public static func == (a: Document, b: Document) -> Bool {
        a.id == b.id && a.sequence == b.sequence && a.isDeleted == b.isDeleted && a.revision == b.revision
            && a.index == b.index && a.userProperties == b.userProperties
            && a.tree.revisions.elementsEqual(b.tree.revisions) {
                $0.id == $1.id && $0.parent == $1.parent && $0.deleted == $1.deleted && $0.isLeaf == $1.isLeaf
            }
    }

    /// The document at revision `index` of `record`, whose body is `body`.
    init(id: String, record: DocumentRecord, index: Int, body: JSON) {
        let r = record.tree.revisions[index]
        self.init(id: id, sequence: record.sequence, revision: r.id, deleted: r.deleted, tree: record.tree,
                  index: index, body: body)
    }

    /// The document as `edit` left it, whose body is `body`.
    init(id: String, edit: DocumentFile.Edit, body: JSON) {
        self.init(id: id, sequence: edit.sequence, revision: edit.revision, deleted: edit.deleted, tree: edit.tree,
                  index: edit.tree.map { $0.index(of: edit.revision)! } ?? 0, body: body)
    }

    /// Every field given (`tree` nil when `revision` is the whole tree; `index` is then 0).
    private init(id: String, sequence: UInt64, revision: RevisionID, deleted: Bool, tree: RevisionTree?, index: Int,
                 body: JSON) {
        self.id = id
        self.sequence = sequence
        self.isDeleted = deleted
        self.userProperties = body
        self.revision = revision
        self.storedTree = tree
        self.index = index
    }
}

/// What a document ID may be. IDs are compared and stored as their UTF-8 bytes.
enum DocumentID {
    /// Checks an ID: non-empty, at most ``DocumentFile/maximumIDLength`` UTF-8 bytes, not starting with `_`
    /// (reserved, as in CouchDB).
    ///
    /// - Returns: the ID's UTF-8 bytes.
    /// - Throws: `.invalidArgument` saying which rule failed.
    static func validated(_ id: String) throws -> [UInt8] {
        try check(id)
        var text = id
        return text.withUTF8 { Array($0) }  // one copy (`Array(id.utf8)` walks a small string's bytes)
    }

    /// ``validated(_:)``'s checks alone, for a caller that takes the bytes elsewhere (a put, into its file's
    /// buffer for them: ``DocumentFile/idBytes(_:)``).
    ///
    /// - Throws: `.invalidArgument` saying which rule failed.
    static func check(_ id: String) throws {
        var text = id
        let (count, first) = text.withUTF8 { ($0.count, $0.first) }
        if count == 0 { throw SofaError(.invalidArgument, "a document ID cannot be empty") }
        if count > DocumentFile.maximumIDLength {
            throw SofaError(.invalidArgument,
                            "document ID of \(count) bytes; at most \(DocumentFile.maximumIDLength) UTF-8 bytes")
        }
        if first == UInt8(ascii: "_") {
            throw SofaError(.invalidArgument, "document IDs starting with '_' are reserved: \"\(id.prefix(40))\"")
        }
    }

    /// A new unique ID: "-" and 22 base64url characters of 128 random bits, as Couchbase Lite makes them.
    static func generate() -> String {
        var rng = SystemRandomNumberGenerator()
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        var out: [UInt8] = [UInt8(ascii: "-")]
        var bits = rng.next() as UInt64, left = 64
        for _ in 0..<22 {
            if left < 6 {
                bits = rng.next()
                left = 64
            }
            out.append(alphabet[Int(bits & 63)])
            bits >>= 6
            left -= 6
        }
        return String(decoding: out, as: UTF8.self)
    }
}
