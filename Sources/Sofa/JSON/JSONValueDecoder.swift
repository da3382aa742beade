/// A `Decoder` that reads a `JSON` value directly, without text and without Foundation.
///
/// It is also its own single-value container. Errors are `DecodingError`s carrying the coding path, so types
/// with hand-written `init(from:)` can catch them as usual; ``JSON/decode(_:)`` turns them into ``SofaError``.
///
/// Numbers decode into any integer type only when whole and in range; into `Float` when within its range (the
/// nearest `Float` is taken). Nothing is coerced between kinds: `"235"` is not an `Int`, `1` is not a `Bool`.
struct JSONValueDecoder: Decoder, SingleValueDecodingContainer {
    /// The value this decoder reads.
    let value: JSON
    /// The keys from the top-level value down to ``value``.
    let codingPath: [any CodingKey]
    /// Always empty: ``JSON/decode(_:)`` takes no options.
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(value: JSON, codingPath: [any CodingKey]) {
        self.value = value
        self.codingPath = codingPath
    }

    // MARK: Decoder

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let members) = value else {
            throw Self.mismatch(JSONObject.self, expected: "an object", found: value, at: codingPath)
        }
        return KeyedDecodingContainer(JSONKeyedDecodingContainer<Key>(members: members, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let items) = value else {
            throw Self.mismatch([JSON].self, expected: "an array", found: value, at: codingPath)
        }
        return JSONUnkeyedDecodingContainer(items: items, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        self
    }

    // MARK: SingleValueDecodingContainer

    func decodeNil() -> Bool {
        if case .null = value { return true }
        return false
    }

    func decode(_ type: Bool.Type) throws -> Bool { try Self.unbox(value, as: type, at: codingPath) }
    func decode(_ type: String.Type) throws -> String { try Self.unbox(value, as: type, at: codingPath) }
    func decode(_ type: Double.Type) throws -> Double { try Self.unbox(value, as: type, at: codingPath) }
    func decode(_ type: Float.Type) throws -> Float { try Self.unbox(value, as: type, at: codingPath) }
    func decode(_ type: Int.Type) throws -> Int { try Self.unboxInteger(value, at: codingPath) }
    func decode(_ type: Int8.Type) throws -> Int8 { try Self.unboxInteger(value, at: codingPath) }
    func decode(_ type: Int16.Type) throws -> Int16 { try Self.unboxInteger(value, at: codingPath) }
    func decode(_ type: Int32.Type) throws -> Int32 { try Self.unboxInteger(value, at: codingPath) }
    func decode(_ type: Int64.Type) throws -> Int64 { try Self.unboxInteger(value, at: codingPath) }
    func decode(_ type: UInt.Type) throws -> UInt { try Self.unboxInteger(value, at: codingPath) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try Self.unboxInteger(value, at: codingPath) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try Self.unboxInteger(value, at: codingPath) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try Self.unboxInteger(value, at: codingPath) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try Self.unboxInteger(value, at: codingPath) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try Self.unbox(value, as: type, at: codingPath) }

    // MARK: Unboxing, shared with the keyed and unkeyed containers

    /// The coding path of the value being unboxed, built only if an error needs it: building it for every
    /// member decoded was most of the cost of decoding a document.
    typealias CodingPath = () -> [any CodingKey]

    /// `value` as a `Bool`.
    static func unbox(_ value: JSON, as type: Bool.Type, at path: @autoclosure CodingPath) throws -> Bool {
        guard case .bool(let flag) = value else {
            throw mismatch(type, expected: "a boolean", found: value, at: path())
        }
        return flag
    }

    /// `value` as a `String`.
    static func unbox(_ value: JSON, as type: String.Type, at path: @autoclosure CodingPath) throws -> String {
        guard case .string(let string) = value else {
            throw mismatch(type, expected: "a string", found: value, at: path())
        }
        return string
    }

    /// `value` as a `Double`.
    static func unbox(_ value: JSON, as type: Double.Type, at path: @autoclosure CodingPath) throws -> Double {
        guard case .number(let number) = value else {
            throw mismatch(type, expected: "a number", found: value, at: path())
        }
        return number
    }

    /// `value` as the nearest `Float`, if within its range.
    static func unbox(_ value: JSON, as type: Float.Type, at path: @autoclosure CodingPath) throws -> Float {
        let number = try unbox(value, as: Double.self, at: path())
        let single = Float(number)
        guard single.isFinite || !number.isFinite else {
            let problem = "the number \(number) does not fit in Float"
            throw DecodingError.dataCorrupted(DecodingError.Context(codingPath: path(), debugDescription: problem))
        }
        return single
    }

    /// `value` as an integer of type `T`: it must be a whole number within `T`'s range.
    static func unboxInteger<T: FixedWidthInteger>(_ value: JSON, at path: @autoclosure CodingPath) throws -> T {
        let number = try unbox(value, as: Double.self, at: path())
        guard let integer = T(exactly: number) else {
            let whole = number.rounded(.towardZero) == number
            let problem = whole ? "is out of range for" : "is not a whole number, so not"
            throw DecodingError.dataCorrupted(
                DecodingError.Context(
                    codingPath: path(), debugDescription: "the number \(JSON.number(number)) \(problem) \(T.self)"))
        }
        return integer
    }

    /// `value` decoded as any `Decodable` type, through a nested decoder unless it is a `JSON` already.
    static func unbox<T: Decodable>(_ value: JSON, as type: T.Type, at path: @autoclosure CodingPath) throws -> T {
        // The primitive types come here when decoded generically (as array items, dictionary values, optionals),
        // so route them to their exact checks instead of a nested decoder.
        switch type {
        case is JSON.Type: return value as! T
        case is String.Type: return try unbox(value, as: String.self, at: path()) as! T
        case is Double.Type: return try unbox(value, as: Double.self, at: path()) as! T
        case is Int.Type: return try unboxInteger(value, at: path()) as Int as! T
        case is Bool.Type: return try unbox(value, as: Bool.self, at: path()) as! T
        default: return try T(from: JSONValueDecoder(value: value, codingPath: path()))
        }
    }

    /// A type mismatch: what the Swift type needed, and what the JSON held.
    /// A `null` where a value is required is `valueNotFound`, as Swift's own decoders report it.
    static func mismatch(
        _ type: Any.Type, expected: String, found value: JSON, at path: @autoclosure CodingPath
    ) -> DecodingError {
        let context = DecodingError.Context(
            codingPath: path(), debugDescription: "expected \(expected) for \(type), found \(describe(value))")
        if case .null = value { return DecodingError.valueNotFound(type, context) }
        return DecodingError.typeMismatch(type, context)
    }

    /// A JSON value named in an error message: its kind, and its text when short.
    static func describe(_ value: JSON) -> String {
        switch value {
        case .null: return "null"
        case .bool, .number, .string:
            let text = value.description
            return "\(value.typeName) \(text.count <= 40 ? text : String(text.prefix(37)) + "...")"
        case .array(let items): return "an array of \(items.count) items"
        case .object(let members): return "an object of \(members.count) members"
        }
    }
}

