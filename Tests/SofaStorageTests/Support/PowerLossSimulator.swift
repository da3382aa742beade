import Foundation
import Synchronization

@testable import SofaStorage

/// System calls that remember what a power loss could still take away (RELIABILITY.md R3).
///
/// Writes go to the real file, and are also logged per file until an `fsync`/`fdatasync` makes them durable.
/// `crashImage` then builds one possible content of the file after a power cut at this moment: the durable
/// bytes plus any subset of the unsynced writes, each torn into independent sectors (512 B or 4 KiB) that
/// survive or not — which also covers any reordering of those writes.
final class PowerLossSimulator: SystemCalls, @unchecked Sendable {
    private enum Operation {
        case write(offset: Int, bytes: [UInt8])
        case truncate(length: Int)
    }

    private struct FileState {
        var durable: [UInt8]
        var unsynced: [Operation] = []
    }

    private struct State {
        var pathOf: [Int32: String] = [:]
        var files: [String: FileState] = [:]
        var syncs = 0
    }

    private let base = PosixSystemCalls()
    private let state = Lock(State())
    /// Called after every write or sync with the simulator itself, to take crash images at that moment.
    /// Set and used from the single test thread that drives the workload.
    var onOperation: ((PowerLossSimulator) -> Void)?
    /// When false, `fsync`/`fdatasync` still run but the power fails before the disk acknowledges them: the
    /// writes stay unsynced, for ``crashImage(of:sector:keep:)`` to choose which of them survive.
    var syncsReachDisk = true
    /// `fsync`/`fdatasync` calls made so far, on any thread.
    var syncCount: Int { state.withLock { $0.syncs } }

    func open(_ path: String, flags: Int32, mode: mode_t) throws(SystemCallFailure) -> Int32 {
        let fd = try base.open(path, flags: flags, mode: mode)
        let existing = (try? Data(contentsOf: URL(fileURLWithPath: path))).map { [UInt8]($0) } ?? []
        state.withLock { s in
            s.pathOf[fd] = path
            if s.files[path] == nil { s.files[path] = FileState(durable: existing) }
        }
        return fd
    }

    func close(_ fd: Int32) throws(SystemCallFailure) {
        state.withLock { _ = $0.pathOf.removeValue(forKey: fd) }
        try base.close(fd)
    }

    func pread(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer,
               at offset: Int64) throws(SystemCallFailure) -> Int {
        try base.pread(fd, buffer, at: offset)
    }

    func pwrite(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, at offset: Int64) throws(SystemCallFailure) -> Int {
        let n = try base.pwrite(fd, buffer, at: offset)
        log(fd, .write(offset: Int(offset), bytes: Array(buffer[0..<n])))
        return n
    }

    func fsync(_ fd: Int32) throws(SystemCallFailure) {
        try base.fsync(fd)
        sync(fd)
    }

    func fdatasync(_ fd: Int32) throws(SystemCallFailure) {
        try base.fdatasync(fd)
        sync(fd)
    }

    func ftruncate(_ fd: Int32, length: Int64) throws(SystemCallFailure) {
        try base.ftruncate(fd, length: length)
        log(fd, .truncate(length: Int(length)))
    }

    func fileSize(_ fd: Int32) throws(SystemCallFailure) -> Int64 { try base.fileSize(fd) }
    func lockExclusive(_ fd: Int32) throws(SystemCallFailure) { try base.lockExclusive(fd) }
    func unlock(_ fd: Int32) { base.unlock(fd) }
    func rename(_ from: String, to: String) throws(SystemCallFailure) { try base.rename(from, to: to) }
    func unlink(_ path: String) throws(SystemCallFailure) { try base.unlink(path) }
    func mkdir(_ path: String, mode: mode_t) throws(SystemCallFailure) { try base.mkdir(path, mode: mode) }
    func contentsOfDirectory(_ path: String) throws(SystemCallFailure) -> [String] {
        try base.contentsOfDirectory(path)
    }
    func mmap(_ fd: Int32, length: Int) throws(SystemCallFailure) -> UnsafeRawPointer {
        try base.mmap(fd, length: length)
    }
    func munmap(_ address: UnsafeRawPointer, length: Int) { base.munmap(address, length: length) }

    private func log(_ fd: Int32, _ op: Operation) {
        state.withLock { s in
            guard let path = s.pathOf[fd] else { return }
            s.files[path]?.unsynced.append(op)
        }
        onOperation?(self)
    }

    private func sync(_ fd: Int32) {
        state.withLock { $0.syncs += 1 }
        guard syncsReachDisk else { return }
        state.withLock { s in
            guard let path = s.pathOf[fd], var file = s.files[path] else { return }
            for op in file.unsynced { Self.apply(op, to: &file.durable) }
            file.unsynced.removeAll()
            s.files[path] = file
        }
        onOperation?(self)
    }

    private static func apply(_ op: Operation, to bytes: inout [UInt8]) {
        switch op {
        case .write(let offset, let data):
            if bytes.count < offset + data.count {
                bytes += [UInt8](repeating: 0, count: offset + data.count - bytes.count)
            }
            bytes.replaceSubrange(offset..<(offset + data.count), with: data)
        case .truncate(let length):
            if length < bytes.count { bytes.removeLast(bytes.count - length) } else {
                bytes += [UInt8](repeating: 0, count: length - bytes.count)
            }
        }
    }

    /// The content of `path` if the power failed now and, of the unsynced writes, exactly the sectors for
    /// which `keep(sectorStart)` is true reached the disk (each write torn on the `sector` grid on its own).
    func crashImage(of path: String, sector: Int, keep: (Int) -> Bool) -> [UInt8] {
        let file = state.withLock { $0.files[path] } ?? FileState(durable: [])
        var image = file.durable
        for op in file.unsynced {
            guard case .write(let offset, let data) = op else {
                Self.apply(op, to: &image)
                continue
            }
            var start = offset
            while start < offset + data.count {
                let end = min(offset + data.count, (start / sector + 1) * sector)
                if keep(start / sector * sector) {
                    Self.apply(.write(offset: start, bytes: Array(data[(start - offset)..<(end - offset)])), to: &image)
                }
                start = end
            }
        }
        return image
    }

    /// One possible content of `path` if the power failed now.
    func crashImage(of path: String, sector: Int, using rng: inout some RandomNumberGenerator) -> [UInt8] {
        let file = state.withLock { $0.files[path] } ?? FileState(durable: [])
        var image = file.durable
        for op in file.unsynced {
            switch op {
            case .truncate:
                if Bool.random(using: &rng) { Self.apply(op, to: &image) }
            case .write(let offset, let data):
                // Sectors of the write, aligned to the device's sector grid, each kept or lost on its own.
                var start = offset
                while start < offset + data.count {
                    let end = min(offset + data.count, (start / sector + 1) * sector)
                    if Int.random(in: 0..<3, using: &rng) > 0 {
                        Self.apply(.write(offset: start, bytes: Array(data[(start - offset)..<(end - offset)])),
                                   to: &image)
                    }
                    start = end
                }
            }
        }
        return image
    }
}
