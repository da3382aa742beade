import ArgumentParser
import Sofa

/// `sofa view create DB NAME --key PATH[,PATH…] [--value PATH] [--reduce _count|_sum|_stats] [--type TYPE]`:
/// defines a declarative view and builds its index.
///
/// One key path makes a scalar key, several an array key; a path is dot-separated into nested objects
/// (`album.title` reads `doc["album"]["title"]`). A document emits a row only when every key path is present.
/// Redefining a view with a different definition rebuilds its index.
struct ViewCreateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create",
        abstract: "Define a declarative view and build its index.")

    /// `--reduce`: a built-in reduce by its CouchDB name.
    enum ReduceName: String, ExpressibleByArgument, CaseIterable {
        case count = "_count", sum = "_sum", stats = "_stats"

        var reduce: Reduce {
            switch self {
            case .count: .count
            case .sum: .sum
            case .stats: .stats
            }
        }
    }

    @OptionGroup var arguments: DatabaseArguments

    @Argument(help: "The view's name: not empty, no '/', not starting with '.'.")
    var name: String

    @Option(help: ArgumentHelp("The key's path, or comma-separated paths for an array key (dots step into objects).",
                               valueName: "path[,path…]"))
    var key: String

    @Option(help: ArgumentHelp("The value's path (none when omitted).", valueName: "path"))
    var value: String?

    @Option(help: "A built-in reduce: _count, _sum or _stats.")
    var reduce: ReduceName?

    @Option(help: ArgumentHelp("Index only documents whose \"type\" equals this.", valueName: "type"))
    var type: String?

    /// The key paths from `--key`.
    var keyPaths: [String] { key.split(separator: ",", omittingEmptySubsequences: false).map(String.init) }

    func validate() throws {
        if keyPaths.contains(where: \.isEmpty) { throw ValidationError("--key: an empty path in \"\(key)\"") }
        if value?.isEmpty == true { throw ValidationError("--value: an empty path") }
    }

    func run() throws {
        let db = try arguments.open(writable: true)
        var clock = Stopwatch()
        let progress = Progress("view create")
        progress.note("building the index of \(name) from \(grouped(db.documentCount)) documents…")
        let view = try db.defineView(named: name, keyPaths: keyPaths, valuePath: value, reduce: reduce?.reduce,
                                     documentType: type)
        try view.updateIndex()
        progress.finish()
        let seconds = clock.lap()
        let rows = view.totalRows, sequence = view.lastSequenceIndexed
        try db.close()
        defer { Output.flush() }
        if arguments.json {
            var object: JSONObject = ["view": JSON(name), "definition": view.definition?.json ?? .null]
            object["rows"] = number(rows)
            object["lastSequenceIndexed"] = number(sequence)
            object["seconds"] = ratio(seconds)
            Output.json(.object(object))
            return
        }
        Output.line("created view \(name): key \(keyPaths.joined(separator: ",")), value \(value ?? "-"), " +
                    "reduce \(reduce?.rawValue ?? "-"), type \(type ?? "-"); indexed \(grouped(rows)) rows " +
                    "to sequence \(sequence)  [\(formatTime(seconds))]")
    }
}
