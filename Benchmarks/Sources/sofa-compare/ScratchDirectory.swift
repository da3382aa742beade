import Glibc

/// The directory the engines' files live in during a run, held exclusively by one `sofa-compare` parent.
///
/// Two runs sharing a directory corrupt each other's figures silently: one run empties and rebuilds an
/// engine's files under the other (seen here: a concurrent run in the same `/tmp/sofa-compare/lmdb` made an
/// LMDB W7 answer come out wrong). So each run takes a fresh `mkdtemp` directory by default, and any
/// directory, given or made, is locked with `flock` by the parent for as long as it runs its children.
final class ScratchDirectory {
    /// The directory's path.
    let path: String
    private let lockFD: Int32
    private let madeHere: Bool

    /// Makes `/tmp/sofa-compare.XXXXXX` when `path` is nil, otherwise uses (and creates) `path`; then locks it.
    /// - Throws: ``CompareError`` if the directory cannot be made or another run holds it.
    init(path requested: String?) throws {
        if let requested {
            guard mkdir(requested, 0o755) == 0 || errno == EEXIST else {
                throw CompareError("cannot create \(requested): \(errnoText())")
            }
            path = requested
            madeHere = false
        } else {
            var template = Array("/tmp/sofa-compare.XXXXXX".utf8CString)
            guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
                throw CompareError("cannot create a scratch directory in /tmp: \(errnoText())")
            }
            path = String(cString: made)
            madeHere = true
        }
        let lockPath = path + "/.sofa-compare.lock"
        lockFD = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard lockFD >= 0 else { throw CompareError("cannot create \(lockPath): \(errnoText())") }
        guard flock(lockFD, LOCK_EX | LOCK_NB) == 0 else {
            close(lockFD)
            throw CompareError("another sofa-compare is using \(path); wait for it or pass a different --db")
        }
    }

    /// The subdirectory for `engine`.
    func directory(for engine: String) -> String {
        path + "/" + engine
    }

    /// Deletes the engines' files (and the directory itself if this run made it), then releases the lock.
    /// Engine directories are flat, so one level of files is all there is.
    func removeContents(engines: [String]) {
        for engine in engines {
            let directory = directory(for: engine)
            if (try? SystemProbe.emptyDirectory(directory)) != nil {
                rmdir(directory)
            }
        }
        if madeHere {
            unlink(path + "/.sofa-compare.lock")
            rmdir(path)
        }
        close(lockFD)
    }
}
