#if canImport(Glibc)
import Glibc
#endif
import SofaStorage
import Synchronization

/// A view: a persistent index of the rows a map function emits from every document, queried by key range,
/// optionally reduced and grouped (Couchbase Lite 1.x's `CBLView`).
///
/// Get one with ``Database/view(named:)``, register its map (and reduce) function every time the app starts,
/// then query it. The index lives in `NAME.sofa/views/NAME` and is brought up to date incrementally before a
/// query (by default) or by ``updateIndex()``. Thread-safe.
///
/// ```swift
/// let view = db.view(named: "phones")
/// view.setMapReduce(version: "2", map: { doc, emit in
///     for phone in doc["phones"]?.arrayValue ?? [] { emit(phone, doc["name"]) }
/// }, reduce: .count)
/// let count = try view.createQuery().run().first?.value   // rows in the index
/// ```
public final class View: @unchecked Sendable {
    /// The view's name (also its index file's name).
    public let name: String
    /// The database the view indexes; a view keeps it open.
    public let database: Database
    let shared: ViewShared

    init(shared: ViewShared, database: Database) {
        self.name = shared.name
        self.shared = shared
        self.database = database
    }

    var indexPath: String { database.path + "/views/" + name }

    // MARK: - Map and reduce

    /// Registers the map function. A `version` different from the one the index was built with discards
    /// the index; it is rebuilt at the next update.
    ///
    /// ```swift
    /// view.setMap(version: "1") { doc, emit in
    ///     if doc["type"] == "person" { emit(doc["name"] ?? nil, doc["phone"]) }
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - version: change it whenever the function's behaviour changes.
    ///   - map: a pure, thread-safe function; see ``MapFunction``.
    public func setMap(version: String, _ map: @escaping MapFunction) {
        register(map: map, reduce: nil, version: version, definition: nil)
    }

    /// Registers a map and a reduce function under one version (see ``setMap(version:_:)``).
    ///
    /// ```swift
    /// view.setMapReduce(version: "1", map: { doc, emit in emit(doc["date"] ?? nil, doc["total"]) }, reduce: .sum)
    /// ```
    ///
    /// - Parameters:
    ///   - version: change it whenever either function's behaviour changes.
    ///   - map: a pure, thread-safe function.
    ///   - reduce: a built-in or ``Reduce/custom(_:)`` reduce.
    public func setMapReduce(version: String, map: @escaping MapFunction, reduce: Reduce) {
        register(map: map, reduce: reduce, version: version, definition: nil)
    }

    func register(map: MapFunction?, reduce: Reduce?, version: String?, definition: ViewDefinition?) {
        shared.state.withLock { s in
            s.map = map
            s.reduce = reduce
            s.version = version
            s.definition = definition
            if let definition { s.documentType = definition.documentType }
            s.checked = false
        }
    }

    /// Only documents whose `type` property equals this string are passed to the map function (nil: all).
    /// Set it before the first update; changing it later does not re-map documents already indexed.
    public var documentType: String? {
        get { shared.state.withLock { $0.documentType } }
        set { shared.state.withLock { $0.documentType = newValue } }
    }

    /// True when a map function is registered (or the view is declarative).
    public var hasMap: Bool { shared.state.withLock { $0.map != nil } }

    /// The view's reduce, nil for none.
    public var reduce: Reduce? { shared.state.withLock { $0.reduce } }

    /// The declarative definition (``Database/defineView(named:keyPaths:valuePath:reduce:documentType:)``),
    /// nil for a view whose map function is code.
    public var definition: ViewDefinition? { shared.state.withLock { $0.definition } }

    /// The total of the numbers among `values` (others count as 0): what a sum reduce and a count rereduce do.
    ///
    /// ```swift
    /// .custom { _, values, rereduce in rereduce ? .number(View.totalValues(values)) : .number(Double(values.count)) }
    /// ```
    ///
    /// - Parameter values: values or reductions.
    /// - Returns: their numeric total.
    public static func totalValues(_ values: [JSON]) -> Double {
        values.reduce(0) { $0 + ($1.doubleValue ?? 0) }
    }

    // MARK: - Index state

    /// The database sequence the index reflects (0 before the first update).
    public var lastSequenceIndexed: UInt64 { (try? index()?.header.lastSequence) ?? 0 }

    /// True when documents changed after the index was last updated.
    public var isStale: Bool { lastSequenceIndexed < database.lastSequence }

    /// Rows in the index, from the root's stored count: O(1).
    public var totalRows: Int { Int((try? index()?.snapshot().rows.rowCount) ?? 0) }

    /// Brings the index up to date with the database: maps the documents changed since the last update (all
    /// of them the first time), on every core, and commits once.
    ///
    /// ```swift
    /// try view.updateIndex()
    /// assert(!view.isStale)
    /// ```
    ///
    /// - Throws: ``SofaError`` — `.invalidArgument` without a map function or on a closed database;
    ///   `.readOnly`; `.invalidValue` naming the document when a map emits NaN or an unencodable key;
    ///   `.reduceOverflow`; storage errors. Nothing of a failed update becomes visible.
    public func updateIndex() throws {
        try database.checkOpen()
        if database.options.readOnly {
            throw SofaError(.readOnly, "the database was opened read-only; its views cannot be updated",
                            path: database.path)
        }
        try shared.updateLock.withLock { _ in
            let index = try openChecked()!
            let (map, documentType, header) = try shared.state.withLock { s in
                guard let map = s.map else {
                    throw SofaError(.invalidArgument, "view \"\(name)\" has no map function; call setMap first")
                }
                return (map, s.documentType, try index.header)
            }
            let snapshot = try database.documents.committedSnapshot()
            try index.update(to: snapshot, mapper: Mapper(map: map, documentType: documentType, calls: shared.mapCalls),
                             header: header)
        }
    }

