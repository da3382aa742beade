import ArgumentParser
import Sofa

/// `sofa view list DB`: every view with an index file: its definition (key paths, value path, reduce,
/// document type; `(code)` for a view whose map function is app code), rows, the last sequence indexed and
/// whether it is stale. Read-only.
struct ViewListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List the views: definition, rows, last sequence indexed, stale.")

    @OptionGroup var arguments: DatabaseArguments

    func run() throws {
        let db = try arguments.open()
        defer { Output.flush() }
        let views = try db.viewNames.compactMap { db.existingView(named: $0) }
        if arguments.json {
            for view in views {
                let definition = view.definition
                var object: JSONObject = ["view": JSON(view.name)]
                object["keyPaths"] = definition.map { .array($0.keyPaths.map { JSON.string($0) }) } ?? .null
                object["valuePath"] = definition?.valuePath.map { JSON.string($0) } ?? .null
                object["reduce"] = definition?.reduceName.map { JSON.string($0) } ?? .null
                object["documentType"] = definition?.documentType.map { JSON.string($0) } ?? .null
                object["declarative"] = .bool(definition != nil)
                object["rows"] = number(view.totalRows)
                object["lastSequenceIndexed"] = number(view.lastSequenceIndexed)
                object["stale"] = .bool(view.isStale)
                Output.json(.object(object))
            }
            return
        }
        Output.table(["view", "key", "value", "reduce", "type", "rows", "indexed seq", "stale"], views.map { view in
            let d = view.definition
            return [view.name, d?.keyPaths.joined(separator: ",") ?? "(code)", d?.valuePath ?? "-",
                    d?.reduceName.map { "_" + $0 } ?? "-", d?.documentType ?? "-", grouped(view.totalRows),
                    String(view.lastSequenceIndexed), view.isStale ? "stale" : ""]
        }, leftAligned: [0, 1, 2, 3, 4, 7])
        Output.line("\(views.count) view\(views.count == 1 ? "" : "s"), database last sequence \(db.lastSequence)")
    }
}
