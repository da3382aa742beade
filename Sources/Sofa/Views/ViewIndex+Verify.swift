import SofaStorage

extension ViewIndex {
    /// Every problem found in the newest commit (empty when sound): the trees' structure, checksums, counts
    /// and reductions; every back-index entry's rows present, with the doc ID, emit index and key they claim;
    /// no row without a back-index entry (the counts agree); the group aggregates equal to a recomputation.
    /// Problems in a node name its offset; problems between the trees name the offset of the commit checked.
    func verify() -> [SofaError] {
        var problems: [SofaError] = []
        var commitOffset: Int?
        func problem(_ message: String) {
            problems.append(SofaError(.corruption, message, path: path, offset: commitOffset))
        }
        do {
            let snapshot = try self.snapshot()
            commitOffset = Int(clamping: snapshot.commitOffset)
            if let problem = storage.dataCheckProblem(of: storage.latestCommit) { problems.append(problem) }
            problems += snapshot.rows.verify().problems
            problems += snapshot.backIndex.verify().problems
            guard problems.isEmpty else { return problems }
            let sameCollator = snapshot.header.collatorVersion == CollationKey.collatorVersion
            var emits: UInt64 = 0
            try snapshot.backIndex.forEach { id, entry in
                let keys = try BackIndexEntry.decode(entry)
                if keys.isEmpty { problem("back-index entry of \"\(String(decoding: id, as: UTF8.self))\" is empty") }
                for (i, key) in keys.enumerated() {
                    emits += 1
                    let rowKey = RowKey.make(key: key, id: Array(id), index: i)
                    guard let value = try snapshot.rows.get(rowKey) else {
                        problem("row \(i) of \"\(String(decoding: id, as: UTF8.self))\" is in the back-index only")
                        continue
                    }
                    let row = try value.withUnsafeBytes { try RowValue($0) }
                    if row.keyLength != key.count {
                        problem("row \(i) of \"\(String(decoding: id, as: UTF8.self))\" records a wrong key length")
                    } else if sameCollator, try CollationKey(row.key).bytes != key {
                        problem("row \(i) of \"\(String(decoding: id, as: UTF8.self))\": stored key does not match")
                    }
                }
                return true
            }
            if emits != snapshot.rows.rowCount {
                problem("the back-index lists \(emits) rows; the rows tree holds \(snapshot.rows.rowCount)")
            }
            for message in try verifyGroups(snapshot, reducer: reduce.map { ViewReducer(reduce: $0) }) {
                problem(message)
            }
        } catch let error as SofaError {
            problems.append(error)
        } catch {
            problem("\(error)")
        }
        return problems
    }

