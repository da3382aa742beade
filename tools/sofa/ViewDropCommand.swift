import ArgumentParser
import Sofa

/// `sofa view drop DB NAME`: deletes a view's index file (its definition with it). Fails with `notFound`
/// when there is no such view.
struct ViewDropCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "drop",
        abstract: "Delete a view and its index.")

    @OptionGroup var arguments: DatabaseArguments

    @Argument(help: "The view's name.")
    var name: String

    func run() throws {
        let db = try arguments.open(writable: true)
        guard let view = db.existingView(named: name) else {
            throw SofaError(.notFound, "no view \"\(name)\"", path: db.path)
        }
        let rows = view.totalRows
        try view.delete()
        try db.close()
        defer { Output.flush() }
        if arguments.json {
            Output.json(["dropped": JSON(name), "rows": number(rows)])
            return
        }
        Output.line("dropped view \(name) (\(grouped(rows)) rows)")
    }
}
