/// A storage engine under comparison, driven at the engine level: pre-encoded byte keys
/// (``KeyEncoding``), identical for every engine, each with a `UInt32` value (a duration).
///
/// One instance is one open database in `directory`. The runner creates it on an empty directory, calls
/// ``build(rows:)`` once (W1), then the read workloads, ``update(_:)`` (W6), ``close()``, and for W7 makes a
/// new instance on the same directory and queries it. Every method runs on one thread.
///
/// Reads visit rows through a closure instead of returning arrays, so that no engine pays for allocating
/// result arrays the others might avoid; the key pointer is valid only during the call of `visit`.
///
/// To add an engine: write a type conforming to this protocol in its own file, named after it
/// (`SofaEngine.swift`), and list it in ``EngineRegistry/all``.
protocol Engine: AnyObject {
    /// The lowercase name used on the command line and in reports, e.g. `"lmdb"`.
    static var name: String { get }

    /// A one-line description of the configuration measured (version, durability and cache settings),
    /// printed with the results.
    static var configuration: String { get }

    /// Opens the database in `directory`, creating it if the directory is empty. The directory exists.
    /// W7 times this initializer on an existing database.
    init(directory: String) throws

    /// W1: inserts every row of `rows`, in the order given (doc order, random with respect to key order),
    /// in one transaction, and commits it durably: when this returns the rows survive a power cut.
    func build(rows: RowSet) throws

    /// W2: visits up to `limit` rows in ascending key order, starting at the first key `>=` `startKey`,
    /// all from one read snapshot taken for this call.
    func range(from startKey: UnsafeRawBufferPointer, limit: Int,
               _ visit: (_ key: UnsafeRawBufferPointer, _ value: UInt32) -> Void) throws

    /// W3: visits every row in ascending key order from one read snapshot.
    func scan(_ visit: (_ key: UnsafeRawBufferPointer, _ value: UInt32) -> Void) throws

    /// W4: the number of rows with `low <= key <= high` (both inclusive, `memcmp` order) and the sum of
    /// their values, from one read snapshot.
    func rangeReduce(low: UnsafeRawBufferPointer, high: UnsafeRawBufferPointer) throws -> (count: Int, sum: Int)

    /// W5: the number of rows in the index, from one read snapshot.
    func countAll() throws -> Int

    /// W6: for each row of `changes`, whose key is already in the index, replaces that row by one with the
    /// same key and the new value, all in one transaction committed durably. Peers delete the old row and
    /// insert the new one, as a view update must when a document's key changes.
    func update(_ changes: RowSet) throws

    /// Releases everything the instance holds (snapshots, statements, maps, file handles). Called once;
    /// the instance is not used afterwards.
    func close() throws

    /// The paths of every file the engine keeps in its directory, the main data file first (reported alone
    /// as W1's "main file"), for the size on disk and for evicting them from the page cache before the cold W7.
    var filesOnDisk: [String] { get }
}

/// The engines the runner knows, in report order.
enum EngineRegistry {
    /// Every engine that exists; Sofa first, so the ratio columns are Sofa over each peer.
    static var all: [any Engine.Type] { [SofaEngine.self, LMDBEngine.self, SQLiteEngine.self] }

    /// The engine named `name`, if there is one.
    static func engine(named name: String) -> (any Engine.Type)? {
        all.first { $0.name == name }
    }

    /// The name of the engine whose figures are the numerator of the ratios.
    static let subject = "sofa"

    /// The engines Sofa is compared with, as ratio denominators.
    static let peers = ["lmdb", "sqlite"]
}
