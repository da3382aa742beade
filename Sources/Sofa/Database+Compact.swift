#if canImport(Glibc)
import Glibc
#endif
import SofaStorage

/// What a compaction did, for ``Database/compact()`` callers and `sofa compact`.
public struct CompactionResult: Sendable, Equatable {
    /// The file that was rewritten (`NAME.sofa/docs`).
    public let path: String
    /// Bytes of the file before, up to the end of its newest commit (a zero tail after it is not counted).
    public let sizeBefore: UInt64
    /// Bytes of the file after, up to the end of its newest commit (a zero tail after it is not counted).
    public let sizeAfter: UInt64
    /// By-ID entries copied (live documents and tombstones).
    public let documents: UInt64
    /// The last sequence, unchanged by compaction.
    public let lastSequence: UInt64
    /// The view index files compacted after the document file (``View/compact()``), by view name.
    public internal(set) var views: [ViewCompactionResult] = []
}

extension Database {
    /// The suffix of the temporary file a compaction writes next to the file it rewrites (`docs.compact`).
    public static let compactionSuffix = ".compact"

    /// Rewrites the document file, then every view's index file, with only the data reachable from their newest
    /// commits, swapping each in atomically.
    ///
    /// The live documents are bulk-loaded (``TreeBuilder``) into `docs.compact` in the same directory, which is
    /// synced (whatever ``DatabaseOptions/durability`` says: the rename must never expose unsynced data), renamed
    /// over `docs`, and the directory synced. Readers keep reading the snapshots they hold — their mapping of the
    /// old file stays valid after the rename — and every later read and write uses the new file. Writers wait
    /// until compaction ends (it holds the write lock), so no write can be lost between the copy and the swap.
    ///
    /// A compaction interrupted before the rename leaves `docs` untouched; the next writable open removes the
    /// temporary file. After the rename the new file is complete and durable.
    ///
    /// Each view with an index file is then compacted the same way (``View/compact()``), except one whose stored
    /// reductions come from a custom reduce not registered in this process (they could not be recomputed): it
    /// is left as it is and missing from ``CompactionResult/views``.
    ///
    /// ```swift
    /// let result = try db.compact()
    /// print(result.sizeBefore, "→", result.sizeAfter)
    /// ```
    ///
    /// - Returns: sizes before and after and documents copied; the same for each view compacted.
    /// - Throws: ``SofaError`` — `.readOnly`; `.invalidArgument` inside ``inBatch(_:)`` or when closed;
    ///   `.corruption` when the data to copy does not read (the original is untouched then); storage errors
    ///   (`.diskFull`, `.ioError`: the temporary file is removed and the original is kept). An error from a
    ///   view's compaction comes after the document file (and the views before it) were compacted and swapped
    ///   in: those stay compacted, that view and the ones after it keep their files as they were.
    @discardableResult
    public func compact() throws -> CompactionResult {
        if options.readOnly { throw SofaError(.readOnly, "the database was opened read-only", path: path) }
        if isWriterThread { throw SofaError(.invalidArgument, "compact() inside inBatch; compact after the batch") }
        var result = try writeLock.withLock { isClosed in
            if isClosed { throw SofaError(.invalidArgument, "the database is closed", path: path) }
            return try documents.compact(system: system, cacheBytes: options.nodeCacheBytes,
                                         durability: options.durability)
        }
        for name in try viewNames {
            guard let view = existingView(named: name), access(view.indexPath, F_OK) == 0 else { continue }
            if let compacted = try view.compactIfReducible() { result.views.append(compacted) }
        }
        return result
    }

    /// Removes temporary files of an interrupted compaction (called on a writable open, under the write lock).
    static func removeCompactionLeftovers(in directory: String, system: any SystemCalls) {
        try? system.unlink(directory + "/docs" + compactionSuffix)
        // A crash while the temporary file itself was being created leaves its `.creating` stage behind
        // (StorageFile creates files under that name and renames them into place).
        try? system.unlink(directory + "/docs" + compactionSuffix + StorageFile.creatingSuffix)
        try? system.unlink(directory + "/docs" + StorageFile.creatingSuffix)
        removeViewLeftovers(in: directory, system: system)
    }
}

