import ArgumentParser
import Sofa
import SofaStorage

/// `sofa info DB`: documents (live, deleted, conflicted), the last sequence, and per file its size, live bytes,
/// fragmentation and each tree's depth, node count, average fill and compression ratio.
///
/// Reads every node of the document file (the shapes are measured, not estimated), read-only.
struct InfoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract: "Show document counts, the last sequence, and file and tree statistics.")

    @OptionGroup var arguments: DatabaseArguments

    func run() throws {
        let db = try arguments.open()
        let report = try db.documentFileReport()
        defer { Output.flush() }
        if arguments.json {
            Output.json(["database": JSON(db.path), "documents": number(report.liveDocuments),
                         "deleted": number(report.deletedDocuments),
                         "conflicted": number(report.conflictedDocuments),
                         "lastSequence": number(report.lastSequence), "commit": number(report.commitNumber)])
            Output.json(["file": "docs", "size": number(report.fileSize), "liveBytes": number(report.liveBytes),
                         "bodyChunkBytes": number(report.bodyChunkBytes),
                         "fragmentation": ratio(report.fragmentation)])
            for (name, tree, nodeSize) in trees(report) {
                Output.json(["file": "docs", "tree": JSON(name), "rows": number(tree.rows),
                             "depth": number(tree.depth), "nodes": number(tree.nodes),
                             "leafNodes": number(tree.leafNodes), "innerNodes": number(tree.innerNodes),
                             "storedBytes": number(tree.storedBytes), "rawBytes": number(tree.rawBytes),
                             "averageFill": ratio(tree.averageFill(nodeSize: nodeSize)),
                             "compressionRatio": ratio(tree.compressionRatio)])
            }
            return
        }
        Output.line("Database \(db.path)")
        Output.line("  documents      \(grouped(Int(report.liveDocuments)))")
        Output.line("  deleted        \(grouped(Int(report.deletedDocuments)))")
        Output.line("  conflicted     \(grouped(Int(report.conflictedDocuments)))")
        Output.line("  last sequence  \(report.lastSequence)")
        Output.line("")
        Output.table(["file", "size", "live bytes", "fragmentation", "commit"],
                     [["docs", grouped(Int(report.fileSize)), grouped(Int(report.liveBytes)),
                       percent(report.fragmentation), String(report.commitNumber)]])
        Output.line("")
        Output.table(["tree", "rows", "depth", "nodes", "leaves", "inner", "bytes", "avg fill", "compression"],
                     trees(report).map { name, tree, nodeSize in
                         ["docs/" + name, grouped(Int(tree.rows)), String(tree.depth), grouped(tree.nodes),
                          grouped(tree.leafNodes), grouped(tree.innerNodes), grouped(Int(tree.storedBytes)),
                          percent(tree.averageFill(nodeSize: nodeSize)), format2(tree.compressionRatio) + "x"]
                     })
    }

    private func trees(_ report: DocumentFileReport) -> [(String, TreeStatistics, Int)] {
        [("by-id", report.byID, report.byIDNodeSize), ("by-sequence", report.bySequence, report.bySequenceNodeSize)]
    }
}

/// Two decimals.
func format2(_ x: Double) -> String {
    let hundredths = Int((x * 100).rounded())
    return "\(hundredths / 100).\(hundredths % 100 < 10 ? "0" : "")\(hundredths % 100)"
}
