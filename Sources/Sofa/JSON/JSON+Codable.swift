import OrderedCollections

// MARK: - Between JSON and Swift types

extension JSON {
    /// Decodes a Swift value from this JSON value directly, without going through text.
    ///
    /// ```swift
    /// struct Track: Codable { var title: String; var duration: Int; var year: Int? }
    /// let track = try row.value.decode(Track.self)
    /// ```
    ///
    /// Integers must be whole numbers within the range of the target type (`235.5` is not an `Int`, `300` is not
    /// a `UInt8`); a missing member or `null` decodes as `nil` for an optional property. Dictionaries decode from
    /// objects, arrays from arrays, and `JSON` properties take the value as it is.
    ///
    /// - Parameter type: The type to decode.
    /// - Returns: The decoded value.
    /// - Throws: ``SofaError`` with code ``SofaError/Code/decodingFailed`` naming the coding path where the value
    ///   did not match (`tracks[2].duration: expected Int, found string "235"`). Errors thrown by the type's own
    ///   `init(from:)` that are not `DecodingError`s pass through unchanged.
    public func decode<T: Decodable>(_ type: T.Type) throws -> T {
        do {
            return try JSONValueDecoder.unbox(self, as: T.self, at: [])
        } catch let error as DecodingError {
            throw SofaError(.decodingFailed, "cannot decode \(T.self): \(error.sofaDescription)")
        }
    }

    /// Encodes a Swift value as a JSON value directly, without going through text.
    ///
    /// ```swift
    /// let body = try JSON(encoding: Track(title: "Qux", duration: 235, year: nil))
    /// // {"title":"Qux","duration":235}  (encodeIfPresent leaves out nil properties)
    /// ```
    ///
    /// Members appear in the order the type encodes them (declaration order for synthesized `Codable`). A value
    /// that encodes nothing becomes an empty object.
    ///
    /// - Parameter value: The value to encode.
    /// - Throws: ``SofaError`` with code ``SofaError/Code/invalidValue`` naming the coding path of a value JSON
    ///   cannot hold exactly: an integer that a `Double` cannot represent (beyond ±2^53 and not a multiple of the
    ///   spacing there). Errors thrown by the type's own `encode(to:)` pass through unchanged.
    public init<T: Encodable>(encoding value: T) throws {
        do {
            self = try JSONValueEncoder.box(value, at: []).resolved()
        } catch let error as EncodingError {
            throw SofaError(.invalidValue, "cannot encode \(T.self): \(error.sofaDescription)")
        }
    }
}

// MARK: - JSON as a Codable value

extension JSON: Codable {
    /// Decodes any JSON-shaped value from `decoder`.
    ///
    /// With Sofa's own decoder this takes the value as it is. With other decoders it tries null, boolean, number,
    /// string, array and object in turn; object members come in the order the decoder lists its keys.
    ///
    /// - Parameter decoder: The decoder to read from.
    /// - Throws: `DecodingError.typeMismatch` when the decoder holds none of the JSON kinds.
    public init(from decoder: any Decoder) throws {
        if let own = decoder as? JSONValueDecoder {
            self = own.value
            return
        }
        if let single = try? decoder.singleValueContainer() {
            if single.decodeNil() {
                self = .null
                return
            }
            if let flag = try? single.decode(Bool.self) {
                self = .bool(flag)
                return
            }
            if let number = try? single.decode(Double.self) {
                self = .number(number)
                return
            }
            if let string = try? single.decode(String.self) {
                self = .string(string)
                return
            }
        }
        if var unkeyed = try? decoder.unkeyedContainer() {
            var items: [JSON] = []
            while !unkeyed.isAtEnd { items.append(try unkeyed.decode(JSON.self)) }
            self = .array(items)
            return
        }
        if let keyed = try? decoder.container(keyedBy: JSONCodingKey.self) {
            var members = JSONObject()
            for key in keyed.allKeys { members[key.stringValue] = try keyed.decode(JSON.self, forKey: key) }
            self = .object(members)
            return
        }
        throw DecodingError.typeMismatch(
            JSON.self,
            DecodingError.Context(codingPath: decoder.codingPath, debugDescription: "expected a JSON value"))
    }

    /// Encodes this value into `encoder`: objects as keyed containers (members in stored order), arrays as
    /// unkeyed containers, the rest as single values.
    ///
    /// - Parameter encoder: The encoder to write to.
    /// - Throws: Whatever the encoder throws (some reject NaN and infinities).
    public func encode(to encoder: any Encoder) throws {
        if let own = encoder as? JSONValueEncoder {
            own.store(.value(self))
            return
        }
        switch self {
        case .null:
            var single = encoder.singleValueContainer()
            try single.encodeNil()
        case .bool(let flag):
            var single = encoder.singleValueContainer()
            try single.encode(flag)
        case .number(let number):
            var single = encoder.singleValueContainer()
            try single.encode(number)
        case .string(let string):
            var single = encoder.singleValueContainer()
            try single.encode(string)
        case .array(let items):
            var unkeyed = encoder.unkeyedContainer()
            for item in items { try unkeyed.encode(item) }
        case .object(let members):
            var keyed = encoder.container(keyedBy: JSONCodingKey.self)
            for (key, member) in members { try keyed.encode(member, forKey: JSONCodingKey(key)) }
        }
    }
}

// MARK: - Coding keys and paths

/// A coding key for any object member name or array index.
struct JSONCodingKey: CodingKey, Hashable {
    let stringValue: String
    let intValue: Int?

    init(_ string: String) {
        stringValue = string
        intValue = nil
    }

    init?(stringValue: String) {
        self.init(stringValue)
    }

    init?(intValue: Int) {
        self.init(index: intValue)
    }

    /// The key of an array item, as unkeyed containers put it in the coding path.
    init(index: Int) {
        stringValue = "Index \(index)"
        intValue = index
    }

    /// The key `super`, which `superDecoder()` and `superEncoder()` use.
    static let `super` = JSONCodingKey("super")
}

/// A coding path as a person reads it: `tracks[2].duration`, or `the top level` when empty.
func describeCodingPath(_ path: [any CodingKey]) -> String {
    guard !path.isEmpty else { return "the top level" }
    var text = ""
    for key in path {
        if let own = key as? JSONCodingKey, let index = own.intValue {
            text += "[\(index)]"
        } else {
            if !text.isEmpty { text += "." }
            text += key.stringValue
        }
    }
    return text
}

extension DecodingError {
    /// `path: what went wrong`, for ``SofaError`` messages.
    var sofaDescription: String {
        switch self {
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
            return "\(describeCodingPath(context.codingPath)): \(context.debugDescription)"
        case .keyNotFound(let key, let context):
            return "\(describeCodingPath(context.codingPath + [key])): \(context.debugDescription)"
        @unknown default:
            return "\(self)"
        }
    }
}

extension EncodingError {
    /// `path: what went wrong`, for ``SofaError`` messages.
    var sofaDescription: String {
        switch self {
        case .invalidValue(_, let context):
            return "\(describeCodingPath(context.codingPath)): \(context.debugDescription)"
        @unknown default:
            return "\(self)"
        }
    }
}
