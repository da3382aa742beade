import ArgumentParser
import Sofa

/// `sofa query DB VIEW`: the rows of a view's index, with a flag for every ``Query`` option; or
/// `sofa query DB --all-docs [--all-docs-mode MODE]`: the documents by ID (or by sequence).
///
/// By default a declarative view is brought up to date first, which opens the database for writing only when
/// the index is stale; `--stale ok` answers from the index as it is (read-only), `--stale update-after`
/// answers from it as it is and then updates it. A view whose map function is app code cannot be updated here:
/// it is read as it is. With `--json` each row is one line `{"key":…,"value":…,"id":…}` (no `id` on reduced
/// rows; `doc` with `--include-docs`).
struct QueryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "query",
        abstract: "Query a view's index, or all documents with --all-docs.")

    /// `--stale`: whether the index is updated around the query.
    enum Stale: String, ExpressibleByArgument, CaseIterable {
        /// Answer from the index as it is (``IndexUpdateMode/never``).
        case ok
        /// Answer from the index as it is, then update it (``IndexUpdateMode/after``).
        case updateAfter = "update-after"
    }

    /// `--all-docs-mode`: ``AllDocsMode`` by name.
    enum Mode: String, ExpressibleByArgument, CaseIterable {
        case allDocs = "all-docs", includeDeleted = "include-deleted", showConflicts = "show-conflicts"
        case onlyConflicts = "only-conflicts", bySequence = "by-sequence"

        var allDocsMode: AllDocsMode {
            switch self {
            case .allDocs: .allDocs
            case .includeDeleted: .includeDeleted
            case .showConflicts: .showConflicts
            case .onlyConflicts: .onlyConflicts
            case .bySequence: .bySequence
            }
        }
    }

    @OptionGroup var arguments: DatabaseArguments

    @Argument(help: "The view's name (none with --all-docs).")
    var view: String?

    @Flag(name: .customLong("all-docs"), help: "Query every document by ID instead of a view.")
    var allDocs = false

    @Option(name: .customLong("all-docs-mode"),
            help: ArgumentHelp("With --all-docs: which documents and in what order.", valueName: "mode"))
    var allDocsMode: Mode?

    @Option(name: .customLong("start-key"),
            help: ArgumentHelp("The first key (JSON; the last with --descending).", valueName: "json"))
    var startKey: String?

    @Option(name: .customLong("end-key"),
            help: ArgumentHelp("The last key (JSON; the first with --descending).", valueName: "json"))
    var endKey: String?

    @Option(name: .customLong("start-key-doc-id"),
            help: ArgumentHelp("Among rows under the start key, start at this document.", valueName: "id"))
    var startKeyDocID: String?

    @Option(name: .customLong("end-key-doc-id"),
            help: ArgumentHelp("Among rows under the end key, end at this document.", valueName: "id"))
    var endKeyDocID: String?

    @Option(name: .customLong("inclusive-start"),
            help: ArgumentHelp("Whether rows with the start key are returned (true|false).", valueName: "true|false"))
    var inclusiveStart: Bool?

    @Option(name: .customLong("inclusive-end"),
            help: ArgumentHelp("Whether rows with the end key are returned (true|false).", valueName: "true|false"))
    var inclusiveEnd: Bool?

    @Flag(help: "From the highest key down.")
    var descending = false

    @Option(help: ArgumentHelp("Return at most this many rows.", valueName: "n"))
    var limit: Int?

    @Option(help: ArgumentHelp("Leave out this many rows first.", valueName: "n"))
    var skip: Int?

    @Option(help: ArgumentHelp("Only rows with these keys (a JSON array).", valueName: "json-array"))
    var keys: String?

    @Option(name: .customLong("prefix-match-level"),
            help: ArgumentHelp("Match the end key as a prefix at this level.", valueName: "n"))
    var prefixMatchLevel: Int?

    @Flag(name: .customLong("map-only"), help: "The index rows even when the view has a reduce.")
    var mapOnly = false

    @Option(name: .customLong("group-level"),
            help: ArgumentHelp("Group array keys by their first N items and reduce each.", valueName: "n"))
    var groupLevel: Int?

    @Option(help: "ok: answer from the index as it is; update-after: then update it. Default: update first.")
    var stale: Stale?

    @Flag(name: .customLong("include-docs"), help: "Add each row's document.")
    var includeDocs = false

    func validate() throws {
        if allDocs && view != nil { throw ValidationError("give a view name or --all-docs, not both") }
        if !allDocs && view == nil { throw ValidationError("missing a view name (or --all-docs)") }
        if !allDocs && allDocsMode != nil { throw ValidationError("--all-docs-mode needs --all-docs") }
        if allDocs {
            let viewOnly = [("--start-key-doc-id", startKeyDocID != nil), ("--end-key-doc-id", endKeyDocID != nil),
                            ("--map-only", mapOnly), ("--group-level", groupLevel != nil), ("--stale", stale != nil)]
            if let (flag, _) = viewOnly.first(where: \.1) { throw ValidationError("\(flag) is for view queries") }
        }
        for (flag, value) in [("--limit", limit), ("--skip", skip), ("--prefix-match-level", prefixMatchLevel),
                              ("--group-level", groupLevel)] {
            if let value, value < 0 { throw ValidationError("\(flag) must not be negative") }
        }
        _ = try parsedKeys()
    }

    /// The JSON flags parsed: start key, end key, keys. A value that is not JSON (or `--keys` that is not an
    /// array) is a usage error naming the flag.
    func parsedKeys() throws -> (start: JSON?, end: JSON?, keys: [JSON]?) {
        func parse(_ text: String?, _ flag: String) throws -> JSON? {
            guard let text else { return nil }
            do {
                return try JSON(parsing: text)
            } catch {
                throw ValidationError("\(flag): not JSON: \(text) (\(error))")
            }
        }
        let start = try parse(startKey, "--start-key"), end = try parse(endKey, "--end-key")
        guard let list = try parse(keys, "--keys") else { return (start, end, nil) }
        guard let array = list.arrayValue else { throw ValidationError("--keys: not a JSON array: \(keys!)") }
        return (start, end, array)
    }

    func run() throws {
        let (start, end, keyList) = try parsedKeys()
        func configure(_ query: inout Query) {
            query.startKey = start
            query.endKey = end
            query.keys = keyList
            query.startKeyDocID = startKeyDocID
            query.endKeyDocID = endKeyDocID
            if let inclusiveStart { query.inclusiveStart = inclusiveStart }
            if let inclusiveEnd { query.inclusiveEnd = inclusiveEnd }
            query.descending = descending
            query.limit = limit
            if let skip { query.skip = skip }
            if let prefixMatchLevel { query.prefixMatchLevel = prefixMatchLevel }
            query.mapOnly = mapOnly
            if let groupLevel { query.groupLevel = groupLevel }
        }
        defer { Output.flush() }
        if allDocs {
            let db = try arguments.open()
            var query = db.createAllDocumentsQuery()
            configure(&query)
            query.allDocsMode = (allDocsMode ?? .allDocs).allDocsMode
            print(try query.run())
            return
        }
        let name = view!
        var db = try arguments.open()
        var found = try existing(name, in: db)
        // Writable only when a declarative index is behind and this query is to update it.
        if stale != .ok && found.hasMap && found.isStale {
            try db.close()
            db = try arguments.open(writable: true)
            found = try existing(name, in: db)
        }
        if stale == nil && !db.options.readOnly {
            // Bring the index up to date first (what `.before` would do), showing that the wait is the index.
            let progress = Progress("query")
            progress.note("updating the index of \(name) to sequence \(db.lastSequence)…")
            try found.updateIndex()
            progress.finish()
        }
        var query = found.createQuery()
        configure(&query)
        query.indexUpdateMode = stale == nil && !db.options.readOnly ? .before : .never
        print(try query.run())
        if stale == .updateAfter && !db.options.readOnly {
            Output.flush()  // the answer first, as `.after` does; then the update, before the process exits
            try found.updateIndex()
        }
    }

    private func existing(_ name: String, in db: Database) throws -> View {
        guard let view = db.existingView(named: name) else {
            throw SofaError(.notFound, "no view \"\(name)\"", path: db.path)
        }
        return view
    }

    /// Prints the rows as JSON lines or a table with a count below it.
    private func print(_ rows: QueryEnumerator) {
        if arguments.json {
            for row in rows {
                var object: JSONObject = ["key": row.key, "value": row.value ?? .null]
                if let id = row.documentID { object["id"] = JSON(id) }
                if includeDocs { object["doc"] = row.document?.properties ?? .null }
                Output.json(.object(object))
            }
            return
        }
        let withIDs = rows.contains { $0.documentID != nil }
        var header = ["key", "value"]
        if withIDs { header.append("id") }
        if includeDocs { header.append("doc") }
        Output.table(header, rows.map { row in
            var cells = [row.key.description, (row.value ?? .null).description]
            if withIDs { cells.append(row.documentID ?? "") }
            if includeDocs { cells.append(row.document?.properties.description ?? "null") }
            return cells
        }, leftAligned: Set(header.indices))
        Output.line("\(rows.count) row\(rows.count == 1 ? "" : "s") (index rows \(rows.totalRows), " +
                    "sequence \(rows.sequenceNumber))")
    }
}
