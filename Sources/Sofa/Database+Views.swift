#if canImport(Glibc)
import Glibc
#endif
import SofaStorage
import Synchronization

/// The views a database has handed out: one shared state per name.
final class ViewRegistry: Sendable {
    private let views = Lock<[String: ViewShared]>([:])

    func view(_ name: String, database: Database) -> View {
        let shared = views.withLock { v in
            if let shared = v[name] { return shared }
            let shared = ViewShared(name: name)
            v[name] = shared
            return shared
        }
        return View(shared: shared, database: database)
    }

    func registered(_ name: String, database: Database) -> View? {
        views.withLock { $0[name] }.map { View(shared: $0, database: database) }
    }

    var names: [String] { views.withLock { Array($0.keys) } }

    func remove(_ name: String) { _ = views.withLock { $0.removeValue(forKey: name) } }

    /// Closes every view's index file.
    func closeAll() {
        for view in views.withLock({ Array($0.values) }) { view.close() }
    }
}

extension Database {
    /// The view named `name`, created (without a map function yet) when there is none.
    ///
    /// ```swift
    /// let view = db.view(named: "byDate")
    /// view.setMap(version: "1") { doc, emit in emit(doc["date"] ?? nil, nil) }
    /// ```
    ///
    /// - Parameter name: the view's name: not empty, no `/`, not starting with `.`.
    /// - Returns: a view sharing its registered functions and index with every other for this name.
    public func view(named name: String) -> View {
        precondition(Database.isValidViewName(name), "invalid view name \"\(name)\": not empty, no '/', no leading '.'")
        return viewRegistry.view(name, database: self)
    }

    /// The view named `name` if it exists: registered in this process, or with an index file on disk (a
    /// declarative view then comes with its map and reduce).
    ///
    /// - Parameter name: the view's name.
    /// - Returns: the view, or nil.
    public func existingView(named name: String) -> View? {
        guard Database.isValidViewName(name) else { return nil }
        if let view = viewRegistry.registered(name, database: self), view.hasMap { return view }
        guard access(path + "/views/" + name, F_OK) == 0 else { return nil }
        let view = self.view(named: name)
        _ = try? view.index()
        return view
    }

    /// The names of the views with an index file or registered in this process, sorted.
    ///
    /// - Throws: ``SofaError`` (`.ioError`) when the views directory exists but cannot be listed: verify and
    ///   compaction walk this list, so a view must not silently drop out of it.
    public var viewNames: [String] {
        get throws {
            var names = Set(viewRegistry.names.filter { viewRegistry.registered($0, database: self)?.hasMap == true })
            let directory = path + "/views"
            do {
                names.formUnion(try system.contentsOfDirectory(directory).filter(Database.isValidViewName))
            } catch where error.errno == ENOENT {
                // No views directory yet: only the registered views.
            } catch {
                throw StorageFile.error(error, path: directory)
            }
            return names.sorted()
        }
    }

    /// Defines (or redefines) a declarative view and stores its definition in its index file, so that it
    /// works after a restart and from the `sofa` tool without app code.
    ///
    /// ```swift
    /// let view = try db.defineView(named: "byHierarchy", keyPaths: ["genre", "artist", "album", "title"],
    ///                              valuePath: "duration", reduce: .sum, documentType: "track")
    /// ```
    ///
    /// - Parameters:
    ///   - name: the view's name.
    ///   - keyPaths: one path (a scalar key) or several (an array key), dot-separated into nested objects.
    ///   - valuePath: the value's path, nil for none.
    ///   - reduce: `.count`, `.sum`, `.stats` or nil.
    ///   - documentType: only documents whose `type` equals it, nil for all.
    /// - Returns: the view.
    /// - Throws: `.invalidArgument` for a bad name or definition; `.readOnly`; storage errors.
    @discardableResult
    public func defineView(named name: String, keyPaths: [String], valuePath: String? = nil, reduce: Reduce? = nil,
                           documentType: String? = nil) throws -> View {
        guard Database.isValidViewName(name) else {
            throw SofaError(.invalidArgument, "invalid view name \"\(name)\": not empty, no '/', no leading '.'")
        }
        if options.readOnly { throw SofaError(.readOnly, "the database was opened read-only", path: path) }
        let definition = try ViewDefinition(keyPaths: keyPaths, valuePath: valuePath, reduce: reduce,
                                            documentType: documentType)
        let view = self.view(named: name)
        view.register(map: definition.map, reduce: definition.reduce, version: definition.version,
                      definition: definition)
        _ = try view.index()
        return view
    }

    static func isValidViewName(_ name: String) -> Bool {
        !name.isEmpty && !name.contains("/") && !name.hasPrefix(".") && !name.utf8.contains(0)
    }

    /// Creates `NAME.sofa/views` when missing, and makes its name durable: the database directory is fsynced
    /// once per handle, also when the directory already exists (a previous call may have made it and then
    /// failed to sync).
    func makeViewsDirectory() throws {
        let dir = path + "/views"
        do {
            do {
                try system.mkdir(dir, mode: 0o755)
            } catch where error.errno == EEXIST {
                if viewsDirectorySynced.load(ordering: .acquiring) { return }
            }
            try system.fsyncDirectory(path)
            viewsDirectorySynced.store(true, ordering: .releasing)
        } catch {
            throw StorageFile.error(error, path: dir)
        }
    }
}
