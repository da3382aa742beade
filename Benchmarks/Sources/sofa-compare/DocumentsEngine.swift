import Sofa

/// A document store under comparison in the documents suite (`--suite docs`, workloads D1–D5): Sofa's
/// ``Database`` and SQLite used as a Swift developer would use it to keep JSON documents.
///
/// Every engine gets the same input, the documents parsed from gen.py's docs.jsonl into ``JSON`` objects
/// outside the timed regions (``DocumentSet``); each engine serializes them itself inside the timed region
/// (Sofa's `put` does; the SQLite engine calls the same serializer, ``JSON/serializedBytes()``), and reads
/// answer parsed bodies, so both sides do the same work a program storing and reading documents does.
///
/// One instance is one open database in `directory`, which exists and is empty when it is made. Every method
/// runs on one thread. To add an engine: conform to this protocol in a file named after the type and list it
/// in ``DocumentsEngineRegistry/all``.
protocol DocumentsEngine: AnyObject {
    /// The lowercase name used on the command line and in reports.
    static var name: String { get }

    /// A one-line description of the configuration measured.
    static var configuration: String { get }

    /// Opens (creating) the database in `directory`.
    init(directory: String) throws

    /// D1: stores `documents` (new IDs) in one durable commit.
    func putBatch(_ documents: ArraySlice<BenchDocument>) throws

    /// D2: stores one new document in a durable commit of its own.
    func putOne(_ document: BenchDocument) throws

    /// D3: the body of document `id`, parsed, or nil when there is none.
    func body(id: String) throws -> JSON?

    /// D4: visits every document in ascending ID (byte) order, from one read snapshot, with its ID; the body
    /// is available at no more than the cost of asking (the engine holds it, undecoded).
    func scanIDs(_ visit: (_ id: String) -> Void) throws

    /// D4: visits every document in ascending ID order with its ID and parsed body.
    func scanBodies(_ visit: (_ id: String, _ body: JSON) -> Void) throws

    /// D5: makes the files on disk what a reopened database would find, without rewriting the data (SQLite
    /// checkpoints and truncates its WAL); nothing for an engine that keeps no log beside its file.
    func settle() throws

    /// Releases everything; the instance is not used afterwards.
    func close() throws

    /// Every file the engine keeps, the main file first.
    var filesOnDisk: [String] { get }
}

/// The documents-suite engines, in report order: Sofa first, so the ratio column is Sofa over SQLite.
enum DocumentsEngineRegistry {
    static var all: [any DocumentsEngine.Type] { [SofaDocumentsEngine.self, SQLiteDocumentsEngine.self] }

    /// The engine named `name`, if there is one.
    static func engine(named name: String) -> (any DocumentsEngine.Type)? {
        all.first { $0.name == name }
    }
}

/// One document of the input: its ID and its body without `_id`.
struct BenchDocument {
    let id: String
    let body: JSON
}

/// The documents of gen.py's docs.jsonl, parsed: the same values for every engine.
struct DocumentSet {
    let documents: [BenchDocument]

    /// Parses the first `limit` lines of `path` (one JSON object with a string `_id` per line), dropping `_id`
    /// from the body.
    /// - Throws: ``CompareError`` naming the line that is not such an object.
    static func load(from path: String, limit: Int) throws -> DocumentSet {
        let file = try readFile(path)
        var documents: [BenchDocument] = []
        try file.withUnsafeBytes { bytes in
            var start = 0
            var line = 1
            for i in 0 ..< bytes.count where bytes[i] == UInt8(ascii: "\n") && documents.count < limit {
                var object: JSON
                do {
                    object = try JSON(parsing: UnsafeRawBufferPointer(rebasing: bytes[start ..< i]))
                } catch {
                    throw CompareError("\(path) line \(line): \(error)")
                }
                guard let id = object["_id"]?.stringValue else {
                    throw CompareError("\(path) line \(line): not an object with a string _id")
                }
                object["_id"] = nil
                documents.append(BenchDocument(id: id, body: object))
                start = i + 1
                line += 1
            }
        }
        return DocumentSet(documents: documents)
    }
}
