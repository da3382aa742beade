import SofaStorage

/// The seeded database workload of the database crash tests (RELIABILITY.md R1): the `crash-worker` child runs
/// it (`crash-worker database PATH SEED`) and is killed at random moments; the test replays the same steps as a
/// ``Model`` to know what the database must hold after any number of them.
///
/// Step k (k = 1, 2, …) is one commit of the document file — a single put, a batch, a delete, a force-inserted
/// conflict or the deletion of a conflict's losing leaf — and some steps then update both views' indexes or
/// compact the database. Every step saves at least one revision, and each saved revision takes one sequence, so
/// the database's `lastSequence` names the step it recovered to (``Model/lastSequence`` after that step).
/// Which documents a step touches depends only on the seed, the step number and the model's state after the
/// steps before it; revision IDs the step needs are read from the database as it runs.
package enum DatabaseCrashWorkload {
    /// Documents are `d000` … `d159`.
    package static let documentSpace = 160
    /// The map/reduce view: `type == "item"` → key `group`, value `n`, sum reduce.
    package static let mapViewName = "byGroup"
    /// The declarative view: items → key `[tag, n]`, no value, count reduce.
    package static let declarativeViewName = "byTag"

    /// What a step does: its commit (a single write or a batch), and for the last two kinds what follows it.
    package enum Kind: String, Sendable, CaseIterable {
        /// One `put` (create, recreate or update).
        case put
        /// Puts, deletes and conflicts on distinct documents in one `inBatch`.
        case batch
        /// One `delete` of a document's winning revision.
        case delete
        /// One `forceInsert` of a losing branch.
        case conflict
        /// One `delete` of a conflict's losing leaf.
        case resolve
        /// One `put`, then `updateIndex()` of both views.
        case updateIndex
        /// One `put`, then `Database.compact()`.
        case compact
    }

    /// One change to one document.
    package enum Operation: Sendable, Equatable {
        /// Creates the document, recreates a deleted one, or updates the winning revision.
        case put(id: String, body: JSON)
        /// Deletes the winning revision (the document has no conflict).
        case delete(id: String)
        /// Force-inserts `revision` (generation 1) as a new branch: a conflict that loses to the winner.
        case conflict(id: String, revision: String, body: JSON)
        /// Deletes the losing leaf `revision`, resolving the conflict.
        case resolve(id: String, revision: String)
    }

    /// The work of one step.
    package struct Step: Sendable {
        /// The step's number, 1-based.
        package let number: Int
        package let kind: Kind
        /// The changes, committed in one batch (``batched``) or as one single write.
        package let operations: [Operation]
        /// True when ``operations`` run inside `inBatch`; false for a single write.
        package var batched: Bool { kind == .batch }
    }

    /// What the database holds for one document ID after some steps.
    package struct DocumentState: Sendable, Equatable {
        /// The winning revision's body (an item or note object); meaningless when ``deleted``.
        package var body: JSON
        package var deleted: Bool
        /// The winning branch's generation.
        package var generation: Int
        /// The losing conflict leaf, when there is one.
        package var conflictRevision: String?
    }

    /// The expected database after ``steps`` steps.
    package struct Model: Sendable {
        /// By document ID.
        package private(set) var documents: [String: DocumentState] = [:]
        /// The database's `lastSequence` after these steps.
        package private(set) var lastSequence: UInt64 = 0
        /// Steps applied.
        package private(set) var steps = 0
        /// The kind of the last step applied.
        package private(set) var lastKind: Kind?
        /// The seed the steps are made from.
        package let seed: UInt64

        /// The model before any step.
        package init(seed: UInt64) { self.seed = seed }

        /// The next step (number ``steps`` + 1), chosen from the seed and this state.
        package func nextStep() -> Step {
            let k = steps + 1
            var random = SplitMix64(seed: seed &* 0x9E37_79B9_7F4A_7C15 &+ UInt64(k) &* 0xD1B5_4A32_D192_ED03)
            func next(_ bound: Int) -> Int { Int(random.next() % UInt64(bound)) }
            let ids = (0..<DatabaseCrashWorkload.documentSpace).map { DatabaseCrashWorkload.id($0) }
            func body() -> JSON {
                var members: JSONObject = ["type": next(8) == 0 ? "note" : "item", "group": .number(Double(next(8))),
                                           "tag": .number(Double(next(5))), "n": .number(Double(next(1000))),
                                           "step": .number(Double(k))]
                // Some bodies above the inline limit (1 KiB): stored as chunks of their own, copied by compaction.
                if next(10) == 0 {
                    members["pad"] = .string(String(repeating: "abcdefghij", count: 100 + next(200)))
                }
                return .object(members)
            }
            /// The first ID from a random start that satisfies `eligible`.
            func pick(_ eligible: (DocumentState?) -> Bool) -> String? {
                let start = next(ids.count)
                for i in 0..<ids.count {
                    let id = ids[(start + i) % ids.count]
                    if eligible(documents[id]) { return id }
                }
                return nil
            }
            let deletable: (DocumentState?) -> Bool = { $0.map { !$0.deleted && $0.conflictRevision == nil } ?? false }
            let conflictable: (DocumentState?) -> Bool = {
                $0.map { !$0.deleted && $0.generation >= 2 && $0.conflictRevision == nil } ?? false
            }
            func revision() -> String {
                let hex = { (v: UInt64) in
                    String(repeating: "0", count: 16 - String(v, radix: 16).count) + String(v, radix: 16)
                }
                return "1-" + hex(random.next()) + hex(random.next())
            }
            let roll = next(16)
            var kind: Kind = switch roll {
            case 0..<5: .put
            case 5..<8: .batch
            case 8..<10: .delete
            case 10: .conflict
            case 11: .resolve
            case 12..<15: .updateIndex
            default: .compact
            }
            var operations: [Operation] = []
            switch kind {
            case .batch:
                var chosen = Set<String>()
                for _ in 0..<(2 + next(24)) {
                    let id = ids[next(ids.count)]
                    guard chosen.insert(id).inserted else { continue }
                    let state = documents[id]
                    if deletable(state) && next(4) == 0 {
                        operations.append(.delete(id: id))
                    } else if conflictable(state) && next(8) == 0 {
                        operations.append(.conflict(id: id, revision: revision(), body: body()))
                    } else {
                        operations.append(.put(id: id, body: body()))
                    }
                }
            case .delete:
                if let id = pick(deletable) { operations = [.delete(id: id)] }
            case .conflict:
                if let id = pick(conflictable) { operations = [.conflict(id: id, revision: revision(), body: body())] }
            case .resolve:
                if let id = pick({ $0?.conflictRevision != nil }) {
                    operations = [.resolve(id: id, revision: documents[id]!.conflictRevision!)]
                }
            case .put, .updateIndex, .compact:
                break
            }
            if operations.isEmpty {
                // A single put: the step's own kind, or what a delete/conflict/resolve without a candidate does.
                if kind != .updateIndex && kind != .compact { kind = .put }
                operations = [.put(id: ids[next(ids.count)], body: body())]
            }
            return Step(number: k, kind: kind, operations: operations)
        }

        /// Applies `step` (which must be ``nextStep()``).
        package mutating func apply(_ step: Step) {
            precondition(step.number == steps + 1, "step \(step.number) applied after \(steps)")
            for operation in step.operations {
                switch operation {
                case .put(let id, let body):
                    let generation = documents[id].map { $0.generation + 1 } ?? 1
                    documents[id] = DocumentState(body: body, deleted: false, generation: generation,
                                                  conflictRevision: documents[id]?.conflictRevision)
                case .delete(let id):
                    documents[id]!.deleted = true
                    documents[id]!.generation += 1
                    documents[id]!.body = [:]
                case .conflict(let id, let revision, _):
                    documents[id]!.conflictRevision = revision
                case .resolve(let id, _):
                    documents[id]!.conflictRevision = nil
                }
                lastSequence += 1
            }
            steps += 1
            lastKind = step.kind
        }

        /// The model after as many steps as make `lastSequence`, or nil when no step ends there.
        package mutating func advance(toSequence sequence: UInt64) -> Bool {
            while lastSequence < sequence { apply(nextStep()) }
            return lastSequence == sequence
        }
    }

    /// Document ID number `n`.
    package static func id(_ n: Int) -> String {
        n < 10 ? "d00\(n)" : n < 100 ? "d0\(n)" : "d\(n)"
    }

    /// Registers the map/reduce view and defines the declarative view on `db` (which must be writable), and
    /// returns both.
    package static func views(of db: Database) throws -> [View] {
        let byGroup = db.view(named: mapViewName)
        byGroup.setMapReduce(version: "1", map: { doc, emit in
            if doc["type"] == "item", let group = doc["group"] { emit(group, doc["n"]) }
        }, reduce: .sum)
        let byTag = try db.defineView(named: declarativeViewName, keyPaths: ["tag", "n"], reduce: .count,
                                      documentType: "item")
        return [byGroup, byTag]
    }

    /// Runs `step` on `db`: its commit, then the index updates or compaction its kind asks for.
    package static func perform(_ step: Step, on db: Database, views: [View]) throws {
        if step.batched {
            try db.inBatch { for operation in step.operations { try perform(operation, on: db) } }
        } else {
            try perform(step.operations[0], on: db)
        }
        switch step.kind {
        case .updateIndex: for view in views { try view.updateIndex() }
        case .compact: try db.compact()
        default: break
        }
    }

    private static func perform(_ operation: Operation, on db: Database) throws {
        switch operation {
        case .put(let id, let body):
            try db.put(body, id: id, rev: try db.document(id: id)?.revisionID)
        case .delete(let id):
            guard let current = try db.document(id: id) else {
                throw SofaError(.notFound, "crash workload: document \(id) to delete is missing")
            }
            try db.delete(id: id, rev: current.revisionID)
        case .conflict(let id, let revision, let body):
            try db.forceInsert(body, id: id, revisionHistory: [revision])
        case .resolve(let id, let revision):
            try db.delete(id: id, rev: revision)
        }
    }
}