    /// Every difference between the index and a fresh map of the documents it claims to reflect (empty when
    /// they agree): for each document last changed at or before the index's last sequence, the rows and
    /// back-index entry its winning revision emits now must be exactly the stored ones; every back-index entry
    /// must name a document that exists. Documents changed after the last update are skipped (the index is
    /// merely stale for them). Run after ``verify()`` found the index sound (back-index ⇄ rows), so together
    /// they prove the rows tree holds exactly the fresh map's rows. Problems name the file and the offset of
    /// the commit checked.
    ///
    /// The map must be pure (a declarative view's is). An index whose keys were made by another ICU version is
    /// not compared (its keys would differ until it is re-sorted).
    func verifyRows(against documents: DocumentSnapshot, mapper: Mapper) -> [SofaError] {
        var problems: [SofaError] = []
        do {
            let snapshot = try self.snapshot()
            guard snapshot.header.collatorVersion == CollationKey.collatorVersion else { return [] }
            let offset = Int(clamping: snapshot.commitOffset)
            func problem(_ message: String) {
                problems.append(SofaError(.corruption, message, path: path, offset: offset))
            }
            let last = snapshot.header.lastSequence
            var mapped = MappedChunk()
            try documents.forEachByID { leaf, i in
                let idBytes = leaf.key(i), entry = leaf.value(i)
                let id = Array(idBytes)
                let name = String(decoding: id, as: UTF8.self)
                let record = try DocumentRecord(decoding: entry, path: documents.path)
                guard record.sequence <= last else { return true }
                mapped.removeAll()
                do {
                    try mapper.map(id: idBytes, record: record, snapshot: documents, into: &mapped)
                } catch {
                    problem("document \"\(name)\" no longer maps: \(error)")
                    return true
                }
                let expected = mapped.withDocument(0) { _, back in Array(back) }
                let stored = try snapshot.backIndex.get(id)
                guard expected.isEmpty ? stored == nil : stored == expected else {
                    let emits = expected.isEmpty ? "emits no rows" : "emits \(mapped.rows.count) rows"
                    let has = stored == nil ? "none are indexed" : "the back-index lists other keys"
                    problem("document \"\(name)\" (sequence \(record.sequence)) \(emits) but \(has)")
                    return true
                }
                for i in mapped.rows.indices {
                    try mapped.withRow(i) { key, value in
                        guard let row = try snapshot.rows.get(Array(key)) else {
                            return problem("row \(i) of \"\(name)\" is missing from the rows tree")
                        }
                        if !row.elementsEqual(value) {
                            problem("row \(i) of \"\(name)\" differs from what the map emits (key, value or sequence)")
                        }
                    }
                }
                return true
            }
            try snapshot.backIndex.forEach { id, _ in
                if try documents.record(Array(id)) == nil {
                    problem("the back-index lists \"\(String(decoding: id, as: UTF8.self))\", which is not a document")
                }
                return true
            }
        } catch let error as SofaError {
            problems.append(error)
        } catch {
            problems.append(SofaError(.corruption, "\(error)", path: path))
        }
        return problems
    }

    /// Rebuilds both trees under the current ICU collator from the emitted keys the rows keep: row keys are
    /// ICU sort keys, whose bytes may differ between ICU versions, so an index made under another version
    /// would be out of order. No map function is needed.
    func resort(header: ViewHeader) throws {
        do {
            let current = try snapshot()
            let directory = StorageFile.directoryName(of: path)
            let budget = ViewIndex.sortBudget.load(ordering: .relaxed)
            let rowSorter = ExternalSorter(directory: directory, budget: budget, system: storage.system)
            let backSorter = ExternalSorter(directory: directory, budget: budget, system: storage.system)
            try current.rows.forEach { rowKey, value in
                let row = try RowValue(value)
                let (id, index) = try RowKey.parse(rowKey, keyLength: row.keyLength)
                let key = try CollationKey(row.key).bytes
                try rowSorter.add(key: RowKey.make(key: key, id: id, index: index),
                                  value: RowValue.encode(keyLength: key.count, sequence: row.sequence,
                                                         key: row.key, value: row.value))
                var order: [UInt8] = []
                RowKey.appendID(id, to: &order)
                order.appendBigEndian(UInt64(index))
                try backSorter.add(key: order, value: key)
                return true
            }
            let rows = TreeBuilder(file: storage, configuration: rowsConfiguration)
            try rowSorter.finish { key, value in try rows.add(key: key, value: value) }
            let back = TreeBuilder(file: storage, configuration: backConfiguration)
            var id: [UInt8]?
            var keys: [[UInt8]] = []
            try backSorter.finish { order, key in
                let docID = Array(order[..<(order.count - 8)])  // escaped, with its terminator
                if docID != id, let previous = id {
                    try back.add(key: try RowKey.unescape(previous), value: BackIndexEntry.encode(keys))
                    keys.removeAll()
                }
                id = docID
                keys.append(Array(key))
            }
            if let previous = id {
                try back.add(key: try RowKey.unescape(previous), value: BackIndexEntry.encode(keys))
            }
            var newHeader = header
            newHeader.collatorVersion = CollationKey.collatorVersion
            let newRows = try rows.finish()
            try commit(rows: newRows, backIndex: try back.finish(),
                       groups: try buildGroups(rows: newRows, levels: header.groupLevels), header: newHeader)
        } catch {
            storage.discardUncommitted()
            throw error
        }
    }
}
