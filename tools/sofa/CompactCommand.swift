import ArgumentParser
import Glibc
import Sofa

/// `sofa compact DB [--view NAME]`: rewrites `docs` and every view's index file with only live data
/// (``Database/compact()``), or with `--view` only that view's index file (``View/compact()``), and reports the
/// sizes before and after. Opens the database for writing, so it fails with `locked` when another process
/// writes it.
struct CompactCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "compact",
        abstract: "Rewrite the document file and the view index files with only live data, atomically; " +
            "report sizes before and after.")

    @OptionGroup var arguments: DatabaseArguments

    @Option(help: ArgumentHelp("Compact only this view's index file.", valueName: "name"))
    var view: String?

    /// One compacted file, as both outputs list it.
    private struct File {
        var name: String
        var before: UInt64
        var after: UInt64
        var fields: JSONObject
    }

    func run() throws {
        let db = try arguments.open(writable: true)
        let progress = Progress("compact")
        var clock = Stopwatch()
        var files: [File] = []
        var skipped: [String] = []
        var summary: String
        if let view {
            guard let found = db.existingView(named: view) else {
                throw SofaError(.notFound, "no view \"\(view)\"", path: db.path)
            }
            progress.note("copying the rows of \(view) into views/.\(view)\(Database.compactionSuffix)…")
            let result = try found.compact()
            files.append(viewFile(result))
            summary = "compacted \(result.path): \(grouped(Int(result.rows))) rows, " +
                "last sequence indexed \(result.lastSequenceIndexed)"
        } else {
            progress.note("copying the live documents into docs\(Database.compactionSuffix), then the views…")
            let result = try db.compact()
            files.append(File(name: "docs", before: result.sizeBefore, after: result.sizeAfter,
                              fields: ["documents": number(result.documents),
                                       "lastSequence": number(result.lastSequence)]))
            files += result.views.map(viewFile)
            // A view whose custom reduce lives only in app code cannot be compacted here: say so.
            let compacted = Set(result.views.map(\.view))
            skipped = try db.viewNames.filter { !compacted.contains($0) && access(db.path + "/views/" + $0, F_OK) == 0 }
            let views = result.views.count
            summary = "compacted \(result.path): \(grouped(Int(result.documents))) documents (tombstones included), " +
                "last sequence \(result.lastSequence)" +
                (views == 0 ? "" : "; \(views) view index file\(views == 1 ? "" : "s")")
        }
        let seconds = clock.lap()
        progress.finish()
        try db.close()
        defer { Output.flush() }
        if arguments.json {
            for file in files {
                var object: JSONObject = ["file": JSON(file.name)]
                for (key, value) in file.fields { object[key] = value }
                object["sizeBefore"] = number(file.before)
                object["sizeAfter"] = number(file.after)
                object["seconds"] = ratio(seconds)
                Output.json(.object(object))
            }
            for name in skipped {
                Output.json(["file": JSON("views/" + name), "view": JSON(name), "skipped": JSON(Self.skipReason)])
            }
            return
        }
        Output.line(summary + "  [\(formatTime(seconds))]")
        Output.table(["file", "before", "after", "saved"], files.map { file in
            let saved = file.before > file.after ? file.before - file.after : 0
            return [file.name, grouped(Int(file.before)), grouped(Int(file.after)),
                    grouped(Int(saved)) + (file.before == 0 ? "" : " (" +
                                           percent(Double(saved) / Double(file.before)) + ")")]
        })
        for name in skipped { Output.line("skipped views/\(name): \(Self.skipReason)") }
    }

    static let skipReason = "its reductions come from a custom reduce in app code; compact it from the app " +
        "(View.compact())"

    private func viewFile(_ result: ViewCompactionResult) -> File {
        File(name: "views/" + result.view, before: result.sizeBefore, after: result.sizeAfter,
             fields: ["view": JSON(result.view), "rows": number(result.rows),
                      "lastSequenceIndexed": number(result.lastSequenceIndexed)])
    }
}
