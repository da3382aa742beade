import Glibc

/// Time, memory, file sizes and page-cache residency, read from the kernel.
enum SystemProbe {
    // MARK: - Time

    /// `CLOCK_MONOTONIC` in nanoseconds: unaffected by clock adjustments, ~20 ns to read here.
    @inline(__always)
    static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    // MARK: - Memory

    /// A field of /proc/self/status in kB (e.g. `VmHWM`, the peak resident set), or nil if unreadable.
    static func statusKB(_ field: String) -> Int? {
        // /proc files report st_size 0, so read to end of file rather than by size.
        let fd = open("/proc/self/status", O_RDONLY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { break }
            bytes += chunk[0 ..< n]
        }
        let text = String(decoding: bytes, as: UTF8.self)
        for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
            return Int(line.dropFirst(field.count + 1).filter { $0.isNumber })
        }
        return nil
    }

    /// The 1-minute load average (/proc/loadavg), to print next to figures measured on a shared machine.
    static func loadAverage() -> String {
        var loads = [Double](repeating: 0, count: 3)
        guard getloadavg(&loads, 3) == 3 else { return "?" }
        return NumberFormat.fixed(loads[0], decimals: 2)
    }

    /// Resets `VmHWM` to the current resident set (Linux ≥ 4.0: `echo 5 > /proc/self/clear_refs`), so that
    /// the peak measured afterwards is the engine's, not the data loader's transient buffers.
    /// - Returns: whether the kernel accepted the reset.
    @discardableResult
    static func resetPeakRSS() -> Bool {
        let fd = open("/proc/self/clear_refs", O_WRONLY)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return write(fd, "5", 1) == 1
    }

    // MARK: - Files

    /// Sizes of the files in `paths` that exist: the sum of `st_size` (logical) and of `st_blocks * 512`
    /// (allocated; smaller for sparse files, larger for preallocated ones).
    static func sizes(of paths: [String]) -> (logical: Int, allocated: Int) {
        var logical = 0
        var allocated = 0
        for path in paths {
            var info = stat()
            if stat(path, &info) == 0 {
                logical += Int(info.st_size)
                allocated += Int(info.st_blocks) * 512
            }
        }
        return (logical, allocated)
    }

    /// Asks the kernel to drop the page cache of each file (`posix_fadvise(POSIX_FADV_DONTNEED)`).
    ///
    /// This is the "cold" of W7: the engine's own files are no longer in the OS page cache, while the
    /// program, its libraries and the rest of the system stay warm. Dirty pages cannot be dropped, so each
    /// file is `fdatasync`ed first; pages still mapped by a process stay resident, so it must run after the
    /// engine is closed. The machine is a VM: its virtual disk may still be cached by the host, so "cold"
    /// reads here can be faster than from a physical disk.
    static func evictFromPageCache(_ paths: [String]) {
        for path in paths {
            let fd = open(path, O_RDONLY)
            guard fd >= 0 else { continue }
            fdatasync(fd)
            posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)
            close(fd)
        }
    }

    /// The fraction of the pages of `paths` that are in the page cache, from `mincore` on a fresh read-only
    /// mapping (mapping does not fault pages in), to check that an eviction worked.
    static func residentFraction(_ paths: [String]) -> Double {
        let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))
        var resident = 0
        var total = 0
        for path in paths {
            let fd = open(path, O_RDONLY)
            guard fd >= 0 else { continue }
            defer { close(fd) }
            var info = stat()
            guard fstat(fd, &info) == 0, info.st_size > 0 else { continue }
            let length = Int(info.st_size)
            guard let map = mmap(nil, length, PROT_READ, MAP_SHARED, fd, 0), map != MAP_FAILED else { continue }
            defer { munmap(map, length) }
            let pages = (length + pageSize - 1) / pageSize
            var vector = [UInt8](repeating: 0, count: pages)
            guard mincore(map, length, &vector) == 0 else { continue }
            resident += vector.reduce(0) { $0 + Int($1 & 1) }
            total += pages
        }
        return total == 0 ? 0 : Double(resident) / Double(total)
    }

    /// Creates `directory` if needed and unlinks the regular files in it, so that an engine starts empty.
    /// Engines keep flat directories; anything else in it is left alone and reported.
    static func emptyDirectory(_ directory: String) throws {
        mkdir(directory, 0o755)
        guard let dir = opendir(directory) else {
            throw CompareError("cannot open directory \(directory): \(errnoText())")
        }
        defer { closedir(dir) }
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard name != "." && name != ".." else { continue }
            let path = directory + "/" + name
            var info = stat()
            guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
                throw CompareError("\(path) is not a regular file; empty \(directory) by hand")
            }
            guard unlink(path) == 0 else { throw CompareError("cannot remove \(path): \(errnoText())") }
        }
    }
}