// MARK: - Containers

/// Reads the members of a JSON object by key.
struct JSONKeyedDecodingContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let members: JSONObject
    let codingPath: [any CodingKey]

    /// The members' keys in stored order, leaving out names `Key` does not accept.
    var allKeys: [Key] { members.keys.compactMap { Key(stringValue: $0) } }

    func contains(_ key: Key) -> Bool { members[key.stringValue] != nil }

    /// The member for `key`, or `keyNotFound`.
    private func member(_ key: Key) throws -> JSON {
        guard let member = members[key.stringValue] else {
            throw DecodingError.keyNotFound(
                key, DecodingError.Context(codingPath: codingPath, debugDescription: "expected a member, found none"))
        }
        return member
    }

    func decodeNil(forKey key: Key) throws -> Bool {
        if case .null = try member(key) { return true }
        return false
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool {
        try JSONValueDecoder.unbox(member(key), as: type, at: codingPath + [key])
    }

    func decode(_ type: String.Type, forKey key: Key) throws -> String {
        try JSONValueDecoder.unbox(member(key), as: type, at: codingPath + [key])
    }

    func decode(_ type: Double.Type, forKey key: Key) throws -> Double {
        try JSONValueDecoder.unbox(member(key), as: type, at: codingPath + [key])
    }

    func decode(_ type: Float.Type, forKey key: Key) throws -> Float {
        try JSONValueDecoder.unbox(member(key), as: type, at: codingPath + [key])
    }

    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try integer(forKey: key) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try integer(forKey: key) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try integer(forKey: key) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try integer(forKey: key) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try integer(forKey: key) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try integer(forKey: key) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try integer(forKey: key) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try integer(forKey: key) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try integer(forKey: key) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try integer(forKey: key) }

    private func integer<T: FixedWidthInteger>(forKey key: Key) throws -> T {
        try JSONValueDecoder.unboxInteger(member(key), at: codingPath + [key])
    }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try JSONValueDecoder.unbox(member(key), as: type, at: codingPath + [key])
    }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type, forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        try JSONValueDecoder(value: member(key), codingPath: codingPath + [key]).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try JSONValueDecoder(value: member(key), codingPath: codingPath + [key]).unkeyedContainer()
    }

    /// A decoder for the member `super`; `null` when there is none, as Foundation's decoder does.
    func superDecoder() throws -> any Decoder {
        JSONValueDecoder(value: members[JSONCodingKey.super.stringValue] ?? .null,
                         codingPath: codingPath + [JSONCodingKey.super])
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        JSONValueDecoder(value: members[key.stringValue] ?? .null, codingPath: codingPath + [key])
    }
}

