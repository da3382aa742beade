/// The one error type Sofa throws.
///
/// Callers match on ``code``; ``message`` says what went wrong and what to do, and names the file and byte
/// offset when the error concerns stored or parsed bytes.
///
/// ```swift
/// do { try db.put(body, id: "a", rev: staleRev) }
/// catch let error as SofaError where error.code == .conflict { … }
/// ```
public struct SofaError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of failure this is.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// The code's name, stable across releases.
        public let rawValue: String
        /// A code from its name.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The code's name.
        public var description: String { rawValue }

        /// Text that is not valid JSON (RFC 8259): the message names the byte offset and what was expected.
        public static let invalidJSON = Code(rawValue: "invalidJSON")
        /// A value that cannot be used where it was given: NaN or infinity as a key or in serialized JSON,
        /// nesting deeper than the limit, a key that cannot be encoded.
        public static let invalidValue = Code(rawValue: "invalidValue")
        /// Bytes that should be a collation key but are not.
        public static let invalidCollationKey = Code(rawValue: "invalidCollationKey")
        /// A JSON value that does not match the `Decodable` type it was decoded into.
        public static let decodingFailed = Code(rawValue: "decodingFailed")

        /// Stored bytes that fail their checksum or do not decode: the message names the file and offset.
        /// Nothing read from a corrupt region is returned as data.
        public static let corruption = Code(rawValue: "corruption")
        /// A system call failed (the message carries `errno`'s text). After a failed `fsync` or commit write
        /// the handle refuses further writes (``writesRefused``) until it is reopened.
        public static let ioError = Code(rawValue: "ioError")
        /// The disk is full (`ENOSPC`). The last commit is intact; writes work again once space is freed.
        public static let diskFull = Code(rawValue: "diskFull")
        /// Another writer holds the file's lock. Open it `readOnly`, or close the other writer.
        public static let locked = Code(rawValue: "locked")
        /// A write was attempted on a handle opened read-only.
        public static let readOnly = Code(rawValue: "readOnly")
        /// An earlier `fsync` or commit write failed, so this handle no longer writes; reopen the file.
        public static let writesRefused = Code(rawValue: "writesRefused")
        /// A file or directory that should exist does not.
        public static let notFound = Code(rawValue: "notFound")
        /// The file is not a Sofa file, or is of a format version or kind this build does not read.
        public static let unsupportedFormat = Code(rawValue: "unsupportedFormat")
        /// An argument that breaks an API rule (unsorted batch, oversized key, closed handle…).
        public static let invalidArgument = Code(rawValue: "invalidArgument")
    }

    /// What kind of failure this is.
    public let code: Code
    /// A sentence for a person: what was wrong, and where.
    public let message: String
    /// The file concerned, when there is one.
    public let path: String?
    /// The byte offset concerned (in the file, or in the parsed text), when there is one.
    public let offset: Int?

    /// An error with its code, message and optional location.
    public init(_ code: Code, _ message: String, path: String? = nil, offset: Int? = nil) {
        self.code = code
        self.message = message
        self.path = path
        self.offset = offset
    }

    /// `code: message (path at offset N)`.
    public var description: String {
        var text = "\(code): \(message)"
        switch (path, offset) {
        case let (p?, o?): text += " (\(p) at offset \(o))"
        case let (p?, nil): text += " (\(p))"
        case let (nil, o?): text += " (at offset \(o))"
        case (nil, nil): break
        }
        return text
    }
}
