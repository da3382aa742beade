#if canImport(Glibc)
import Glibc
#endif

/// System calls that fail on command, for the reliability tests (RELIABILITY.md R2, R7, R8).
///
/// Counts every call by kind; a ``Fault`` makes the N-th matching call fail with a chosen `errno`, once or from
/// then on. ``crashAfter(writesAndSyncs:)`` simulates a process that dies after N writes or syncs: every later
/// write-side call fails, so the file holds exactly what was written up to that point.
package final class FaultInjectingSystemCalls: SystemCalls {
    /// The kinds of call a fault can target.
    package enum Call: String, Sendable, CaseIterable {
        case open, close, pread, pwrite, fsync, fdatasync, ftruncate, rename, unlink, mkdir, mmap, lock,
             readDirectory
        /// True for calls that change the disk or make changes durable.
        package var isWriteOrSync: Bool {
            switch self {
            case .pwrite, .fsync, .fdatasync, .ftruncate, .rename, .unlink, .mkdir: true
            default: false
            }
        }
    }

    /// A planned failure.
    package struct Fault: Sendable {
        /// Which calls count; `nil` counts every write or sync.
        package var call: Call?
        /// The 1-based index, among matching calls from the moment the fault is set, of the first to fail.
        package var nth: Int
        /// Keep failing every matching call after the first.
        package var persistent: Bool
        /// The error reported.
        package var errno: Int32
        /// For a failing `pwrite`: how many of its first bytes reach the file before the error, as when a disk
        /// fills up in the middle of a write. Zero writes nothing.
        package var shortWrite: Int

        /// A fault on the `nth` matching call (`call` nil: every write or sync counts), `persistent` or once,
        /// reporting `errno`; a failing `pwrite` first writes `shortWrite` bytes.
        package init(call: Call?, nth: Int, persistent: Bool = false, errno: Int32 = EIO, shortWrite: Int = 0) {
            self.call = call
            self.nth = nth
            self.persistent = persistent
            self.errno = errno
            self.shortWrite = shortWrite
        }
    }

    private struct State {
        var counts: [Call: Int] = [:]
        var fault: Fault?
        var seen = 0
        var fired = 0
        var writebacks = 0
    }

    private let base = PosixSystemCalls()
    private let state = Lock(State())

    package init() {}

    /// Arms `fault`, counting matching calls from now on.
    package func arm(_ fault: Fault?) {
        state.withLock {
            $0.fault = fault
            $0.seen = 0
            $0.fired = 0
        }
    }

    /// Every write or sync after the first `n` from now fails with `EIO`, as if the process had died there.
    package func crashAfter(writesAndSyncs n: Int) {
        arm(Fault(call: nil, nth: n + 1, persistent: true, errno: EIO))
    }

    /// How many calls of `call` were made so far.
    package func count(_ call: Call) -> Int { state.withLock { $0.counts[call, default: 0] } }

    /// How many calls the armed fault has failed.
    package var failuresInjected: Int { state.withLock { $0.fired } }

    /// Counts a call of `call`; returns the armed fault if it fails this call.
    private func fired(_ call: Call) -> Fault? {
        state.withLock { s in
            s.counts[call, default: 0] += 1
            guard let f = s.fault else { return nil }
            let matches = f.call.map { $0 == call } ?? call.isWriteOrSync
            guard matches else { return nil }
            s.seen += 1
            guard s.seen == f.nth || (f.persistent && s.seen > f.nth) else { return nil }
            s.fired += 1
            return f
        }
    }

    private func check(_ call: Call) throws(SystemCallFailure) {
        if let fault = fired(call) { throw SystemCallFailure(call.rawValue, fault.errno) }
    }

    package func open(_ path: String, flags: Int32, mode: mode_t) throws(SystemCallFailure) -> Int32 {
        try check(.open)
        return try base.open(path, flags: flags, mode: mode)
    }

    package func close(_ fd: Int32) throws(SystemCallFailure) {
        // A failed close still releases the descriptor, as on Linux; only the report is injected.
        var injected: SystemCallFailure?
        do throws(SystemCallFailure) { try check(.close) } catch { injected = error }
        try base.close(fd)
        if let injected { throw injected }
    }

    package func pread(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer,
                       at offset: Int64) throws(SystemCallFailure) -> Int {
        try check(.pread)
        return try base.pread(fd, buffer, at: offset)
    }

    package func pwrite(_ fd: Int32, _ buffer: UnsafeRawBufferPointer,
                        at offset: Int64) throws(SystemCallFailure) -> Int {
        if let fault = fired(.pwrite) {
            let part = min(fault.shortWrite, buffer.count)
            if part > 0 { try base.pwriteAll(fd, UnsafeRawBufferPointer(rebasing: buffer[..<part]), at: offset) }
            throw SystemCallFailure(Call.pwrite.rawValue, fault.errno)
        }
        return try base.pwrite(fd, buffer, at: offset)
    }

    package func fsync(_ fd: Int32) throws(SystemCallFailure) {
        try check(.fsync)
        try base.fsync(fd)
    }

    package func fdatasync(_ fd: Int32) throws(SystemCallFailure) {
        try check(.fdatasync)
        try base.fdatasync(fd)
    }

    /// Forwarded as it is: a hint, not a write or a sync, so no fault applies to it; counted in
    /// ``writebacksStarted``.
    package func startWriteback(_ fd: Int32, offset: Int64, length: Int64) {
        state.withLock { $0.writebacks += 1 }
        writebackHook.withLock { $0 }?()
        base.startWriteback(fd, offset: offset, length: length)
    }

    /// Run at the start of every writeback hint, on the thread that gives it: a test holds the hint there to see
    /// what the writer does meanwhile.
    package let writebackHook = Lock<(@Sendable () -> Void)?>(nil)

    /// How many ``startWriteback(_:offset:length:)`` hints were given so far.
    package var writebacksStarted: Int { state.withLock { $0.writebacks } }

    package func ftruncate(_ fd: Int32, length: Int64) throws(SystemCallFailure) {
        try check(.ftruncate)
        try base.ftruncate(fd, length: length)
    }

    package func fileSize(_ fd: Int32) throws(SystemCallFailure) -> Int64 { try base.fileSize(fd) }

    package func lockExclusive(_ fd: Int32) throws(SystemCallFailure) {
        try check(.lock)
        try base.lockExclusive(fd)
    }

    package func unlock(_ fd: Int32) { base.unlock(fd) }

    package func rename(_ from: String, to: String) throws(SystemCallFailure) {
        try check(.rename)
        try base.rename(from, to: to)
    }

    package func unlink(_ path: String) throws(SystemCallFailure) {
        try check(.unlink)
        try base.unlink(path)
    }

    package func mkdir(_ path: String, mode: mode_t) throws(SystemCallFailure) {
        try check(.mkdir)
        try base.mkdir(path, mode: mode)
    }

    package func contentsOfDirectory(_ path: String) throws(SystemCallFailure) -> [String] {
        try check(.readDirectory)
        return try base.contentsOfDirectory(path)
    }

    package func mmap(_ fd: Int32, length: Int) throws(SystemCallFailure) -> UnsafeRawPointer {
        try check(.mmap)
        return try base.mmap(fd, length: length)
    }

    package func munmap(_ address: UnsafeRawPointer, length: Int) { base.munmap(address, length: length) }
}
