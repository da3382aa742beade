#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import SofaStorage

/// Sorts key/value pairs of any total size in bounded memory: pairs collect in an arena; a full arena is
/// sorted and written out as a run to an unlinked temporary file; ``finish(_:)`` merges the runs (or, when
/// nothing spilled, streams the sorted arena). First index builds feed it unordered rows and bulk-load the
/// ordered stream, so a 10M-row build holds one arena, not every row.
///
/// Every file call goes through `system`, so the reliability tests can fail a run's creation, write or read.
///
/// Keys must be distinct (row keys are).
final class ExternalSorter {
    private let directory: String
    private let budget: Int
    private let system: any SystemCalls
    private var arena: [UInt8] = []
    /// Per pair: start of its key in the arena, key length, value length (the value follows the key).
    typealias Entry = (start: Int, keyLength: Int32, valueLength: Int32)
    private var entries: [Entry] = []
    private var runs: [SortRun] = []
    /// The run being sorted and written in the background.
    private var inFlight: SpillJob?
    private static let queue = DispatchQueue(label: "sofa.sort-runs", attributes: .concurrent)

    /// A sorter spilling runs into `directory` once `budget` bytes of pairs are held, through `system` (pass
    /// the owning file's, so that fault injection reaches the runs too).
    init(directory: String, budget: Int = 64 << 20, system: any SystemCalls) {
        self.directory = directory
        self.budget = budget
        self.system = system
    }

    deinit {
        if let job = inFlight {
            job.group.wait()
            if case .success(let run) = job.result { try? system.close(run.fd) }
        }
        for run in runs { try? system.close(run.fd) }
    }

    /// Pairs added so far and not yet spilled.
    var count: Int { entries.count }

    /// Adds a pair.
    func add(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) throws {
        entries.append((arena.count, Int32(key.count), Int32(value.count)))
        arena.append(contentsOf: key)
        arena.append(contentsOf: value)
        if arena.count + entries.count * 16 >= budget { try spill() }
    }

    /// Adds every row of `chunk`, in its order (one pass over its arena).
    func add(rowsOf chunk: MappedChunk) throws {
        try chunk.arena.withUnsafeBytes { a in
            for row in chunk.rows {
                let v = row.start + row.keyLength
                try add(key: UnsafeRawBufferPointer(rebasing: a[row.start..<v]),
                        value: UnsafeRawBufferPointer(rebasing: a[v..<(v + row.valueLength)]))
            }
        }
    }

    /// Adds a pair from arrays.
    func add(key: [UInt8], value: [UInt8]) throws {
        try key.withUnsafeBytes { k in try value.withUnsafeBytes { v in try add(key: k, value: v) } }
    }

    private static func sort(_ entries: inout [Entry], in arena: [UInt8]) {
        entries.withUnsafeMutableBufferPointer { sort($0, in: arena) }
    }

    private static func sort(_ entries: UnsafeMutableBufferPointer<Entry>, in arena: [UInt8]) {
        var entries = entries
        arena.withUnsafeBytes { a in
            entries.sort { x, y in
                compareBytes(UnsafeRawBufferPointer(rebasing: a[x.start..<(x.start + Int(x.keyLength))]),
                             UnsafeRawBufferPointer(rebasing: a[y.start..<(y.start + Int(y.keyLength))])) < 0
            }
        }
    }

    /// Pairs in memory at the end below which ``finish(_:)`` sorts them on one thread.
    static let parallelSortMinimum = 16_384

    /// Sorts the pairs still in memory at the end of the input, in up to one part per core at once, and returns
    /// the parts: each sorted, together in `entries`. The sort is on the single-threaded tail of a build, where
    /// the core that will bulk-load the rows is otherwise idle.
    private func sortInParts() -> [Range<Int>] {
        let cores = min(4, DispatchQueue.onlineCoreCount)
        let count = entries.count
        let partCount = count < ExternalSorter.parallelSortMinimum ? 1 : cores
        let parts = (0..<partCount).map { p in (count * p / partCount)..<(count * (p + 1) / partCount) }
        let arena = self.arena
        entries.withUnsafeMutableBufferPointer { all in
            let all = UnsafeSendableBuffer(all)
            // Each part sorts only its own range of `entries`.
            DispatchQueue.concurrentPerform(iterations: parts.count) { p in
                ExternalSorter.sort(UnsafeMutableBufferPointer(rebasing: all.buffer[parts[p]]), in: arena)
            }
        }
        return parts
    }

