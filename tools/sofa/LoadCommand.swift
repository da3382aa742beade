import ArgumentParser
import Glibc
import Sofa

/// `sofa load DB FILE|-`: imports JSON lines — one object per line, its `_id` used when present (a generated ID
/// otherwise), `_rev` to update an existing document — committing every `--batch` documents.
///
/// A bad line (not JSON, not an object, a conflict) stops the load with its line number; every document before
/// it is kept (its batch is committed first). Blank lines are skipped. Creates the database when missing.
struct LoadCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "load",
        abstract: "Import JSON lines (one document per line) into a database, committing in batches.")

    @OptionGroup var arguments: DatabaseArguments

    @Argument(help: "The JSON lines file, or - for standard input.")
    var file: String

    @Option(help: "Documents per commit.")
    var batch = 10_000

    @Option(help: ArgumentHelp(
        "When a batch is durable: full or none.",
        discussion: "full fsyncs every batch (it survives power loss); none does not (a batch survives a crash "
            + "of the process only; what reopens is always a complete earlier batch)."))
    var durability: DurabilityArgument = .full

    func validate() throws {
        guard batch > 0 else { throw ValidationError("--batch must be positive") }
    }

    func run() throws {
        let fd = file == "-" ? 0 : Glibc.open(file, O_RDONLY)
        guard fd >= 0 else {
            throw SofaError(.notFound, "cannot open input: \(String(cString: strerror(errno)))", path: file)
        }
        defer { if fd != 0 { Glibc.close(fd) } }
        let db = try arguments.open(writable: true, create: true, durability: durability.value)
        var reader = LineReader(fd: fd, path: file)
        var progress = Progress("load")
        var clock = Stopwatch()
        var loaded = 0
        var failure: SofaError?
        var failedLine = 0
        while failure == nil && !reader.isAtEnd {
            try db.inBatch {
                var inBatch = 0
                while inBatch < batch, failure == nil {
                    let more = try reader.nextLine { line, number in
                        guard !isBlank(line) else { return }
                        do {
                            try db.put(try JSON(parsing: line))
                            inBatch += 1
                        } catch let error as SofaError {
                            failure = SofaError(error.code, "line \(number): \(error.message)", path: file,
                                                offset: error.offset)
                            failedLine = number
                        }
                    }
                    if !more { break }
                }
                loaded += inBatch  // the batch commits what came before a bad line
            }
            progress.update(loaded)
        }
        let seconds = clock.lap()
        progress.finish()
        try db.close()
        if let failure {
            throw SofaError(failure.code, failure.message + " — stopped there; the \(grouped(loaded)) documents " +
                            "before line \(failedLine) are loaded", path: failure.path, offset: failure.offset)
        }
        let rate = Int(Double(loaded) / max(seconds, 1e-9))
        if arguments.json {
            Output.json(["loaded": JSON(loaded), "seconds": ratio(seconds), "docsPerSecond": JSON(rate),
                         "batch": JSON(batch), "durability": JSON(durability.rawValue)])
        } else {
            Output.line("loaded \(grouped(loaded)) documents in \(formatTime(seconds)) (\(grouped(rate)) docs/s, " +
                        "batches of \(grouped(batch)), durability \(durability.rawValue))")
        }
    }

    private func isBlank(_ line: UnsafeRawBufferPointer) -> Bool {
        line.allSatisfy { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }
    }
}

/// `--durability full|none`.
enum DurabilityArgument: String, ExpressibleByArgument, CaseIterable {
    case full, none

    var value: Durability { self == .full ? .full : .none }
}

/// Lines of a file descriptor, read 4 MiB at a time; each line is handed out in place, without copying.
struct LineReader {
    private let fd: Int32
    private let path: String
    private var buffer: [UInt8] = []
    private var start = 0
    private var end = 0
    private var eof = false
    /// The number of the last line handed out (1-based).
    private(set) var lineNumber = 0

    init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
        buffer = [UInt8](repeating: 0, count: 4 << 20)
    }

    /// True when every line has been handed out.
    var isAtEnd: Bool { eof && start == end }

    /// Calls `body` with the next line (without its newline) and its number; false when there are no more.
    mutating func nextLine(_ body: (UnsafeRawBufferPointer, Int) throws -> Void) throws -> Bool {
        while true {
            let found: Int? = buffer.withUnsafeBytes { all in
                guard start < end else { return nil }
                let p = memchr(all.baseAddress! + start, 0x0A, end - start)
                return p.map { all.baseAddress!.distance(to: UnsafeRawPointer($0)) }
            }
            if let newline = found {
                lineNumber += 1
                let range = start..<newline
                start = newline + 1
                try buffer.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[range]), lineNumber) }
                return true
            }
            if eof {
                guard start < end else { return false }
                lineNumber += 1  // a last line without a newline
                let range = start..<end
                start = end
                try buffer.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[range]), lineNumber) }
                return true
            }
            try refill()
        }
    }

    /// Moves the partial line to the front and reads more; grows the buffer for a line longer than it.
    private mutating func refill() throws {
        if start > 0 {
            buffer.withUnsafeMutableBytes { all in
                _ = memmove(all.baseAddress!, all.baseAddress! + start, end - start)
            }
            end -= start
            start = 0
        }
        if end == buffer.count { buffer += [UInt8](repeating: 0, count: buffer.count) }
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress! + end, $0.count - end) }
        if n < 0 {
            if errno == EINTR { return }
            throw SofaError(.ioError, "read failed: \(String(cString: strerror(errno)))", path: path)
        }
        if n == 0 { eof = true }
        end += n
    }
}
