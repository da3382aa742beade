import ArgumentParser
import Sofa
import SofaStorage

/// `sofa verify DB`: every check ``Database/verify()`` makes on every file — both trees of `docs` (chunk CRCs,
/// key order, row counts, subtree sizes, reductions), every document entry and body, by-ID ⇄ by-sequence —
/// and every view's index file (``View/verify()``: both trees, stored reductions, back index ⇄ rows, and for a
/// declarative view its rows against a fresh map of the documents up to its last indexed sequence), with each
/// problem on its own line naming the file and offset. Exit status 1 when anything is found.
///
/// A file that does not open at all (no valid commit, a damaged file header) is a finding too, not a crash.
struct VerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check every checksum, key order, count and reduction; exit 1 on any problem.")

    @OptionGroup var arguments: DatabaseArguments

    func run() throws {
        let progress = Progress("verify")
        progress.note("reading every node, entry and body…")
        var problems: [SofaError]
        var summary: (documents: Int, deleted: Int, lastSequence: UInt64)?
        var views = 0
        do {
            let db = try arguments.open()
            problems = try db.verify()  // the document file, then every view's index file
            summary = (db.documentCount, db.deletedDocumentCount, db.lastSequence)
            views = try db.viewNames.count
        } catch let error as SofaError where error.code == .corruption || error.code == .unsupportedFormat {
            problems = [error]
        }
        progress.finish()
        defer { Output.flush() }
        if arguments.json {
            for p in problems {
                Output.json(["problem": JSON(p.message), "code": JSON(p.code.rawValue),
                             "file": p.path.map { JSON($0) } ?? .null,
                             "offset": p.offset.map { number($0) } ?? .null])
            }
            Output.json(["database": JSON(arguments.database), "problems": number(problems.count),
                         "documents": summary.map { number($0.documents) } ?? .null,
                         "deleted": summary.map { number($0.deleted) } ?? .null,
                         "lastSequence": summary.map { number($0.lastSequence) } ?? .null,
                         "views": number(views)])
        } else {
            for p in problems { Output.line("problem: \(p)") }
            if let summary {
                Output.line("docs: \(grouped(summary.documents)) documents, \(grouped(summary.deleted)) deleted, " +
                            "last sequence \(summary.lastSequence)")
            }
            if views > 0 { Output.line("views: \(views) index file\(views == 1 ? "" : "s") checked") }
            Output.line(problems.isEmpty ? "verify: no problems found"
                                         : "verify: \(problems.count) problem\(problems.count == 1 ? "" : "s") found")
        }
        if !problems.isEmpty {
            Output.flush()
            throw ExitCode(1)
        }
    }
}
