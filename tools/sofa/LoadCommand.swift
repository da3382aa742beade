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
    var batch = 20_000

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
        // Parsed documents for a whole batch and two chunks more may wait, so the parser works on while the
        // writer commits.
        let reader = JSONLinesReader(fd: fd, path: file, depth: batch / JSONLinesReader.chunkSize + 2)
        var progress = Progress("load")
        var clock = Stopwatch()
        var loaded = 0
        var failure: SofaError?
        var failedLine = 0
        var chunk = JSONLinesReader.Chunk()
        var position = 0
        var finished = false
        func fail(_ line: Int, _ error: SofaError) {
            // The parser's offset counts from the start of the line, and the message already gives it.
            failure = SofaError(error.code, "line \(line): \(error.message)", path: file)
            failedLine = line
        }
        while !finished {
            try db.inBatch {
                var inBatch = 0
                defer { loaded += inBatch }  // the batch commits what came before a bad line
                while inBatch < batch {
                    if position == chunk.documents.count {
                        if let (line, error) = chunk.failure { return fail(line, error) }
                        if chunk.isLast {
                            finished = true
                            return
                        }
                        chunk = reader.next(returning: chunk)
                        position = 0
                        progress.update(loaded + inBatch)
                        continue
                    }
                    do {
                        try db.put(chunk.documents[position], id: chunk.ids[position])
                    } catch let error as SofaError {
                        reader.cancel()
                        return fail(chunk.lines[position], error)
                    }
                    position += 1
                    inBatch += 1
                }
            }
            if failure != nil { finished = true }
        }
        let seconds = clock.lap()
        progress.finish()
        try db.close()
        if let failure {
            let kept = loaded == 1 ? "the 1 document" : "the \(grouped(loaded)) documents"
            throw SofaError(failure.code, failure.message + " — stopped there; \(kept) before line \(failedLine) " +
                            "\(loaded == 1 ? "is" : "are") loaded", path: failure.path)
        }
        let rate = Int(Double(loaded) / max(seconds, 1e-9))
        if arguments.json {
            Output.json(["loaded": JSON(loaded), "seconds": ratio(seconds), "docsPerSecond": JSON(rate),
                         "batch": JSON(batch), "durability": JSON(durability.rawValue)])
        } else {
            let documents = "\(grouped(loaded)) document\(loaded == 1 ? "" : "s")"
            Output.line("loaded \(documents) in \(formatTime(seconds)) (\(grouped(rate)) docs/s, " +
                        "batches of \(grouped(batch)), durability \(durability.rawValue))")
        }
    }
}

/// `--durability full|none`.
enum DurabilityArgument: String, ExpressibleByArgument, CaseIterable {
    case full, none

    var value: Durability { self == .full ? .full : .none }
}
