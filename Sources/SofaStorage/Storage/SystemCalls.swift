import CSofaSys
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A failed system call: which call, and the `errno` it set.
package struct SystemCallFailure: Error, Sendable, CustomStringConvertible {
    package let call: String
    package let errno: Int32

    package init(_ call: String, _ errno: Int32) {
        self.call = call
        self.errno = errno
    }

    package var description: String { "\(call): \(String(cString: strerror(errno))) (errno \(errno))" }
}

/// The one seam every file-system call of the storage layer goes through.
///
/// Production code uses ``PosixSystemCalls``; tests substitute ``FaultInjectingSystemCalls`` to make the N-th
/// `pwrite`, `fsync` or `rename` fail, once or for good (RELIABILITY.md R2, R7, R8). Memory reads of a mapping
/// are not calls and do not pass through here.
package protocol SystemCalls: Sendable {
    func open(_ path: String, flags: Int32, mode: mode_t) throws(SystemCallFailure) -> Int32
    func close(_ fd: Int32) throws(SystemCallFailure)
    func pread(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(SystemCallFailure) -> Int
    func pwrite(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, at offset: Int64) throws(SystemCallFailure) -> Int
    func fsync(_ fd: Int32) throws(SystemCallFailure)
    func fdatasync(_ fd: Int32) throws(SystemCallFailure)
    /// Starts writing back bytes [offset, offset + length) without waiting for the writeback to complete (the
    /// call itself may block on a congested disk queue): a hint that shortens the next `fdatasync`, never a
    /// durability guarantee (implementations that model durability ignore it).
    func startWriteback(_ fd: Int32, offset: Int64, length: Int64)
    func ftruncate(_ fd: Int32, length: Int64) throws(SystemCallFailure)
    func fileSize(_ fd: Int32) throws(SystemCallFailure) -> Int64
    func lockExclusive(_ fd: Int32) throws(SystemCallFailure)
    /// Releases the lock. Needed before `close`: a live mapping keeps the open file, and with it a `flock`.
    func unlock(_ fd: Int32)
    func rename(_ from: String, to: String) throws(SystemCallFailure)
    func unlink(_ path: String) throws(SystemCallFailure)
    func mkdir(_ path: String, mode: mode_t) throws(SystemCallFailure)
    /// The names in directory `path`, in no particular order, without `.` and `..`.
    func contentsOfDirectory(_ path: String) throws(SystemCallFailure) -> [String]
    func mmap(_ fd: Int32, length: Int) throws(SystemCallFailure) -> UnsafeRawPointer
    func munmap(_ address: UnsafeRawPointer, length: Int)
}

extension SystemCalls {
    /// Does nothing: the default for implementations without a writeback to start.
    package func startWriteback(_ fd: Int32, offset: Int64, length: Int64) {}

    /// Writes all of `buffer` at `offset`, continuing after short writes.
    package func pwriteAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, at offset: Int64) throws(SystemCallFailure) {
        var done = 0
        while done < buffer.count {
            let rest = UnsafeRawBufferPointer(rebasing: buffer[done...])
            let n = try pwrite(fd, rest, at: offset + Int64(done))
            if n == 0 { throw SystemCallFailure("pwrite", EIO) }
            done += n
        }
    }

    /// Reads exactly `buffer.count` bytes at `offset`; a short file is `EIO`.
    package func preadAll(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer,
                          at offset: Int64) throws(SystemCallFailure) {
        var done = 0
        while done < buffer.count {
            let n = try pread(fd, UnsafeMutableRawBufferPointer(rebasing: buffer[done...]), at: offset + Int64(done))
            if n == 0 { throw SystemCallFailure("pread", EIO) }
            done += n
        }
    }

    /// Makes a directory entry durable: `fsync` on the directory itself (needed after creating or renaming a
    /// file in it, or the new name can vanish in a power loss).
    package func fsyncDirectory(_ path: String) throws(SystemCallFailure) {
        let fd = try open(path, flags: O_RDONLY | O_DIRECTORY, mode: 0)
        defer { try? close(fd) }
        try fsync(fd)
    }
}

