import SofaStorage

extension DocumentFile {
    /// Every problem in `snapshot`, empty when sound (`sofa verify` and the tests' teardown run it).
    ///
    /// Checks, beyond ``BTree/verify()`` of both trees (checksums, key order, counts, reductions — the live,
    /// deleted and conflicted counts among them): every by-ID key is a valid document ID; every entry decodes
    /// and its revision tree keeps its invariants; sequences are positive, unique and at most the last
    /// sequence; every leaf body reads and parses as a JSON object; and by-ID ⇄ by-sequence agree exactly —
    /// each document's sequence has one by-sequence entry naming it, and there is no other entry. With a commit
    /// log (FORMAT.md §10.1.7), each pending change must describe the trees' entries it supersedes as they are,
    /// and the checks above run on the trees as the pending changes amend them.
    func verify(_ snapshot: DocumentSnapshot) -> [SofaError] {
        var problems: [SofaError] = []
        if let problem = snapshot.storage.dataCheckProblem(of: snapshot.storage.latestCommit) {
            problems.append(problem)
        }
        problems += snapshot.byID.verify().problems
        problems += snapshot.bySequence.verify().problems
        func problem(_ message: String) { problems.append(SofaError(.corruption, message, path: path)) }

        var sequenceOf: [[UInt8]: UInt64] = [:]
        var seen: Set<UInt64> = []
        do {
            for change in snapshot.pending.entries {
                let name = String(decoding: change.id, as: UTF8.self)
                let stored = try change.id.withUnsafeBytes { id in
                    try snapshot.byID.value(for: id).map { slice in
                        try slice.withUnsafeBytes { try RecordSummary(decoding: $0, path: path) }
                    }
                }
                if stored?.sequence != change.storedSequence
                    || (stored != nil && stored!.flags != change.storedFlags) {
                    problem("the log's change of \"\(name)\" supersedes sequence "
                            + "\(change.storedSequence.map(String.init) ?? "none") (flags \(change.storedFlags)); the "
                            + "trees hold \(stored.map { "sequence \($0.sequence) (flags \($0.flags))" } ?? "none")")
                } else if let sequence = change.storedSequence,
                          try snapshot.bySequence.get(DocumentFile.sequenceKey(sequence)) != change.id {
                    problem("by-sequence \(sequence) does not name \"\(name)\", whose log change supersedes it")
                }
            }
            try snapshot.forEachByID { leaf, i in
                let key = leaf.key(i), value = leaf.value(i)
                let id = Array(key)
                let name = String(decoding: id, as: UTF8.self)
                let validUTF8 = String(validating: id, as: UTF8.self) != nil
                if !validUTF8 || id.isEmpty || id.count > DocumentFile.maximumIDLength {
                    problem("by-ID key \(id.prefix(40)) is not a valid document ID")
                }
                let record: DocumentRecord
                do {
                    record = try DocumentRecord(decoding: value, path: path)
                } catch {
                    problems.append(error as? SofaError ?? SofaError(.corruption, "\(error)", path: path))
                    return true
                }
                if record.sequence == 0 || record.sequence > snapshot.lastSequence {
                    problem("document \"\(name)\" has sequence \(record.sequence); last is \(snapshot.lastSequence)")
                }
                if !seen.insert(record.sequence).inserted {
                    problem("sequence \(record.sequence) belongs to more than one document (\"\(name)\")")
                }
                sequenceOf[id] = record.sequence
                for revision in record.tree.revisions where revision.isLeaf {
                    do {
                        _ = try snapshot.body(revision.body)
                    } catch {
                        problem("body of \"\(name)\" revision \(revision.id) does not read: \(error)")
                    }
                }
                return true
            }
            // By sequence, as ``DocumentSnapshot/forEachBySequence`` reads it — the tree's entries but those the log
            // supersedes, then the log's — written out here so that a malformed tree key is one problem, not the
            // end of the walk.
            var bySequenceRows = 0
            func check(_ sequence: UInt64, _ value: UnsafeRawBufferPointer) {
                bySequenceRows += 1
                let id = Array(value)
                if sequenceOf[id] != sequence {
                    let name = String(decoding: id, as: UTF8.self)
                    let actual = sequenceOf[id].map { "\($0)" } ?? "no by-ID entry"
                    problem("by-sequence \(sequence) names \"\(name)\", whose by-ID sequence is \(actual)")
                }
            }
            var newestInTree: UInt64 = 0
            try snapshot.bySequence.forEach { key, value in
                guard let sequence = try? DocumentFile.sequence(fromKey: key, path: path) else {
                    problem("by-sequence key of \(key.count) bytes")
                    return true
                }
                newestInTree = max(newestInTree, sequence)
                if !snapshot.pending.hides(sequence) { check(sequence, value) }
                return true
            }
            if let oldest = snapshot.pending.bySequence.first, oldest.sequence <= newestInTree {
                problem("the log's oldest change has sequence \(oldest.sequence), not above the trees' newest "
                        + "\(newestInTree)")
            }
            for change in snapshot.pending.bySequence { change.id.withUnsafeBytes { check(change.sequence, $0) } }
            if bySequenceRows != sequenceOf.count {
                problem("by-sequence has \(bySequenceRows) entries for \(sequenceOf.count) documents")
            }
        } catch {
            problems.append(error as? SofaError ?? SofaError(.corruption, "\(error)", path: path))
        }
        return problems
    }
}
