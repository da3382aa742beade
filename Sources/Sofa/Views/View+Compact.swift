#if canImport(Glibc)
import Glibc
#endif
import SofaStorage

/// What compacting one view's index file did, for ``View/compact()`` callers and `sofa compact --view`.
public struct ViewCompactionResult: Sendable, Equatable {
    /// The view's name.
    public let view: String
    /// The file that was rewritten (`NAME.sofa/views/VIEWNAME`).
    public let path: String
    /// Bytes of the file before.
    public let sizeBefore: UInt64
    /// Bytes of the file after.
    public let sizeAfter: UInt64
    /// Rows copied.
    public let rows: UInt64
    /// The database sequence the index reflects, unchanged by compaction.
    public let lastSequenceIndexed: UInt64
}

extension View {
    /// The temporary file a compaction of this view writes: `views/.VIEWNAME.compact` (the leading dot keeps it
    /// out of ``Database/viewNames``).
    var compactionPath: String { database.path + "/views/." + name + Database.compactionSuffix }

    /// Rewrites the view's index file with only the rows, back-index entries and group aggregates of its newest
    /// commit, then swaps it in — the view counterpart of ``Database/compact()``.
    ///
    /// The three trees are bulk-loaded (``TreeBuilder``) in key order into `views/.VIEWNAME.compact`, which is synced
    /// whatever ``DatabaseOptions/durability`` says, renamed over the index file, and the directory synced.
    /// Queries running meanwhile keep reading the snapshot they hold; index updates wait until the compaction
    /// ends. An interrupted compaction leaves the index file untouched; the next writable open of the database
    /// removes the temporary file.
    ///
    /// ```swift
    /// let result = try db.view(named: "byDate").compact()
    /// print(result.sizeBefore, "→", result.sizeAfter)
    /// ```
    ///
    /// - Returns: sizes before and after, rows copied.
    /// - Throws: ``SofaError`` — `.readOnly`; `.notFound` when the view has no index file;
    ///   `.invalidArgument` when the index holds reductions of a custom reduce that is not registered in this
    ///   process (they could not be recomputed) or the database is closed; `.corruption` when the rows do not
    ///   read (the original is untouched then); storage errors (the temporary file is removed, the original
    ///   kept).
    @discardableResult
    public func compact() throws -> ViewCompactionResult {
        guard let result = try compactIfReducible() else {
            throw SofaError(.invalidArgument, "view \"\(name)\" stores reductions of a custom reduce; register it " +
                            "(setMapReduce) in this process to compact the view", path: indexPath)
        }
        return result
    }

    /// ``compact()``, or nil without touching anything when the index's custom reduce is not registered.
    func compactIfReducible() throws -> ViewCompactionResult? {
        try database.checkOpen()
        if database.options.readOnly {
            throw SofaError(.readOnly, "the database was opened read-only", path: database.path)
        }
        if access(indexPath, F_OK) != 0 {
            throw SofaError(.notFound, "view \"\(name)\" has no index file", path: indexPath)
        }
        return try shared.updateLock.withLock { _ -> ViewCompactionResult? in
            guard let index = try openChecked() else {
                throw SofaError(.notFound, "view \"\(name)\" has no index file", path: indexPath)
            }
            let snapshot = try index.snapshot()
            if snapshot.header.reduceKind != 0 && index.reduce == nil { return nil }
            let commit = index.storage.latestCommit
            try copy(snapshot, configuration: index)
            // From here the index file is the new, complete, synced one; the old one lives on for open snapshots.
            var syncError: SofaError?
            do {
                try database.system.fsyncDirectory(StorageFile.directoryName(of: indexPath))
            } catch {
                syncError = StorageFile.error(error, path: indexPath)
            }
            let reopened: ViewIndex
            do {
                reopened = try ViewIndex(path: indexPath, options: index.storage.options, reduce: index.reduce,
                                         system: database.system)
            } catch {
                // The next use opens the file again; nothing is written to the replaced one.
                shared.state.withLock { s in
                    s.index = nil
                    s.checked = false
                }
                throw error
            }
            shared.state.withLock { $0.index = reopened }
            if let syncError { throw syncError }
            return ViewCompactionResult(view: name, path: indexPath, sizeBefore: commit.endOffset,
                                        sizeAfter: reopened.storage.latestCommit.endOffset,
                                        rows: snapshot.rows.rowCount, lastSequenceIndexed: snapshot.header.lastSequence)
        }
    }

    /// Bulk-loads the three trees of `snapshot` (rows, back-index, group aggregates) into the temporary file,
    /// commits them with the snapshot's header (re-encoded: a version 1 header comes out as the current
    /// version with no group level), syncs and closes it, and renames it over the index file. On any failure
    /// the temporary file is removed and the index file is as it was.
    private func copy(_ snapshot: ViewSnapshot, configuration index: ViewIndex) throws {
        // The copy keeps the file's storage format version (FORMAT.md §12).
        try StorageFile.writeReplacement(of: indexPath, through: compactionPath, kind: ViewIndex.fileKind,
                                         formatVersion: index.storage.formatVersion, system: database.system) { file in
            let rows = TreeBuilder(file: file, configuration: index.rowsConfiguration)
            try snapshot.rows.forEach { key, value in
                try rows.add(key: key, value: value)
                return true
            }
            let back = TreeBuilder(file: file, configuration: index.backConfiguration)
            try snapshot.backIndex.forEach { key, value in
                try back.add(key: key, value: value)
                return true
            }
            let groups = TreeBuilder(file: file, configuration: index.groupsConfiguration)
            try snapshot.groups.forEach { key, value in
                try groups.add(key: key, value: value)
                return true
            }
            try file.commit(roots: [try rows.finish().root, try back.finish().root, try groups.finish().root],
                            metadata: snapshot.header.encoded())
        }
    }
}

extension Database {
    /// Removes what interrupted work left in `views/`: `.VIEWNAME.compact` files and their `.creating` stage
    /// (view compactions), and sort-run files whose unlink never happened (``ExternalSorter/runFilePrefix``).
    /// Called on a writable open, under the write lock, before this process builds anything; best effort.
    static func removeViewLeftovers(in directory: String, system: any SystemCalls) {
        guard let names = try? system.contentsOfDirectory(directory + "/views") else { return }
        for name in names where name.hasPrefix(".") {
            let compaction = name.hasSuffix(compactionSuffix)
                || name.hasSuffix(compactionSuffix + StorageFile.creatingSuffix)
            guard compaction || name.hasPrefix(ExternalSorter.runFilePrefix) else { continue }
            try? system.unlink(directory + "/views/" + name)
        }
    }
}
