import ArgumentParser
import Glibc
import Sofa
import SofaStorage

/// `sofa dump DB`: the documents by ID (default), the changes by sequence (`--by-seq`), the node structure of a
/// tree (`--tree`, the by-ID tree or with `--by-seq` the by-sequence tree), or the commit history
/// (`--headers`, newest first along each header's `previousHeaderOffset`). With `--view NAME` the same for that
/// view's index file: its rows in index order, its rows tree's nodes (`--tree`), its commits (`--headers`).
/// Read-only: a stale view is dumped as it is stored.
struct DumpCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dump",
        abstract: "Print documents, changes by sequence, view rows, tree nodes or commit headers.")

    @OptionGroup var arguments: DatabaseArguments

    @Flag(name: .customLong("by-seq"), help: "Changes in sequence order (with --tree: the by-sequence tree).")
    var bySequence = false

    @Flag(help: ArgumentHelp(
        "The nodes of a tree: offset, kind, level, entries, bytes, first and last key.",
        discussion: "An inner node's keys are its separators: each is the largest key of one child's subtree."))
    var tree = false

    @Flag(help: "The commit history, newest first.")
    var headers = false

    @Option(help: ArgumentHelp("A view's index rows (with --tree: its rows tree; with --headers: its commits).",
                               valueName: "name"))
    var view: String?

    @Option(help: "Print at most this many items.")
    var limit: Int?

    func validate() throws {
        if headers && (tree || bySequence) {
            throw ValidationError("--headers cannot be combined with --tree or --by-seq")
        }
        if let limit, limit < 0 { throw ValidationError("--limit must not be negative") }
        if view != nil && bySequence { throw ValidationError("--view cannot be combined with --by-seq") }
    }

    func run() throws {
        let db = try arguments.open()
        defer { Output.flush() }
        if let view {
            guard let found = db.existingView(named: view) else {
                throw SofaError(.notFound, "no view \"\(view)\"", path: db.path)
            }
            if headers {
                try dumpHeaders(try found.commitHistory(limit: limit), roots: ["rows", "back-index rows"])
            } else if tree {
                try dumpTree(file: "views/\(view)", name: "rows", numeric: false) {
                    try found.forEachNode(backIndex: false, $0)
                }
            } else {
                try dumpRows(found)
            }
        } else if headers {
            try dumpHeaders(try db.commitHistory(limit: limit), roots: ["by-id rows", "by-seq rows"])
        } else if tree {
            try dumpTree(file: "docs", name: bySequence ? "by-sequence" : "by-id", numeric: bySequence) {
                try db.forEachNode(bySequence: bySequence, $0)
            }
            if !bySequence { try dumpLog(db) }
        } else if bySequence {
            try dumpChanges(db)
        } else {
            try dumpDocuments(db)
        }
    }

    private func dumpDocuments(_ db: Database) throws {
        var rows: [[String]] = []
        var count = 0
        try db.forEachDocument { doc, conflicts in
            if let limit, count >= limit { return false }
            count += 1
            if arguments.json {
                Output.json(["id": JSON(doc.id), "rev": JSON(doc.revisionID), "seq": number(doc.sequence),
                             "deleted": .bool(doc.isDeleted), "conflicts": number(conflicts),
                             "body": doc.userProperties])
            } else {
                rows.append([doc.id, doc.revisionID, String(doc.sequence),
                             doc.isDeleted ? "deleted" : conflicts > 0 ? "conflicted" : "",
                             doc.userProperties.description])
            }
            return true
        }
        if !arguments.json { Output.table(["id", "rev", "seq", "state", "body"], rows, leftAligned: [0, 1, 3, 4]) }
    }

    private func dumpChanges(_ db: Database) throws {
        let changes = try db.changes(since: 0, limit: limit)
        if arguments.json {
            for c in changes {
                Output.json(["seq": number(c.sequence), "id": JSON(c.documentID), "rev": JSON(c.revisionID),
                             "deleted": .bool(c.isDeleted), "conflicted": .bool(c.isConflicted)])
            }
            return
        }
        Output.table(["seq", "id", "rev", "state"], changes.map { c in
            [String(c.sequence), c.documentID, c.revisionID,
             c.isDeleted ? "deleted" : c.isConflicted ? "conflicted" : ""]
        }, leftAligned: [1, 2, 3])
    }

    private func dumpRows(_ view: View) throws {
        var rows: [[String]] = []
        var count = 0
        try view.forEachRow { key, value, id in
            if let limit, count >= limit { return false }
            count += 1
            if arguments.json {
                Output.json(["key": key, "value": value ?? .null, "id": JSON(id)])
            } else {
                rows.append([key.description, (value ?? .null).description, id])
            }
            return true
        }
        if !arguments.json { Output.table(["key", "value", "id"], rows, leftAligned: [0, 1, 2]) }
    }

    private func dumpTree(file: String, name: String, numeric: Bool,
                          _ forEachNode: ((NodeSummary) throws -> Void) throws -> Void) throws {
        func key(_ bytes: [UInt8]) -> String { numeric ? sequenceKey(bytes) : printableKey(bytes) }
        var rows: [[String]] = []
        var count = 0
        try forEachNode { node in
            if let limit, count >= limit { return }
            count += 1
            if arguments.json {
                var object: JSONObject = ["file": JSON(file), "tree": JSON(name), "offset": number(node.offset)]
                object["kind"] = JSON(node.isLeaf ? "leaf" : "inner")
                object["level"] = number(node.level)
                object["entries"] = number(node.entries)
                object["bytes"] = number(node.storedBytes)
                object["rawBytes"] = number(node.rawBytes)
                object["firstKey"] = JSON(key(node.firstKey))
                object["lastKey"] = JSON(key(node.lastKey))
                Output.json(.object(object))
            } else {
                rows.append([String(node.offset), node.isLeaf ? "leaf" : "inner", String(node.level),
                             String(node.entries), String(node.storedBytes), String(node.rawBytes),
                             key(node.firstKey), key(node.lastKey)])
            }
        }
        if !arguments.json {
            Output.line("\(file)/\(name): \(count) nodes, parents before children")
            Output.table(["offset", "kind", "level", "entries", "bytes", "raw", "first key", "last key"], rows,
                         leftAligned: [1, 6, 7])
        }
    }

    /// The newest commit's log records (FORMAT.md §10.1.7), newest first: the changes the by-ID tree does not
    /// hold yet.
    private func dumpLog(_ db: Database) throws {
        let records = try db.logRecords()
        if arguments.json {
            for r in records {
                Output.json(["file": "docs", "log": "record", "offset": number(r.offset),
                             "previous": number(r.previous), "entries": number(r.entries),
                             "bytes": number(r.storedBytes),
                             "firstKey": JSON(printableKey(r.firstID)),
                             "lastKey": JSON(printableKey(r.lastID))])
            }
            return
        }
        guard !records.isEmpty else { return }
        Output.line("docs/log: \(records.count) records of changes not yet in the trees, newest first")
        Output.table(["offset", "previous", "entries", "bytes", "first key", "last key"], records.map { r in
            [String(r.offset), String(r.previous), String(r.entries), String(r.storedBytes),
             printableKey(r.firstID), printableKey(r.lastID)]
        }, leftAligned: [4, 5])
    }

    /// `roots` names the commit's two roots' row counts in the table.
    private func dumpHeaders(_ history: [(header: CommitHeader, lastSequence: UInt64?)], roots names: [String])
        throws {
        if arguments.json {
            for (h, sequence) in history {
                let roots: [JSON] = h.roots.map { root in
                    guard let root else { return .null }
                    return ["offset": number(root.offset), "rows": number(root.rowCount),
                            "bytes": number(root.subtreeSize)]
                }
                var object: JSONObject = ["commit": number(h.commitNumber), "offset": number(h.offset)]
                object["previous"] = number(h.previousHeaderOffset)
                object["end"] = number(h.endOffset)
                object["timestamp"] = number(h.timestamp)
                object["time"] = JSON(isoTime(h.timestamp))
                object["lastSequence"] = sequence.map { number($0) } ?? .null
                object["roots"] = .array(roots)
                Output.json(.object(object))
            }
            return
        }
        Output.table(["commit", "offset", "previous", "end", "time (UTC)", "last seq"] + names,
                     history.map { h, sequence in
                         [String(h.commitNumber), String(h.offset), String(h.previousHeaderOffset),
                          String(h.endOffset), isoTime(h.timestamp), sequence.map { String($0) } ?? "?",
                          rows(h, 0), rows(h, 1)]
                     }, leftAligned: [4])
    }

    private func rows(_ header: CommitHeader, _ index: Int) -> String {
        index < header.roots.count ? String(header.roots[index]?.rowCount ?? 0) : "-"
    }
}

/// Milliseconds since 1970 as `2026-11-22T04:46:22.123Z`.
func isoTime(_ milliseconds: UInt64) -> String {
    var seconds = time_t(milliseconds / 1000)
    var parts = tm()
    gmtime_r(&seconds, &parts)
    func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
    let ms = milliseconds % 1000
    return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):" +
        "\(two(parts.tm_min)):\(two(parts.tm_sec)).\(ms < 10 ? "00" : ms < 100 ? "0" : "")\(ms)Z"
}