    /// Discards the index (its file); the next update rebuilds it. The map and reduce stay registered.
    ///
    /// - Throws: ``SofaError`` — `.readOnly`; `.ioError` when the file cannot be removed.
    public func deleteIndex() throws {
        if database.options.readOnly { throw SofaError(.readOnly, "the database was opened read-only") }
        try shared.updateLock.withLock { _ in
            let index = shared.state.withLock { s -> ViewIndex? in
                defer {
                    s.index = nil
                    s.checked = false
                }
                return s.index
            }
            try index?.close()
            try ViewIndex.removeFile(indexPath, system: database.system)
        }
    }

    /// Deletes the view: its index file and registration. A later ``Database/view(named:)`` makes a new one.
    ///
    /// - Throws: As ``deleteIndex()``.
    public func delete() throws {
        try deleteIndex()
        register(map: nil, reduce: nil, version: nil, definition: nil)
        database.viewRegistry.remove(name)
    }

    /// Checks the index file and returns every problem found (empty when sound): the trees' structure,
    /// checksums, counts and stored reductions, back-index ⇄ rows agreement, every group aggregate equal to a
    /// recomputation from the rows, and for a declarative view that the rows equal a fresh map of every
    /// document up to the last sequence indexed.
    ///
    /// ```swift
    /// let problems = try view.verify()
    /// precondition(problems.isEmpty, "\(problems)")
    /// ```
    ///
    /// - Throws: `.invalidArgument` when the database is closed; errors opening the file.
    public func verify() throws -> [SofaError] {
        guard let index = try index() else { return [] }
        let problems = index.verify()
        guard problems.isEmpty, let definition else { return problems }
        let mapper = Mapper(map: definition.map, documentType: definition.documentType, calls: nil)
        return index.verifyRows(against: try database.documents.committedSnapshot(), mapper: mapper)
    }

    // MARK: - Opening the index

    /// The open index, checked against the registered version; nil when there is none to read (read-only
    /// database without the file).
    func index() throws -> ViewIndex? {
        if let index = shared.state.withLock({ $0.checked ? $0.index : nil }) { return index }
        return try shared.updateLock.withLock { _ in try openChecked() }
    }

    /// Opens the index and resets it when the registered version, reduce or definition differ from the
    /// stored ones, or re-sorts it when ICU's collator version changed. Call with `updateLock` held.
    func openChecked() throws -> ViewIndex? {
        try database.checkOpen()
        let readOnly = database.options.readOnly
        var (index, reduce, version, definition) = shared.state.withLock { s in
            (s.index, s.reduce, s.version, s.definition)
        }
        if index == nil {
            if readOnly && access(indexPath, F_OK) != 0 { return nil }
            if !readOnly { try database.makeViewsDirectory() }
            let storage = StorageOptions(readOnly: readOnly, durability: database.options.durability,
                                         create: !readOnly, nodeCacheBytes: database.options.nodeCacheBytes / 4)
            let opened = try ViewIndex(path: indexPath, options: storage, reduce: reduce, system: database.system)
            index = opened
            // A declarative view found on disk brings its own map and reduce.
            if version == nil, let stored = try ViewDefinition(stored: opened.header.definition) {
                register(map: stored.map, reduce: stored.reduce, version: stored.version, definition: stored)
                (reduce, version, definition) = (stored.reduce, stored.version, stored)
            }
        }
        var header = try index!.header
        // Registered functions are authoritative; without any (a view opened by name only) the stored
        // built-in reduce, if any, stays.
        if version != nil { index!.reduce = reduce }
        if let version, !readOnly {
            let wanted = (version, reduce?.kind ?? 0, definition?.encoded() ?? [])
            if header.mapVersion != wanted.0 || header.reduceKind != wanted.1 || header.definition != wanted.2 {
                let empty = try index!.snapshot().rows.root == nil && header.lastSequence == 0
                if !empty {
                    try index!.close()
                    try ViewIndex.removeFile(indexPath, system: database.system)
                    let storage = StorageOptions(durability: database.options.durability,
                                                 nodeCacheBytes: database.options.nodeCacheBytes / 4)
                    index = try ViewIndex(path: indexPath, options: storage, reduce: reduce, system: database.system)
                }
                header = ViewHeader()
                (header.mapVersion, header.reduceKind, header.definition) = wanted
                let emptyTree = BTree(file: index!.storage, root: nil, configuration: index!.backConfiguration,
                                      limit: StorageFile.unlimited)
                try index!.commit(rows: emptyTree, backIndex: emptyTree, header: header)
            }
        }
        if header.collatorVersion != CollationKey.collatorVersion && !readOnly {
            try index!.resort(header: header)
        }
        let result = index
        shared.state.withLock { s in
            s.index = result
            s.checked = true
        }
        return result
    }
}

/// What every ``View`` object of one name in one database shares: the registered functions, the open index
/// and the writer lock. The database's registry holds it, so a view registered once stays registered; it does
/// not point back at the database, so the registry makes no reference cycle.
final class ViewShared: @unchecked Sendable {
    let name: String

    struct State {
        var map: MapFunction?
        var reduce: Reduce?
        var version: String?
        var documentType: String?
        var definition: ViewDefinition?
        var index: ViewIndex?
        /// The open index matches the registered version (or was reset to it).
        var checked = false
    }
    let state = Lock(State())
    /// Serializes index writers: updates, resets, deletion.
    let updateLock = Lock(0)
    let mapCalls = MapCallCounter()

    init(name: String) { self.name = name }

    /// Closes the index file (the database is closing).
    func close() {
        let index = state.withLock { s -> ViewIndex? in
            defer {
                s.index = nil
                s.checked = false
            }
            return s.index
        }
        try? index?.close()
    }
}
