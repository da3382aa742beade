/// Rewriting a whole file (compaction): the new file is built beside the old one and renamed over it.
extension StorageFile {
    /// Writes a replacement for the file at `path` and renames it into place.
    ///
    /// `temporaryPath` is created (any leftover there is removed first) as a file of `kind` at `formatVersion`,
    /// always with durability ``Durability/full`` — a rename that survives a power loss must never point at
    /// data that did not — and `fill` writes and commits its contents. The file is then closed and renamed over
    /// `path`. On any failure the temporary file is removed and the file at `path` is untouched. The directory
    /// is not synced here: the caller syncs it once the rename is what it wants to keep.
    ///
    /// - Throws: what `fill` throws, and storage errors (`.diskFull`, `.ioError`) naming the file.
    package static func writeReplacement(of path: String, through temporaryPath: String, kind: UInt32,
                                         formatVersion: UInt32, system: any SystemCalls,
                                         fill: (StorageFile) throws -> Void) throws {
        try? system.unlink(temporaryPath)
        var options = StorageOptions(readOnly: false, durability: .full, create: true, fileKind: kind,
                                     nodeCacheBytes: 1 << 20)
        options.formatVersion = formatVersion
        var temporary: StorageFile?
        do {
            let file = try StorageFile(path: temporaryPath, options: options, system: system)
            temporary = file
            try fill(file)
            try file.close()
            temporary = nil
            do {
                try system.rename(temporaryPath, to: path)
            } catch {
                throw StorageFile.error(error, path: temporaryPath)
            }
        } catch {
            try? temporary?.close()
            try? system.unlink(temporaryPath)
            throw error
        }
    }
}
