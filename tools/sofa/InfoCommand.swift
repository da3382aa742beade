import ArgumentParser
import Sofa
import SofaStorage

/// `sofa info DB`: documents (live, deleted, conflicted), the last sequence; per view its rows, last indexed
/// sequence, version, reduce and whether it is stale; and per file (`docs`, each `views/NAME`) its size, live
/// bytes, fragmentation and each tree's depth, node count, average fill and compression ratio.
///
/// Reads every node of every file (the shapes are measured, not estimated), read-only.
struct InfoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract: "Show document counts, the last sequence, views, and file and tree statistics.")

    @OptionGroup var arguments: DatabaseArguments

    /// One tree of one file, as both outputs list them.
    private struct Tree {
        var file: String
        var name: String
        var statistics: TreeStatistics
        var nodeSize: Int
    }

    func run() throws {
        let db = try arguments.open()
        let report = try db.documentFileReport()
        let views = try db.viewNames.compactMap { try db.existingView(named: $0)?.fileReport() }
        var trees = [Tree(file: "docs", name: "by-id", statistics: report.byID, nodeSize: report.byIDNodeSize),
                     Tree(file: "docs", name: "by-sequence", statistics: report.bySequence,
                          nodeSize: report.bySequenceNodeSize)]
        for view in views {
            trees.append(Tree(file: "views/" + view.name, name: "rows", statistics: view.rows,
                              nodeSize: view.rowsNodeSize))
            trees.append(Tree(file: "views/" + view.name, name: "back-index", statistics: view.backIndex,
                              nodeSize: view.backIndexNodeSize))
        }
        defer { Output.flush() }
        if arguments.json {
            Output.json(["database": JSON(db.path), "documents": number(report.liveDocuments),
                         "deleted": number(report.deletedDocuments),
                         "conflicted": number(report.conflictedDocuments),
                         "lastSequence": number(report.lastSequence), "commit": number(report.commitNumber),
                         "views": number(views.count)])
            Output.json(["file": "docs", "size": number(report.fileSize), "liveBytes": number(report.liveBytes),
                         "bodyChunkBytes": number(report.bodyChunkBytes),
                         "fragmentation": ratio(report.fragmentation), "logRecords": number(report.logRecords),
                         "pendingDocuments": number(report.pendingDocuments)])
            for view in views {
                var object: JSONObject = ["file": JSON("views/" + view.name), "view": JSON(view.name)]
                object["rows"] = number(view.rows.rows)
                object["lastSequenceIndexed"] = number(view.lastSequenceIndexed)
                object["version"] = JSON(view.mapVersion)
                object["reduce"] = view.reduceName.map { JSON("_" + $0) } ?? .null
                object["declarative"] = .bool(view.isDeclarative)
                object["stale"] = .bool(view.isStale)
                object["size"] = number(view.fileSize)
                object["liveBytes"] = number(view.liveBytes)
                object["fragmentation"] = ratio(view.fragmentation)
                object["commit"] = number(view.commitNumber)
                Output.json(.object(object))
            }
            for tree in trees {
                let s = tree.statistics
                Output.json(["file": JSON(tree.file), "tree": JSON(tree.name), "rows": number(s.rows),
                             "depth": number(s.depth), "nodes": number(s.nodes), "leafNodes": number(s.leafNodes),
                             "innerNodes": number(s.innerNodes), "storedBytes": number(s.storedBytes),
                             "rawBytes": number(s.rawBytes), "averageFill": ratio(s.averageFill(nodeSize: tree.nodeSize)),
                             "compressionRatio": ratio(s.compressionRatio)])
            }
            return
        }
        Output.line("Database \(db.path)")
        Output.line("  documents      \(grouped(Int(report.liveDocuments)))")
        Output.line("  deleted        \(grouped(Int(report.deletedDocuments)))")
        Output.line("  conflicted     \(grouped(Int(report.conflictedDocuments)))")
        Output.line("  last sequence  \(report.lastSequence)")
        if report.logRecords > 0 {
            Output.line("  commit log     \(report.logRecords) records, \(report.pendingDocuments) documents not yet in the trees")
        }
        if !views.isEmpty {
            Output.line("")
            Output.table(["view", "rows", "indexed seq", "version", "reduce", "stale"], views.map { view in
                [view.name, grouped(Int(view.rows.rows)), String(view.lastSequenceIndexed),
                 view.isDeclarative ? "(declarative)" : view.mapVersion, view.reduceName.map { "_" + $0 } ?? "-",
                 view.isStale ? "stale" : ""]
            }, leftAligned: [0, 3, 4, 5])
        }
        Output.line("")
        Output.table(["file", "size", "live bytes", "fragmentation", "commit"],
                     [["docs", grouped(Int(report.fileSize)), grouped(Int(report.liveBytes)),
                       percent(report.fragmentation), String(report.commitNumber)]] + views.map { view in
                        ["views/" + view.name, grouped(Int(view.fileSize)), grouped(Int(view.liveBytes)),
                         percent(view.fragmentation), String(view.commitNumber)]
                     })
        Output.line("")
        Output.table(["tree", "rows", "depth", "nodes", "leaves", "inner", "bytes", "avg fill", "compression"],
                     trees.map { tree in
                         let s = tree.statistics
                         return [tree.file + "/" + tree.name, grouped(Int(s.rows)), String(s.depth), grouped(s.nodes),
                                 grouped(s.leafNodes), grouped(s.innerNodes), grouped(Int(s.storedBytes)),
                                 percent(s.averageFill(nodeSize: tree.nodeSize)), format2(s.compressionRatio) + "x"]
                     })
    }
}

/// Two decimals.
func format2(_ x: Double) -> String {
    let hundredths = Int((x * 100).rounded())
    return "\(hundredths / 100).\(hundredths % 100 < 10 ? "0" : "")\(hundredths % 100)"
}