/// The real calls, retrying on `EINTR`.
package struct PosixSystemCalls: SystemCalls {
    package init() {}

    package func open(_ path: String, flags: Int32, mode: mode_t) throws(SystemCallFailure) -> Int32 {
        while true {
            let fd = Glibc.open(path, flags | O_CLOEXEC, mode)
            if fd >= 0 { return fd }
            if errno != EINTR { throw SystemCallFailure("open", errno) }
        }
    }

    package func close(_ fd: Int32) throws(SystemCallFailure) {
        // Never retry close: on Linux the descriptor is released even when EINTR is reported.
        if Glibc.close(fd) != 0 && errno != EINTR { throw SystemCallFailure("close", errno) }
    }

    package func pread(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer,
                       at offset: Int64) throws(SystemCallFailure) -> Int {
        while true {
            let n = Glibc.pread(fd, buffer.baseAddress, buffer.count, off_t(offset))
            if n >= 0 { return n }
            if errno != EINTR { throw SystemCallFailure("pread", errno) }
        }
    }

    package func pwrite(_ fd: Int32, _ buffer: UnsafeRawBufferPointer,
                        at offset: Int64) throws(SystemCallFailure) -> Int {
        while true {
            let n = Glibc.pwrite(fd, buffer.baseAddress, buffer.count, off_t(offset))
            if n >= 0 { return n }
            if errno != EINTR { throw SystemCallFailure("pwrite", errno) }
        }
    }

    package func fsync(_ fd: Int32) throws(SystemCallFailure) {
        if Glibc.fsync(fd) != 0 { throw SystemCallFailure("fsync", errno) }
    }

    package func fdatasync(_ fd: Int32) throws(SystemCallFailure) {
        if Glibc.fdatasync(fd) != 0 { throw SystemCallFailure("fdatasync", errno) }
    }

    /// `sync_file_range(SYNC_FILE_RANGE_WRITE)`; a failure is ignored (the commit's `fdatasync` reports errors).
    package func startWriteback(_ fd: Int32, offset: Int64, length: Int64) {
        _ = sofa_start_writeback(fd, offset, length)
    }

    package func ftruncate(_ fd: Int32, length: Int64) throws(SystemCallFailure) {
        while Glibc.ftruncate(fd, off_t(length)) != 0 {
            if errno != EINTR { throw SystemCallFailure("ftruncate", errno) }
        }
    }

    package func fileSize(_ fd: Int32) throws(SystemCallFailure) -> Int64 {
        var st = stat()
        if fstat(fd, &st) != 0 { throw SystemCallFailure("fstat", errno) }
        return Int64(st.st_size)
    }

    package func lockExclusive(_ fd: Int32) throws(SystemCallFailure) {
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            if errno != EINTR { throw SystemCallFailure("flock", errno) }
        }
    }

    package func unlock(_ fd: Int32) { _ = flock(fd, LOCK_UN) }

    package func rename(_ from: String, to: String) throws(SystemCallFailure) {
        if Glibc.rename(from, to) != 0 { throw SystemCallFailure("rename", errno) }
    }

    package func unlink(_ path: String) throws(SystemCallFailure) {
        if Glibc.unlink(path) != 0 { throw SystemCallFailure("unlink", errno) }
    }

    package func mkdir(_ path: String, mode: mode_t) throws(SystemCallFailure) {
        if Glibc.mkdir(path, mode) != 0 { throw SystemCallFailure("mkdir", errno) }
    }

    package func contentsOfDirectory(_ path: String) throws(SystemCallFailure) -> [String] {
        guard let dir = opendir(path) else { throw SystemCallFailure("opendir", errno) }
        defer { closedir(dir) }
        var names: [String] = []
        while true {
            errno = 0  // readdir returns nil both at the end and on an error; only an error sets errno
            guard let entry = readdir(dir) else { break }
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        if errno != 0 { throw SystemCallFailure("readdir", errno) }
        return names
    }

    package func mmap(_ fd: Int32, length: Int) throws(SystemCallFailure) -> UnsafeRawPointer {
        let p = Glibc.mmap(nil, length, PROT_READ, MAP_SHARED, fd, 0)
        guard let p, p != MAP_FAILED else { throw SystemCallFailure("mmap", errno) }
        return UnsafeRawPointer(p)
    }

    package func munmap(_ address: UnsafeRawPointer, length: Int) {
        _ = Glibc.munmap(UnsafeMutableRawPointer(mutating: address), length)
    }
}