extension DocumentFile {
    /// Copies the newest commit into `PATH.compact`, syncs it, renames it over `PATH`, and switches to it.
    /// Must be called under the database's write lock with no batch in progress.
    func compact(system: any SystemCalls, cacheBytes: Int, durability: Durability) throws -> CompactionResult {
        precondition(batch == nil, "compact during a batch")
        let snapshot = try committedSnapshot()
        let oldFile = snapshot.storage
        let finalPath = oldFile.path
        let tempPath = finalPath + Database.compactionSuffix
        // The copy keeps the file's format version, so builds that read only version 1 still open it (§12).
        try StorageFile.writeReplacement(of: finalPath, through: tempPath, kind: DocumentFile.fileKind,
                                         formatVersion: oldFile.formatVersion, system: system) { file in
            try copy(snapshot, into: file)
        }
        // From here `docs` is the new, complete, synced file; the old one lives on only for open snapshots.
        var syncError: SofaError?
        do {
            try system.fsyncDirectory(StorageFile.directoryName(of: finalPath))
        } catch {
            syncError = StorageFile.error(error, path: finalPath)
        }
        let options = DocumentFile.storageOptions(StorageOptions(readOnly: false, durability: durability,
                                                                 create: false, nodeCacheBytes: cacheBytes))
        let newFile: StorageFile
        do {
            newFile = try StorageFile(path: finalPath, options: options, system: system)
        } catch {
            // The old file is no longer at `finalPath`: writing on would go to an unlinked file and be lost, so
            // close it and make every later call fail until the database is reopened.
            try? oldFile.close()
            throw SofaError(.writesRefused, "compaction replaced the file but could not reopen it (\(error)); " +
                            "reopen the database", path: finalPath)
        }
        replaceStorage(with: newFile)
        if let syncError { throw syncError }
        return CompactionResult(path: finalPath, sizeBefore: oldFile.latestCommit.endOffset,
                                sizeAfter: newFile.latestCommit.endOffset, documents: snapshot.documentRows,
                                lastSequence: snapshot.lastSequence)
    }

    /// Bulk-loads both trees of `snapshot` into `file` and commits them: by-ID entries in key order with their
    /// body chunks copied alongside, then by-sequence entries as they are.
    private func copy(_ snapshot: DocumentSnapshot, into file: StorageFile) throws {
        let byID = TreeBuilder(file: file, configuration: byIDConfiguration)
        // Through the pending changes: the new file's trees hold everything, and it has no log.
        try snapshot.forEachByID { leaf, i in
            let key = leaf.key(i), value = leaf.value(i)
            let record = try DocumentRecord(decoding: value, path: path)
            let hasChunks = record.tree.revisions.contains {
                if case .chunk = $0.body { return true } else { return false }
            }
            guard hasChunks else {
                try byID.add(key: key, value: value)  // inline bodies move with their entry byte for byte
                return true
            }
            var revisions = record.tree.revisions
            for r in revisions.indices {
                guard case .chunk(let offset) = revisions[r].body else { continue }
                let body = try snapshot.storage.readChunk(at: offset, kind: .value, limit: snapshot.byID.limit)
                let copied = try body.withUnsafeBytes { try file.append(kind: .value, payload: $0, compress: true) }
                revisions[r].body = .chunk(offset: copied.offset)
            }
            let moved = DocumentRecord(sequence: record.sequence, tree: RevisionTree(revisions: revisions))
            try byID.add(key: Array(key), value: moved.encoded())
            return true
        }
        let bySequence = TreeBuilder(file: file, configuration: bySequenceConfiguration)
        try snapshot.forEachBySequence { sequence, id in
            try DocumentFile.sequenceKey(sequence).withUnsafeBytes { try bySequence.add(key: $0, value: id) }
            return true
        }
        try file.commit(roots: [try byID.finish().root, try bySequence.finish().root],
                        metadata: DocumentFile.encodeMetadata(lastSequence: snapshot.lastSequence))
    }
}
