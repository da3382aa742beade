/// A stored document body: nothing (an empty object), bytes kept in the by-ID entry, or a value chunk.
enum StoredBody: Sendable, Equatable {
    case empty
    case inline([UInt8])
    /// The offset of a value chunk holding the body's JSON text.
    case chunk(offset: UInt64)
}

/// Every revision a document keeps: its edit history as a tree, the leaves with their bodies.
///
/// Invariants (checked by ``validate()``, kept by every mutation): a parent's generation is its child's minus
/// one, so parent links cannot form a cycle; a revision is a leaf exactly when no revision names it as parent;
/// only leaves have bodies; no revision ID appears twice. The winner is CouchDB's: a non-deleted leaf beats a
/// deleted one, then the higher generation, then the higher digest text.
struct RevisionTree: Sendable, Equatable {
    struct Revision: Sendable, Equatable {
        var id: RevisionID
        /// Index of the parent in ``RevisionTree/revisions``, nil when unknown (a root, or pruned away).
        var parent: Int?
        var deleted: Bool
        var isLeaf: Bool
        var body: StoredBody
    }

    /// The revisions, winner first (the stored order; see ``normalize()``).
    private(set) var revisions: [Revision]

    init(revisions: [Revision]) { self.revisions = revisions }

    /// A tree of one revision: a new document.
    init(first id: RevisionID, deleted: Bool, body: StoredBody) {
        revisions = [Revision(id: id, parent: nil, deleted: deleted, isLeaf: true, body: body)]
    }

    var winner: Revision { revisions[0] }

    /// True when more than one leaf is not deleted.
    var isConflicted: Bool { revisions.lazy.filter { $0.isLeaf && !$0.deleted }.count > 1 }

    /// Non-deleted leaves other than the winner, best first.
    var conflictingRevisions: [RevisionID] {
        revisions.dropFirst().filter { $0.isLeaf && !$0.deleted }.map(\.id)
    }

    func index(of id: RevisionID) -> Int? { revisions.firstIndex { $0.id == id } }

    /// The revision at `index` and its ancestors, newest first, as far as they are kept.
    func history(from index: Int) -> [RevisionID] {
        var out: [RevisionID] = []
        var i: Int? = index
        while let at = i {
            out.append(revisions[at].id)
            i = revisions[at].parent
        }
        return out
    }

    /// Whether `a` should win over `b` (both leaves).
    static func beats(_ a: Revision, _ b: Revision) -> Bool {
        if a.deleted != b.deleted { return !a.deleted }
        return a.id > b.id
    }

    // MARK: - Edits

    /// Adds `id` as the child of leaf `parent` (which stops being a leaf and loses its body).
    mutating func addChild(of parent: Int, id: RevisionID, deleted: Bool, body: StoredBody) {
        revisions[parent].isLeaf = false
        revisions[parent].body = .empty
        revisions.append(Revision(id: id, parent: parent, deleted: deleted, isLeaf: true, body: body))
    }

    /// Inserts a revision with its ancestry (`history`, newest first, generations consecutive), as a
    /// replicator does. Revisions already present are shared; the rest are added as a chain below the newest
    /// one present (or as a new root), which makes a new branch when that one was not a leaf.
    ///
    /// - Returns: false when `history[0]` is already in the tree (nothing changes).
    mutating func insert(history: [RevisionID], deleted: Bool, body: StoredBody) -> Bool {
        guard index(of: history[0]) == nil else { return false }
        var known: Int?
        var firstKnown = history.count
        for (i, id) in history.enumerated().dropFirst() {
            if let found = index(of: id) {
                known = found
                firstKnown = i
                break
            }
        }
        var parent = known
        if let known {
            revisions[known].isLeaf = false
            revisions[known].body = .empty
        }
        for i in stride(from: firstKnown - 1, through: 0, by: -1) {
            let leaf = i == 0
            revisions.append(Revision(id: history[i], parent: parent, deleted: leaf && deleted, isLeaf: leaf,
                                      body: leaf ? body : .empty))
            parent = revisions.count - 1
        }
        return true
    }

    /// Forgets revisions more than `depth - 1` edits above every leaf (CouchDB's stemming), so each branch
    /// keeps its newest `depth` revisions; then puts the winner first.
    mutating func prune(depth: Int) {
        var keep = [Bool](repeating: false, count: revisions.count)
        for (leaf, r) in revisions.enumerated() where r.isLeaf {
            var i: Int? = leaf
            var distance = 0
            while let at = i, distance < depth {
                keep[at] = true
                i = revisions[at].parent
                distance += 1
            }
        }
        if keep.contains(false) {
            var newIndex = [Int?](repeating: nil, count: revisions.count)
            var kept: [Revision] = []
            for (i, r) in revisions.enumerated() where keep[i] {
                newIndex[i] = kept.count
                kept.append(r)
            }
            for i in kept.indices { kept[i].parent = kept[i].parent.flatMap { newIndex[$0] } }
            revisions = kept
        }
        normalize()
    }

    /// Puts the revisions in stored order: the winner, then other leaves best first, then the rest by
    /// descending generation and digest. Deterministic, so equal trees encode to equal bytes.
    mutating func normalize() {
        let order = revisions.indices.sorted { x, y in
            let a = revisions[x], b = revisions[y]
            if a.isLeaf != b.isLeaf { return a.isLeaf }
            if a.isLeaf { return RevisionTree.beats(a, b) }
            return a.id > b.id
        }
        guard order != Array(revisions.indices) else { return }
        var position = [Int](repeating: 0, count: revisions.count)
        for (newIndex, old) in order.enumerated() { position[old] = newIndex }
        revisions = order.map { old in
            var r = revisions[old]
            r.parent = r.parent.map { position[$0] }
            return r
        }
    }

    /// Problems with the invariants, as sentences; empty when sound.
    func validate() -> [String] {
        var problems: [String] = []
        if revisions.isEmpty { return ["no revisions"] }
        if revisions.count == 1 {  // most documents: skip the general checks and their allocations
            let r = revisions[0]
            if r.parent != nil { problems.append("revision \(r.id) has a parent outside the tree") }
            if !r.isLeaf { problems.append("revision \(r.id) has a wrong leaf flag") }
            return problems
        }
        var hasChild = [Bool](repeating: false, count: revisions.count)
        for (i, r) in revisions.enumerated() {
            guard let p = r.parent else { continue }
            if p < 0 || p >= revisions.count || p == i {
                problems.append("revision \(r.id) has parent index \(p) outside the tree")
                continue
            }
            if revisions[p].id.generation != r.id.generation &- 1 || r.id.generation == 0 {
                problems.append("revision \(r.id) has parent \(revisions[p].id) of a non-consecutive generation")
            }
            hasChild[p] = true
        }
        for (i, r) in revisions.enumerated() {
            if r.isLeaf == hasChild[i] { problems.append("revision \(r.id) has a wrong leaf flag") }
            if !r.isLeaf && r.body != .empty { problems.append("non-leaf revision \(r.id) keeps a body") }
        }
        if Set(revisions.map(\.id)).count != revisions.count { problems.append("a revision ID appears twice") }
        var expected = self
        expected.normalize()
        if expected.revisions.map(\.id) != revisions.map(\.id) {
            problems.append("revisions are not in stored order (winner first)")
        }
        return problems
    }
}
