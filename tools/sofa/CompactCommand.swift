import ArgumentParser
import Sofa

/// `sofa compact DB`: rewrites `docs` with only live data (``Database/compact()``) and reports the sizes before
/// and after. Opens the database for writing, so it waits for nothing and fails with `locked` when another
/// process writes it.
struct CompactCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "compact",
        abstract: "Rewrite the document file with only live data, atomically; report sizes before and after.")

    @OptionGroup var arguments: DatabaseArguments

    func run() throws {
        let db = try arguments.open(writable: true)
        let progress = Progress("compact")
        progress.note("copying the live documents into docs\(Database.compactionSuffix)…")
        var clock = Stopwatch()
        let result = try db.compact()
        let seconds = clock.lap()
        progress.finish()
        try db.close()
        defer { Output.flush() }
        let saved = result.sizeBefore > result.sizeAfter ? result.sizeBefore - result.sizeAfter : 0
        if arguments.json {
            Output.json(["file": "docs", "sizeBefore": number(result.sizeBefore),
                         "sizeAfter": number(result.sizeAfter), "documents": number(result.documents),
                         "lastSequence": number(result.lastSequence), "seconds": ratio(seconds)])
            return
        }
        Output.line("compacted \(result.path): \(grouped(Int(result.documents))) documents (tombstones included), " +
                    "last sequence \(result.lastSequence)  [\(formatTime(seconds))]")
        Output.table(["file", "before", "after", "saved"],
                     [["docs", grouped(Int(result.sizeBefore)), grouped(Int(result.sizeAfter)),
                       grouped(Int(saved)) + (result.sizeBefore == 0 ? "" : " (" +
                                              percent(Double(saved) / Double(result.sizeBefore)) + ")")]])
    }
}