/// Reads the items of a JSON array in order.
///
/// A failed decode leaves ``currentIndex`` where it was, so a caller may try another type for the same item.
struct JSONUnkeyedDecodingContainer: UnkeyedDecodingContainer {
    let items: [JSON]
    let codingPath: [any CodingKey]
    private(set) var currentIndex = 0

    init(items: [JSON], codingPath: [any CodingKey]) {
        self.items = items
        self.codingPath = codingPath
    }

    var count: Int? { items.count }
    var isAtEnd: Bool { currentIndex >= items.count }

    /// The path of the current item.
    private var itemPath: [any CodingKey] { codingPath + [JSONCodingKey(index: currentIndex)] }

    /// The current item, or `valueNotFound` past the end.
    private func current(_ type: Any.Type) throws -> JSON {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(
                type,
                DecodingError.Context(
                    codingPath: itemPath,
                    debugDescription: "expected \(type) at index \(currentIndex), found the end of an array of "
                        + "\(items.count) items"))
        }
        return items[currentIndex]
    }

    mutating func decodeNil() throws -> Bool {
        guard case .null = try current(Never.self) else { return false }
        currentIndex += 1
        return true
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try nextValue(type) }
    mutating func decode(_ type: String.Type) throws -> String { try nextValue(type) }
    mutating func decode(_ type: Double.Type) throws -> Double { try nextValue(type) }
    mutating func decode(_ type: Float.Type) throws -> Float { try nextValue(type) }
    mutating func decode(_ type: Int.Type) throws -> Int { try nextInteger() }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try nextInteger() }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try nextInteger() }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try nextInteger() }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try nextInteger() }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try nextInteger() }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try nextInteger() }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try nextInteger() }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try nextInteger() }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try nextInteger() }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try next { try JSONValueDecoder.unbox($0, as: type, at: $1) }
    }

    private mutating func nextValue(_ type: Bool.Type) throws -> Bool {
        try next { try JSONValueDecoder.unbox($0, as: type, at: $1) }
    }

    private mutating func nextValue(_ type: String.Type) throws -> String {
        try next { try JSONValueDecoder.unbox($0, as: type, at: $1) }
    }

    private mutating func nextValue(_ type: Double.Type) throws -> Double {
        try next { try JSONValueDecoder.unbox($0, as: type, at: $1) }
    }

    private mutating func nextValue(_ type: Float.Type) throws -> Float {
        try next { try JSONValueDecoder.unbox($0, as: type, at: $1) }
    }

    private mutating func nextInteger<T: FixedWidthInteger>() throws -> T {
        try next { try JSONValueDecoder.unboxInteger($0, at: $1) }
    }

    /// Decodes the current item with `unbox` and, only if that succeeds, moves past it.
    private mutating func next<T>(_ unbox: (JSON, [any CodingKey]) throws -> T) throws -> T {
        let result = try unbox(current(T.self), itemPath)
        currentIndex += 1
        return result
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type
    ) throws -> KeyedDecodingContainer<NestedKey> {
        try next { try JSONValueDecoder(value: $0, codingPath: $1).container(keyedBy: type) }
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try next { try JSONValueDecoder(value: $0, codingPath: $1).unkeyedContainer() }
    }

    mutating func superDecoder() throws -> any Decoder {
        try next { JSONValueDecoder(value: $0, codingPath: $1) }
    }
}