    /// Hands the full arena to a background thread that sorts it and writes it out as a run, so the caller
    /// keeps adding pairs meanwhile (one run in flight at a time: at most two arenas in memory).
    private func spill() throws {
        guard !entries.isEmpty else { return }
        try waitForSpill()
        let job = SpillJob()
        let (arena, entries, directory, system) = (self.arena, self.entries, self.directory, self.system)
        self.arena = []
        self.entries = []
        self.arena.reserveCapacity(arena.count)
        self.entries.reserveCapacity(entries.count)
        inFlight = job
        ExternalSorter.queue.async(group: job.group) {
            job.result = Result { try ExternalSorter.writeRun(arena, entries, directory: directory, system: system) }
        }
    }

    /// Waits for the run being written and keeps it.
    private func waitForSpill() throws {
        guard let job = inFlight else { return }
        inFlight = nil
        job.group.wait()
        runs.append(try job.result.get())
    }

    /// Sorts pairs and writes them to a new unlinked temporary file.
    private static func writeRun(_ arena: [UInt8], _ entries: [Entry], directory: String,
                                 system: any SystemCalls) throws -> SortRun {
        var entries = entries
        sort(&entries, in: arena)
        let fd = try createRunFile(in: directory, system: system)
        var size: Int64 = 0
        do {
            var out: [UInt8] = []
            out.reserveCapacity(1 << 20)
            func flush() throws {
                do {
                    try out.withUnsafeBytes { try system.pwriteAll(fd, $0, at: size) }
                } catch let failure as SystemCallFailure {
                    throw runError(failure, "write a sort run", path: directory)
                }
                size += Int64(out.count)
                out.removeAll(keepingCapacity: true)
            }
            try arena.withUnsafeBytes { a in
                for e in entries {
                    out.appendVarint(UInt64(e.keyLength))
                    out.appendVarint(UInt64(e.valueLength))
                    out.append(contentsOf: a[e.start..<(e.start + Int(e.keyLength) + Int(e.valueLength))])
                    if out.count >= 1 << 20 { try flush() }
                }
            }
            try flush()
        } catch {
            try? system.close(fd)
            throw error
        }
        return SortRun(fd: fd, size: size)
    }

    /// The name prefix of a run file: `.sort-` and a random base-36 number. A name with it left in `views/` (the
    /// process died between creating and unlinking the run, or the unlink failed) is removed on the next
    /// writable open.
    static let runFilePrefix = ".sort-"

    /// Creates a temporary file in `directory` and unlinks it at once: a run lives only as long as its
    /// descriptor, even if the process dies.
    private static func createRunFile(in directory: String, system: any SystemCalls) throws -> Int32 {
        var attempt = 0
        while true {
            attempt += 1
            let path = directory + "/" + runFilePrefix + String(UInt64.random(in: 0...UInt64.max), radix: 36)
            let fd: Int32
            do throws(SystemCallFailure) {
                fd = try system.open(path, flags: O_RDWR | O_CREAT | O_EXCL, mode: 0o600)
            } catch {
                if error.errno == EEXIST && attempt < 8 { continue }  // a name taken by chance: draw another
                throw runError(error, "create a sort run", path: directory)
            }
            do throws(SystemCallFailure) {
                try system.unlink(path)
            } catch {
                try? system.close(fd)
                throw runError(error, "unlink a new sort run", path: path)
            }
            return fd
        }
    }

    /// The error for a failed call on a run: `.diskFull` for `ENOSPC`, else `.ioError` naming the call.
    fileprivate static func runError(_ failure: SystemCallFailure, _ what: String, path: String) -> SofaError {
        if failure.errno == ENOSPC {
            return SofaError(.diskFull, "disk full while sorting index rows; free space and retry", path: path)
        }
        return SofaError(.ioError, "cannot \(what): \(failure)", path: path)
    }

