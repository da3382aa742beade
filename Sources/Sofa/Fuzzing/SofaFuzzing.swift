#if canImport(Glibc)
import Glibc
#endif
@_spi(Fuzzing) import SofaStorage

/// Entry points for the libFuzzer targets of the `Fuzz/` package and for the test that replays their fixtures
/// (`FuzzFixtureReplayTests`): each takes arbitrary bytes and must return or throw a ``SofaError``, never trap.
///
/// `@_spi(Fuzzing) public` for the same reason as ``StorageFuzzing``: the fuzz targets are a package of their
/// own, and the SPI keeps these out of the API that `import Sofa` shows.
@_spi(Fuzzing) public enum SofaFuzzing {
    /// Target (a): ``openDatabase(_:directory:)`` on the input as it is, then on a copy whose checksums are
    /// recomputed (``StorageFuzzing/repairingChecksums(_:)``), so that the decoders behind the CRC are fuzzed too.
    ///
    /// - Returns: a number that depends on everything read.
    /// - Throws: the first ``SofaError`` when neither copy is a readable Sofa file.
    public static func openFile(_ bytes: [UInt8], directory: String) throws -> Int {
        var firstError: SofaError?
        var total = 0
        var opened = false
        let repaired = StorageFuzzing.repairingChecksums(bytes)
        for input in repaired == bytes ? [bytes] : [bytes, repaired] {
            do {
                total &+= try openDatabase(input, directory: directory)
                opened = true
            } catch let error as SofaError {
                firstError = firstError ?? error
            }
        }
        if !opened, let firstError { throw firstError }
        return total
    }

    /// Target (a) at the database level: the bytes become the document file `docs` of a database directory,
    /// which is opened read-only, verified, queried for all documents (by ID and by sequence) and read
    /// document by document. The storage level (``StorageFuzzing/openAndVerify(_:directory:)``) runs first.
    ///
    /// - Returns: a number that depends on everything read.
    /// - Throws: ``SofaError`` when the bytes are not a readable Sofa file.
    public static func openDatabase(_ bytes: [UInt8], directory: String) throws -> Int {
        var total = 0
        var storageOpened = false
        do {
            total = try StorageFuzzing.openAndVerify(bytes, directory: directory)
            storageOpened = true
        } catch let error as SofaError where error.code == .corruption || error.code == .unsupportedFormat {
            // The database level reports the same error; keep going so both levels see every input.
        }
        let path = directory + "/fuzz-\(getpid())-\(UInt(bitPattern: Int(bitPattern: pthread_self()))).sofa"
        guard mkdir(path, 0o755) == 0 || errno == EEXIST else {
            throw SofaError(.ioError, "cannot create the fuzz database directory", path: path)
        }
        defer {
            unlink(path + "/docs")
            rmdir(path)
        }
        try write(bytes, to: path + "/docs")
        let db: Database
        do {
            db = try Database(path: path, options: DatabaseOptions(readOnly: true, nodeCacheBytes: 1 << 20))
        } catch let error as SofaError where error.code == .unsupportedFormat && storageOpened {
            return total  // a sound storage file of another kind (a bare tree file): the storage level read it all
        }
        defer { try? db.close() }
        total &+= try db.verify().count
        var query = db.createAllDocumentsQuery()
        for mode in [AllDocsMode.includeDeleted, .bySequence, .onlyConflicts] {
            query.allDocsMode = mode
            for row in try query.run() {
                total &+= row.sequenceNumber.hashValue & 1
                if let id = row.documentID, let doc = try db.document(id: id, includeDeleted: true) {
                    total &+= doc.properties.hashValue & 1
                }
            }
        }
        return total
    }

    /// Target (c): parses `bytes` as JSON; what parses is serialized and parsed again, and must come back equal.
    ///
    /// - Returns: the serialized length.
    /// - Throws: ``SofaError`` (`.invalidJSON`, `.invalidValue`) when the bytes are not JSON Sofa accepts.
    public static func parseJSON(_ bytes: [UInt8]) throws -> Int {
        let value = try JSON(parsing: bytes)
        let text = try value.serialized()
        let again = try JSON(parsing: text)
        precondition(again == value, "JSON does not round-trip: \(text)")
        return text.utf8.count
    }

    /// Target (d): validates `bytes` as a collation key and walks them as a row key (key + doc ID) would be
    /// walked: value extents, group prefixes at levels 1–3, scalars.
    ///
    /// - Returns: a number that depends on everything decoded.
    /// - Throws: ``SofaError`` (`.invalidCollationKey`) when the bytes are malformed.
    public static func decodeCollationKey(_ bytes: [UInt8]) throws -> Int {
        var total = 0
        var lastError: SofaError?
        func attempt(_ body: () throws -> Int) {
            do { total &+= try body() } catch let error as SofaError { lastError = error } catch {
                preconditionFailure("collation decoding threw a non-Sofa error: \(error)")
            }
        }
        attempt { try CollationKey(validating: bytes).bytes.count }
        attempt { try CollationKey.elementEnd(in: bytes, from: 0) }
        for level in 1...3 { attempt { try CollationKey.groupPrefixLength(bytes, level: level) } }
        attempt { try bytes.withUnsafeBytes { try CollationKey.decodeScalar($0, at: 0) }.hashValue & 1 }
        if let key = try? CollationKey(validating: bytes) {
            // A valid key sorts equal to itself and its description never traps.
            precondition(CollationKey.compare(key.bytes, key.bytes) == 0, "a key does not equal itself")
            total &+= key.description.utf8.count
        }
        if total == 0, let lastError { throw lastError }
        return total
    }

    private static func write(_ bytes: [UInt8], to path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard fd >= 0 else { throw SofaError(.ioError, "cannot create the fuzz input file", path: path) }
        defer { close(fd) }
        let written = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        guard written == bytes.count else { throw SofaError(.ioError, "cannot write the fuzz input file", path: path) }
    }
}
