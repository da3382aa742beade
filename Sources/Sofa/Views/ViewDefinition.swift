import SofaStorage

/// A declarative view: rows made from key paths instead of code, stored in the index file so the view works
/// after a restart and from the `sofa` tool without the app.
///
/// One key path makes a scalar key, several an array key; paths are dot-separated (`"album.title"` reads
/// `doc["album"]["title"]`). A document emits one row when every key path is present in it; the value is the
/// value path's value (none when nil or missing).
///
/// ```swift
/// let view = try db.defineView(named: "byHierarchy", keyPaths: ["genre", "artist", "album", "title"],
///                              valuePath: "duration", reduce: .sum, documentType: "track")
/// ```
public struct ViewDefinition: Sendable, Equatable {
    /// The paths whose values make the key.
    public var keyPaths: [String]
    /// The path of the value, nil for none.
    public var valuePath: String?
    /// The built-in reduce's name (`count`, `sum`, `stats`), nil for none.
    public var reduceName: String?
    /// Only documents whose `type` equals this are indexed (nil: all).
    public var documentType: String?

    /// A definition; see the type's description.
    ///
    /// - Throws: `.invalidArgument` for no key path, an empty path or a reduce that is not built in.
    public init(keyPaths: [String], valuePath: String? = nil, reduce: Reduce? = nil,
                documentType: String? = nil) throws {
        guard !keyPaths.isEmpty, !keyPaths.contains(where: \.isEmpty), valuePath?.isEmpty != true else {
            throw SofaError(.invalidArgument, "a declarative view needs at least one key path, none empty")
        }
        if case .custom = reduce {
            throw SofaError(.invalidArgument, "a declarative view's reduce must be built in: count, sum or stats")
        }
        self.keyPaths = keyPaths
        self.valuePath = valuePath
        self.reduceName = reduce?.name
        self.documentType = documentType
    }

    /// The built-in reduce.
    var reduce: Reduce? { reduceName.flatMap(Reduce.builtIn(named:)) }

    /// The definition as JSON (what the index header stores, packed).
    public var json: JSON {
        var members: JSONObject = ["keyPaths": .array(keyPaths.map { .string($0) })]
        if let valuePath { members["valuePath"] = .string(valuePath) }
        if let reduceName { members["reduce"] = .string(reduceName) }
        if let documentType { members["documentType"] = .string(documentType) }
        return .object(members)
    }

    func encoded() -> [UInt8] { PackedJSON.encode(json) }

    /// The version string recorded for the definition: any change of definition resets the index.
    var version: String { "definition:" + ((try? json.serialized()) ?? "") }

    /// The definition stored in a header, nil when there is none.
    init?(stored bytes: [UInt8]) throws {
        guard !bytes.isEmpty else { return nil }
        guard let json = try PackedJSON.decode(bytes),
              let paths = json["keyPaths"]?.arrayValue?.compactMap(\.stringValue), !paths.isEmpty else {
            throw SofaError(.corruption, "a view index's stored definition is malformed")
        }
        keyPaths = paths
        valuePath = json["valuePath"]?.stringValue
        reduceName = json["reduce"]?.stringValue
        documentType = json["documentType"]?.stringValue
        if reduceName != nil && reduce == nil {
            throw SofaError(.unsupportedFormat, "a view definition names reduce \"\(reduceName!)\", unknown here")
        }
    }

    /// The value at a dot-separated path of `document`.
    static func value(at path: String, in document: JSON) -> JSON? {
        var current = document
        for part in path.split(separator: ".", omittingEmptySubsequences: false) {
            guard let next = current[String(part)] else { return nil }
            current = next
        }
        return current
    }

    /// The map function the definition stands for.
    var map: MapFunction {
        let keyPaths = keyPaths, valuePath = valuePath
        return { doc, emit in
            var items: [JSON] = []
            items.reserveCapacity(keyPaths.count)
            for path in keyPaths {
                guard let item = ViewDefinition.value(at: path, in: doc) else { return }
                items.append(item)
            }
            let value = valuePath.flatMap { ViewDefinition.value(at: $0, in: doc) }
            emit(items.count == 1 ? items[0] : .array(items), value)
        }
    }
}