    /// Calls `body` with every pair in ascending key order, then empties the sorter.
    func finish(_ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Void) throws {
        try waitForSpill()
        // The pairs still in memory are sorted and merged from memory: writing them out as one more run only to
        // read them back would cost a round trip through the file system on the single-threaded tail of a build.
        var parts = sortInParts()
        let (memory, sorted) = (arena, entries)
        arena = []
        entries = []
        var readers = runs.map { RunReader(run: $0, system: system, directory: directory) }
        for i in readers.indices { try readers[i].advance() }
        try memory.withUnsafeBytes { a in
            func key(_ e: Entry) -> UnsafeRawBufferPointer {
                UnsafeRawBufferPointer(rebasing: a[e.start..<(e.start + Int(e.keyLength))])
            }
            while true {
                var best = -1
                for i in readers.indices where readers[i].hasPair {
                    if best < 0 || compareArrays(readers[i].key, readers[best].key) < 0 { best = i }
                }
                // The smallest next pair of the in-memory parts (parts are few: a linear scan).
                var bestPart = -1
                for p in parts.indices where !parts[p].isEmpty {
                    if bestPart < 0 || compareBytes(key(sorted[parts[p].lowerBound]),
                                                    key(sorted[parts[bestPart].lowerBound])) < 0 { bestPart = p }
                }
                if bestPart >= 0 {
                    let e = sorted[parts[bestPart].lowerBound]
                    let k = key(e)
                    if best < 0 || readers[best].key.withUnsafeBytes({ compareBytes(k, $0) }) < 0 {
                        let v = e.start + Int(e.keyLength)
                        try body(k, UnsafeRawBufferPointer(rebasing: a[v..<(v + Int(e.valueLength))]))
                        parts[bestPart] = (parts[bestPart].lowerBound + 1)..<parts[bestPart].upperBound
                        continue
                    }
                }
                guard best >= 0 else { break }
                try readers[best].key.withUnsafeBytes { k in
                    try readers[best].value.withUnsafeBytes { v in try body(k, v) }
                }
                try readers[best].advance()
            }
        }
        for run in runs { try? system.close(run.fd) }
        runs = []
    }
}

/// A run on disk: an unlinked file of `size` bytes of (key length, value length, key, value) in key order.
private struct SortRun {
    let fd: Int32
    let size: Int64
}

/// A run being sorted and written on a background thread.
private final class SpillJob: @unchecked Sendable {
    let group = DispatchGroup()
    var result: Result<SortRun, any Error> = .failure(SofaError(.ioError, "sort run not written"))
}

/// Reads one run's pairs back from its start, through a buffer.
private struct RunReader {
    let run: SortRun
    let system: any SystemCalls
    /// Where errors say the run was (the run itself has no name: it is unlinked).
    let directory: String
    var buffer = [UInt8](repeating: 0, count: 1 << 18)
    /// The run's offset of the byte after `buffer[..<filled]`.
    var offset: Int64 = 0
    var position = 0
    var filled = 0
    var key: [UInt8] = []
    var value: [UInt8] = []
    var hasPair = false

    init(run: SortRun, system: any SystemCalls, directory: String) {
        self.run = run
        self.system = system
        self.directory = directory
    }

    /// Refills the buffer with the run's next bytes; `filled` is 0 at the end of the run.
    mutating func fill() throws {
        let wanted = Int(min(Int64(buffer.count), run.size - offset))
        let (fd, at, system) = (run.fd, offset, self.system)
        do {
            try buffer.withUnsafeMutableBytes {
                try system.preadAll(fd, UnsafeMutableRawBufferPointer(rebasing: $0[..<wanted]), at: at)
            }
        } catch let failure as SystemCallFailure {
            throw ExternalSorter.runError(failure, "read a sort run", path: directory)
        }
        offset += Int64(wanted)
        filled = wanted
        position = 0
    }

    mutating func byte() throws -> UInt8? {
        if position == filled {
            try fill()
            if filled == 0 { return nil }
        }
        defer { position += 1 }
        return buffer[position]
    }

    mutating func varint() throws -> UInt64? {
        var result: UInt64 = 0, shift: UInt64 = 0
        while true {
            guard let b = try byte() else {
                if shift == 0 { return nil }
                throw SofaError(.ioError, "a sort run ends inside a length")
            }
            result |= UInt64(b & 0x7F) << shift
            if b & 0x80 == 0 { return result }
            shift += 7
        }
    }

    /// Replaces `out` with the next `n` bytes (reusing its storage: no allocation per pair).
    mutating func read(_ n: Int, into out: inout [UInt8]) throws {
        out.removeAll(keepingCapacity: true)
        while out.count < n {
            if position == filled {
                try fill()
                if filled == 0 { throw SofaError(.ioError, "a sort run ends inside a pair") }
            }
            let take = min(n - out.count, filled - position)
            out.append(contentsOf: buffer[position..<(position + take)])
            position += take
        }
    }

    mutating func advance() throws {
        guard let k = try varint() else {
            hasPair = false
            return
        }
        guard let v = try varint() else { throw SofaError(.ioError, "a sort run ends inside a pair") }
        // Swapped out so that `read` gets uniquely referenced storage to refill in place.
        var bytes = key
        key = []
        try read(Int(k), into: &bytes)
        key = bytes
        bytes = value
        value = []
        try read(Int(v), into: &bytes)
        value = bytes
        hasPair = true
    }
}
