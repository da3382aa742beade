@testable import Sofa

/// A plain model of a database for the randomized tests: documents as dictionaries of revisions with parent
/// links, the winner and pruning computed the obvious way, independently of `RevisionTree`.
struct DocumentModel {
    struct Revision: Equatable {
        var parent: String?
        var deleted: Bool
        var body: JSON
    }

    struct Doc: Equatable {
        var revisions: [String: Revision] = [:]
        var sequence: UInt64 = 0
    }

    var docs: [String: Doc] = [:]
    var lastSequence: UInt64 = 0
    let depth: Int

    static func generation(_ rev: String) -> Int { Int(rev.prefix { $0 != "-" })! }
    static func digest(_ rev: String) -> [UInt8] { Array(rev.drop { $0 != "-" }.dropFirst().utf8) }

    /// CouchDB's order of leaves: live before deleted, then higher generation, then higher digest text.
    static func better(_ a: String, _ ra: Revision, than b: String, _ rb: Revision) -> Bool {
        if ra.deleted != rb.deleted { return !ra.deleted }
        if generation(a) != generation(b) { return generation(a) > generation(b) }
        return digest(b).lexicographicallyPrecedes(digest(a))
    }

    func leaves(_ doc: Doc) -> [String] {
        let parents = Set(doc.revisions.values.compactMap(\.parent))
        return doc.revisions.keys.filter { !parents.contains($0) }
            .sorted { Self.better($0, doc.revisions[$0]!, than: $1, doc.revisions[$1]!) }
    }

    func winner(_ doc: Doc) -> String { leaves(doc)[0] }

    /// Live leaves, best first.
    func liveLeaves(_ doc: Doc) -> [String] { leaves(doc).filter { !doc.revisions[$0]!.deleted } }

    func history(_ doc: Doc, from rev: String) -> [String] {
        var out: [String] = []
        var next: String? = rev
        while let r = next, let revision = doc.revisions[r] {
            out.append(r)
            next = revision.parent
        }
        return out
    }

    /// Stores a changed document under the next sequence, pruned to `depth` revisions per branch.
    mutating func store(_ id: String, _ doc: Doc) {
        var doc = doc
        var keep = Set<String>()
        for leaf in leaves(doc) { keep.formUnion(history(doc, from: leaf).prefix(depth)) }
        doc.revisions = doc.revisions.filter { keep.contains($0.key) }
        for (rev, r) in doc.revisions where r.parent.map({ !keep.contains($0) }) ?? false {
            doc.revisions[rev]!.parent = nil
        }
        for rev in doc.revisions.keys where !leaves(doc).contains(rev) { doc.revisions[rev]!.body = [:] }
        lastSequence += 1
        doc.sequence = lastSequence
        docs[id] = doc
    }

    /// IDs in the order all-docs returns them: raw UTF-8 bytes.
    var sortedIDs: [String] { docs.keys.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) } }

    var liveCount: Int { docs.values.filter { !$0.revisions[winner($0)]!.deleted }.count }
}
