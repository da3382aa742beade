import OrderedCollections

/// An `Encoder` that builds a `JSON` value directly, without text and without Foundation.
///
/// Swift's encoding protocols hand out containers that the caller keeps writing to after they are returned, so
/// the value is built as a small tree of shared nodes (``JSONEncodedNode``) and turned into `JSON` at the end.
///
/// Integers are stored when a `Double` holds them exactly (all of them up to ±2^53); others are an
/// `EncodingError`, since JSON would silently change them. `Float`s are widened exactly to `Double`.
/// Asking for a different kind of container than one already written replaces what was written.
final class JSONValueEncoder: Encoder {
    /// The keys from the top-level value down to the value this encoder writes.
    let codingPath: [any CodingKey]
    /// Always empty: ``JSON/init(encoding:)`` takes no options.
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    /// What has been written so far; `nil` until something is.
    private(set) var node: JSONEncodedNode?

    init(codingPath: [any CodingKey]) {
        self.codingPath = codingPath
    }

    /// Replaces what this encoder holds.
    func store(_ node: JSONEncodedNode) {
        self.node = node
    }

    /// The value written, as `JSON`; an encoder nothing was written to gives an empty object.
    func resolved() -> JSON {
        node?.resolved() ?? .object([:])
    }

    // MARK: Encoder

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let object: JSONEncodedObject
        // Asking twice must give the same container: a subclass and its superclass share one this way.
        if case .object(let existing)? = node {
            object = existing
        } else {
            object = JSONEncodedObject()
            node = .object(object)
        }
        return KeyedEncodingContainer(JSONKeyedEncodingContainer<Key>(object: object, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        let array: JSONEncodedArray
        if case .array(let existing)? = node {
            array = existing
        } else {
            array = JSONEncodedArray()
            node = .array(array)
        }
        return JSONUnkeyedEncodingContainer(array: array, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        JSONSingleValueEncodingContainer(encoder: self)
    }

    // MARK: Boxing, shared with the containers

    /// The coding path of the value being boxed, built only when a nested encoder or an error needs it.
    typealias CodingPath = () -> [any CodingKey]

    /// `value` as a node: primitives directly, anything else through a nested encoder.
    static func box<T: Encodable>(_ value: T, at path: @autoclosure CodingPath) throws -> JSONEncodedNode {
        // Primitives come here when encoded generically (array items, dictionary values, optionals); give them
        // their exact conversions rather than a nested encoder.
        switch value {
        case let json as JSON: return .value(json)
        case let string as String: return .value(.string(string))
        case let number as Double: return .value(.number(number))
        case let integer as Int: return .value(try boxInteger(integer, at: path()))
        case let flag as Bool: return .value(.bool(flag))
        default:
            let encoder = JSONValueEncoder(codingPath: path())
            try value.encode(to: encoder)
            return encoder.node ?? .object(JSONEncodedObject())
        }
    }

    /// An integer as a number, if a `Double` holds it exactly.
    static func boxInteger<T: BinaryInteger>(_ value: T, at path: @autoclosure CodingPath) throws -> JSON {
        guard let number = Double(exactly: value) else {
            throw EncodingError.invalidValue(
                value,
                EncodingError.Context(
                    codingPath: path(),
                    debugDescription: "the integer \(value) has no exact Double value, so a JSON number cannot hold "
                        + "it (integers are exact up to ±2^53); encode it as a string instead"))
        }
        return .number(number)
    }
}

/// The value written to a single-value container: stored straight into its encoder.
struct JSONSingleValueEncodingContainer: SingleValueEncodingContainer {
    let encoder: JSONValueEncoder
    var codingPath: [any CodingKey] { encoder.codingPath }

    func store(_ value: JSON) {
        encoder.store(.value(value))
    }

    mutating func encodeNil() throws { store(.null) }
    mutating func encode(_ value: Bool) throws { store(.bool(value)) }
    mutating func encode(_ value: String) throws { store(.string(value)) }
    mutating func encode(_ value: Double) throws { store(.number(value)) }
    mutating func encode(_ value: Float) throws { store(.number(Double(value))) }
    mutating func encode(_ value: Int) throws { try store(JSONValueEncoder.boxInteger(value, at: codingPath)) }
    mutating func encode(_ value: Int8) throws { try store(JSONValueEncoder.boxInteger(value, at: codingPath)) }
    mutating func encode(_ value: Int16) throws { try store(JSONValueEncoder.boxInteger(value, at: codingPath)) }
    mutating func encode(_ value: Int32) throws { try store(JSONValueEncoder.boxInteger(value, at: codingPath)) }
    mutating func encode(_ value: Int64) throws { try store(JSONValueEncoder.boxInteger(value, at: codingPath)) }
    mutating func encode(_ value: UInt) throws { try store(JSONValueEncoder.boxInteger(value, at: codingPath)) }
    mutating func encode(_ value: UInt8) throws { try store(JSONValueEncoder.boxInteger(value, at: codingPath)) }
    mutating func encode(_ value: UInt16) throws { try store(JSONValueEncoder.boxInteger(value, at: codingPath)) }
    mutating func encode(_ value: UInt32) throws { try store(JSONValueEncoder.boxInteger(value, at: codingPath)) }
    mutating func encode(_ value: UInt64) throws { try store(JSONValueEncoder.boxInteger(value, at: codingPath)) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        encoder.store(try JSONValueEncoder.box(value, at: codingPath))
    }
}

// MARK: - Containers

/// Writes the members of a JSON object. A key written twice keeps its first position and its last value.
struct JSONKeyedEncodingContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let object: JSONEncodedObject
    let codingPath: [any CodingKey]

    private func store(_ value: JSON, forKey key: Key) {
        object.members[key.stringValue] = .value(value)
    }

    private func storeInteger<T: BinaryInteger>(_ value: T, forKey key: Key) throws {
        store(try JSONValueEncoder.boxInteger(value, at: codingPath + [key]), forKey: key)
    }

    mutating func encodeNil(forKey key: Key) throws { store(.null, forKey: key) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { store(.bool(value), forKey: key) }
    mutating func encode(_ value: String, forKey key: Key) throws { store(.string(value), forKey: key) }
    mutating func encode(_ value: Double, forKey key: Key) throws { store(.number(value), forKey: key) }
    mutating func encode(_ value: Float, forKey key: Key) throws { store(.number(Double(value)), forKey: key) }
    mutating func encode(_ value: Int, forKey key: Key) throws { try storeInteger(value, forKey: key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { try storeInteger(value, forKey: key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { try storeInteger(value, forKey: key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { try storeInteger(value, forKey: key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { try storeInteger(value, forKey: key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { try storeInteger(value, forKey: key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { try storeInteger(value, forKey: key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { try storeInteger(value, forKey: key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { try storeInteger(value, forKey: key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { try storeInteger(value, forKey: key) }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        object.members[key.stringValue] = try JSONValueEncoder.box(value, at: codingPath + [key])
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        let nested = JSONEncodedObject()
        object.members[key.stringValue] = .object(nested)
        return KeyedEncodingContainer(
            JSONKeyedEncodingContainer<NestedKey>(object: nested, codingPath: codingPath + [key]))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let nested = JSONEncodedArray()
        object.members[key.stringValue] = .array(nested)
        return JSONUnkeyedEncodingContainer(array: nested, codingPath: codingPath + [key])
    }

    /// An encoder whose value becomes the member `super`.
    mutating func superEncoder() -> any Encoder {
        superEncoder(named: JSONCodingKey.super)
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        superEncoder(named: key)
    }

    private func superEncoder(named key: any CodingKey) -> any Encoder {
        let encoder = JSONValueEncoder(codingPath: codingPath + [key])
        object.members[key.stringValue] = .encoder(encoder)
        return encoder
    }
}

/// Appends the items of a JSON array.
struct JSONUnkeyedEncodingContainer: UnkeyedEncodingContainer {
    let array: JSONEncodedArray
    let codingPath: [any CodingKey]

    var count: Int { array.items.count }

    /// The path of the item about to be appended.
    private var itemPath: [any CodingKey] { codingPath + [JSONCodingKey(index: count)] }

    private func append(_ value: JSON) {
        array.items.append(.value(value))
    }

    private func appendInteger<T: BinaryInteger>(_ value: T) throws {
        append(try JSONValueEncoder.boxInteger(value, at: itemPath))
    }

    mutating func encodeNil() throws { append(.null) }
    mutating func encode(_ value: Bool) throws { append(.bool(value)) }
    mutating func encode(_ value: String) throws { append(.string(value)) }
    mutating func encode(_ value: Double) throws { append(.number(value)) }
    mutating func encode(_ value: Float) throws { append(.number(Double(value))) }
    mutating func encode(_ value: Int) throws { try appendInteger(value) }
    mutating func encode(_ value: Int8) throws { try appendInteger(value) }
    mutating func encode(_ value: Int16) throws { try appendInteger(value) }
    mutating func encode(_ value: Int32) throws { try appendInteger(value) }
    mutating func encode(_ value: Int64) throws { try appendInteger(value) }
    mutating func encode(_ value: UInt) throws { try appendInteger(value) }
    mutating func encode(_ value: UInt8) throws { try appendInteger(value) }
    mutating func encode(_ value: UInt16) throws { try appendInteger(value) }
    mutating func encode(_ value: UInt32) throws { try appendInteger(value) }
    mutating func encode(_ value: UInt64) throws { try appendInteger(value) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        array.items.append(try JSONValueEncoder.box(value, at: itemPath))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type
    ) -> KeyedEncodingContainer<NestedKey> {
        let nested = JSONEncodedObject()
        let path = itemPath
        array.items.append(.object(nested))
        return KeyedEncodingContainer(JSONKeyedEncodingContainer<NestedKey>(object: nested, codingPath: path))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let nested = JSONEncodedArray()
        let path = itemPath
        array.items.append(.array(nested))
        return JSONUnkeyedEncodingContainer(array: nested, codingPath: path)
    }

    /// An encoder whose value becomes the next item.
    mutating func superEncoder() -> any Encoder {
        let encoder = JSONValueEncoder(codingPath: itemPath)
        array.items.append(.encoder(encoder))
        return encoder
    }
}

// MARK: - The tree being built

/// A value under construction. Containers are classes because Swift's encoding API lets a caller keep writing
/// to a container after handing out a nested one, so parent and caller must share it.
enum JSONEncodedNode {
    /// A finished value.
    case value(JSON)
    /// An array still being written.
    case array(JSONEncodedArray)
    /// An object still being written.
    case object(JSONEncodedObject)
    /// A value a `superEncoder()` is writing.
    case encoder(JSONValueEncoder)

    /// The finished `JSON`.
    func resolved() -> JSON {
        switch self {
        case .value(let value):
            return value
        case .array(let array):
            return .array(array.items.map { $0.resolved() })
        case .object(let object):
            var members = JSONObject(minimumCapacity: object.members.count)
            for (key, member) in object.members { members[key] = member.resolved() }
            return .object(members)
        case .encoder(let encoder):
            return encoder.resolved()
        }
    }
}

/// An array under construction.
final class JSONEncodedArray {
    var items: [JSONEncodedNode] = []
}

/// An object under construction; members keep the order they were first written in.
final class JSONEncodedObject {
    var members: OrderedDictionary<String, JSONEncodedNode> = [:]
}
