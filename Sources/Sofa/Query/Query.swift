/// Which documents an all-documents query returns, and how (Couchbase Lite's `allDocsMode`). Not flags:
/// choose one.
public enum AllDocsMode: Sendable, Hashable {
    /// Non-deleted documents, by ID (the default).
    case allDocs
    /// Deleted documents too; their rows' value has `"deleted": true`.
    case includeDeleted
    /// Like ``allDocs``, with each row's ``QueryRow/conflictingRevisions`` filled in for conflicted documents.
    case showConflicts
    /// Like ``showConflicts``, but only conflicted documents.
    case onlyConflicts
    /// Non-deleted documents in sequence order (the order they last changed); the row key is the sequence
    /// number, and `startKey`/`endKey`/`keys` are sequence numbers.
    case bySequence
}

/// A query: which rows to read from an index, in what order, how many. A value type — configure a copy,
/// run it as often as you like.
///
/// All-documents queries (``Database/createAllDocumentsQuery()``) read an imaginary index with one row per
/// document whose key is the document ID, compared as raw UTF-8 bytes.
///
/// ```swift
/// var query = db.createAllDocumentsQuery()
/// query.startKey = "track-"
/// query.endKey = "track-"
/// query.prefixMatchLevel = 1     // every ID starting with "track-"
/// query.limit = 20
/// for row in try query.run() { print(row.documentID!, row.value!) }
/// ```
public struct Query: Sendable {
    /// What a query reads.
    package enum Source: Sendable {
        case allDocuments
        case view(View)
    }

    /// The database the query reads.
    public let database: Database
    package let source: Source

    /// The first key to return (the last when ``descending``); nil starts at the beginning.
    public var startKey: JSON?
    /// The last key to return (the first when ``descending``); nil runs to the end.
    public var endKey: JSON?
    /// Whether a row whose key equals ``startKey`` is returned.
    public var inclusiveStart = true
    /// Whether a row whose key equals ``endKey`` is returned.
    public var inclusiveEnd = true
    /// Return rows from the highest key down. ``startKey`` is then the high end and ``endKey`` the low end.
    public var descending = false
    /// At most this many rows (after ``skip`` and ``postFilter``); nil for no limit.
    public var limit: Int?
    /// Leave out this many rows first (counted after ``postFilter``).
    public var skip = 0
    /// Only rows with these keys; ``startKey`` and ``endKey`` are then ignored. All-documents queries return
    /// them in the order given (reversed when ``descending``), one row per listed key that names a document
    /// the mode includes. View queries return every row whose key equals one of them, in ascending key order
    /// (reversed when ``descending``), each key once however often it is listed.
    public var keys: [JSON]?
    /// When non-zero, the end key (the start key when ``descending``) matches as a prefix: with 1, an
    /// end key `"foo"` also matches `"foolish"` but not `"fong"`, and `[1]` matches `[1, "x"]`; with 2 the
    /// last item of an array end key is the prefix (`[1, "x"]` matches `[1, "xtc"]`), and so on. (For document
    /// IDs every level above 0 means the same; ``AllDocsMode/bySequence`` keys are numbers and ignore it.)
    public var prefixMatchLevel = 0
    /// Which documents an all-documents query returns; ignored by other queries.
    public var allDocsMode: AllDocsMode = .allDocs
    /// A test every row must pass; ``skip`` and ``limit`` count only rows that pass.
    public var postFilter: (@Sendable (QueryRow) -> Bool)?
    /// With several rows under ``startKey``, start at those of this document (view queries).
    public var startKeyDocID: String?
    /// With several rows under ``endKey``, end at those of this document (view queries).
    public var endKeyDocID: String?
    /// Return the index rows even when the view has a reduce function.
    public var mapOnly = false
    /// When positive, rows are grouped: array keys by their first `groupLevel` items, other keys by equality,
    /// each group reduced to one row (view queries).
    public var groupLevel = 0
    /// Whether the view's index is brought up to date before the query runs (default ``IndexUpdateMode/before``).
    public var indexUpdateMode: IndexUpdateMode = .before
    /// Sort the output rows by these, first descriptor first, before ``skip`` and ``limit`` apply.
    public var sortDescriptors: [QuerySortDescriptor] = []

    package init(database: Database, source: Source) {
        self.database = database
        self.source = source
    }

    /// Runs the query against the newest commit (or, inside a batch on the batch's thread, its writes).
    ///
    /// ```swift
    /// let rows = try query.run()
    /// print(rows.count, rows.totalRows, rows.sequenceNumber)
    /// ```
    ///
    /// - Returns: the rows, with the database's last sequence at the time.
    /// - Throws: ``SofaError`` — `.invalidArgument` for a negative ``skip`` or ``limit`` or a key of the
    ///   wrong type (all-documents keys are strings; sequence numbers for ``AllDocsMode/bySequence``); storage
    ///   errors.
    public func run() throws -> QueryEnumerator {
        try checkArguments()
        switch source {
        case .allDocuments:
            if sortDescriptors.isEmpty { return try runAllDocuments() }
            var unlimited = self
            (unlimited.skip, unlimited.limit) = (0, nil)
            let all = try unlimited.runAllDocuments()
            return all.replacingRows(Query.page(Query.sorted(all.rows, by: sortDescriptors), skip: skip, limit: limit))
        case .view(let view): return try runView(view)
        }
    }

    /// Runs the query and calls `body` with each row, in order, as it is read, instead of returning a result.
    ///
    /// An all-documents query then reads the by-ID tree one leaf at a time and hands out each row while its
    /// leaf is at hand: nothing is kept for the rows already seen, and every row is read once (``run()``
    /// scans first, keeping a reference per row and every leaf, and decodes the rows again as they are
    /// iterated). The rows are those ``run()`` returns, from one snapshot: writes made meanwhile, by `body` or
    /// another thread, are not seen. A row may be kept after `body` returns; it holds its leaf alive. View
    /// queries and sorted queries need all their rows first: they run as by ``run()``, then hand out the rows.
    ///
    /// ```swift
    /// var ids: [String] = []
    /// try db.createAllDocumentsQuery().forEachRow { row in ids.append(row.documentID!) }
    /// ```
    ///
    /// - Parameter body: called once per row; an error it throws stops the scan and is rethrown.
    /// - Throws: what ``run()`` throws, or what `body` throws.
    public func forEachRow(_ body: (QueryRow) throws -> Void) throws {
        if case .allDocuments = source, sortDescriptors.isEmpty {
            try checkArguments()
            return try forEachAllDocumentsRow(body)
        }
        for row in try run() { try body(row) }
    }

    private func checkArguments() throws {
        if skip < 0 { throw SofaError(.invalidArgument, "skip must not be negative") }
        if let limit, limit < 0 { throw SofaError(.invalidArgument, "limit must not be negative") }
        if prefixMatchLevel < 0 { throw SofaError(.invalidArgument, "prefixMatchLevel must not be negative") }
        if groupLevel < 0 { throw SofaError(.invalidArgument, "groupLevel must not be negative") }
    }
}

extension Database {
    /// A query over every document by ID: an imaginary index with one row per document, keyed by ID.
    ///
    /// ```swift
    /// var query = db.createAllDocumentsQuery()
    /// query.allDocsMode = .onlyConflicts
    /// for row in try query.run() { print(row.documentID!, row.conflictingRevisions) }
    /// ```
    public func createAllDocumentsQuery() -> Query {
        Query(database: self, source: .allDocuments)
    }
}
