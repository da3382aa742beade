// The keyed and unkeyed containers of `JSONValueDecoder`.

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

    mutating func decode(_ type: Bool.Type) throws -> Bool { try next { try JSONValueDecoder.unbox($0, as: type, at: $1) } }
    mutating func decode(_ type: String.Type) throws -> String { try next { try JSONValueDecoder.unbox($0, as: type, at: $1) } }
    mutating func decode(_ type: Double.Type) throws -> Double { try next { try JSONValueDecoder.unbox($0, as: type, at: $1) } }
    mutating func decode(_ type: Float.Type) throws -> Float { try next { try JSONValueDecoder.unbox($0, as: type, at: $1) } }
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
