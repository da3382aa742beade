import Sofa

/// Makes a database at `path` with one document and view `custom`, indexed, whose reduce is an app's closure (a
/// sum): a process that knows the view only by its file cannot recompute its reductions, so it must not compact
/// it.
package func makeCustomReduceDatabase(at path: String, options: DatabaseOptions = DatabaseOptions()) throws {
    let db = try Database(path: path, options: options)
    try db.put(["n": 1], id: "a")
    let view = db.view(named: "custom")
    view.setMapReduce(version: "1", map: { doc, emit in emit(doc["n"] ?? nil, 1) },
                      reduce: .custom { _, values, _ in .number(View.totalValues(values)) })
    try view.updateIndex()
    try db.close()
}
