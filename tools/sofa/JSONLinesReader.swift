import Dispatch
import Glibc
import Sofa
import SofaStorage
import Synchronization

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

/// Parses JSON lines on a thread of its own, ahead of the writer, so reading and parsing overlap the writer's
/// puts and commits on a second core (`sofa load`).
///
/// At most `depth` chunks wait parsed — `sofa load` asks for a whole batch's worth and more, so the parser
/// keeps going while the writer commits — and the parser blocks when the writer falls behind, so memory stays
/// bounded however large the input is. A line that does not parse ends the stream: its chunk carries the
/// documents before it and the error.
///
/// The parser also takes each document's string `_id` out of its properties (handed over beside them), so
/// the writer's put finds no reserved member to strip and serializes the properties as they are.
final class JSONLinesReader: @unchecked Sendable {
    /// Parsed documents from consecutive lines, with each one's `_id` (nil when absent or not a string, which
    /// the put then reports) and line number for error messages.
    struct Chunk {
        var documents: [JSON] = []
        var ids: [String?] = []
        var lines: [Int] = []
        /// A line that did not parse, after the documents above; the stream ends with it.
        var failure: (line: Int, error: SofaError)?
        /// True for the last chunk (end of input, a bad line, or a read error).
        var isLast = false
    }

    /// Documents per chunk.
    static let chunkSize = 1024

    private let queue = Lock<[Chunk]>([])
    /// Chunks the writer is done with, freed on the parser's thread: tearing down a million parsed documents
    /// is work the writer need not do.
    private let spent = Lock<[Chunk]>([])
    private let free: DispatchSemaphore
    private let ready = DispatchSemaphore(value: 0)
    private let cancelled = Atomic(false)
    private var thread: pthread_t?

    /// Starts parsing lines of `fd` (named `path` in errors), keeping at most `depth` chunks parsed ahead.
    init(fd: Int32, path: String, depth: Int) {
        free = DispatchSemaphore(value: max(depth, 1))
        var reader = LineReader(fd: fd, path: path)
        let box = Unmanaged.passRetained(ParserTask { [self] in self.parse(&reader) })
        var thread = pthread_t()
        let started = pthread_create(&thread, nil, { raw in
            let task = Unmanaged<ParserTask>.fromOpaque(raw!).takeRetainedValue()
            task.body()
            return nil
        }, box.toOpaque())
        if started == 0 {
            self.thread = thread
        } else {
            box.release()
            parse(&reader)  // no thread: parse everything now (bounded only by the input)
        }
    }

    deinit {
        cancel()
        if let thread { pthread_join(thread, nil) }
    }

    /// The next chunk, waiting for the parser if needed; `done` (the previous chunk) is freed by the parser.
    func next(returning done: Chunk) -> Chunk {
        if !done.documents.isEmpty { spent.withLock { $0.append(done) } }
        ready.wait()
        let chunk = queue.withLock { $0.removeFirst() }
        free.signal()
        return chunk
    }

    /// Stops the parser (the writer met an error); it exits at its next chunk.
    func cancel() {
        cancelled.store(true, ordering: .releasing)
        free.signal()
    }

    private func publish(_ chunk: Chunk) -> Bool {
        let garbage = spent.withLock { chunks in
            defer { chunks.removeAll() }
            return chunks
        }
        _ = consume garbage  // freed here, on this thread
        free.wait()
        if cancelled.load(ordering: .acquiring) { return false }
        queue.withLock { $0.append(chunk) }
        ready.signal()
        return true
    }

    private func parse(_ reader: inout LineReader) {
        var chunk = Chunk()
        chunk.documents.reserveCapacity(JSONLinesReader.chunkSize)
        chunk.ids.reserveCapacity(JSONLinesReader.chunkSize)
        while true {
            do {
                let more = try reader.nextLine { line, number in
                    guard !line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) else { return }
                    do {
                        var document = try JSON(parsing: line)
                        var id: String?
                        if case .object(var members) = document, case .string(let string)? = members["_id"] {
                            document = .null  // `members` is now the only reference: removing does not copy
                            members.removeValue(forKey: "_id")
                            document = .object(members)
                            id = string
                        }
                        chunk.documents.append(document)
                        chunk.ids.append(id)
                        chunk.lines.append(number)
                    } catch let error as SofaError {
                        chunk.failure = (number, error)
                    }
                }
                if !more { chunk.isLast = true }
            } catch let error as SofaError {
                chunk.failure = (reader.lineNumber + 1, error)
            } catch {
                chunk.failure = (reader.lineNumber + 1, SofaError(.ioError, "\(error)"))
            }
            if chunk.failure != nil { chunk.isLast = true }
            if chunk.isLast || chunk.documents.count >= JSONLinesReader.chunkSize {
                let last = chunk.isLast
                guard publish(chunk), !last else { return }
                chunk = Chunk()
                chunk.documents.reserveCapacity(JSONLinesReader.chunkSize)
                chunk.ids.reserveCapacity(JSONLinesReader.chunkSize)
            }
        }
    }
}

/// The parser thread's body, passed through `pthread_create`'s context pointer.
private final class ParserTask {
    let body: () -> Void
    init(_ body: @escaping () -> Void) { self.body = body }
}
