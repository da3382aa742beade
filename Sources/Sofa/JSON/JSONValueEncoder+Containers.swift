// The keyed and unkeyed containers of `JSONValueEncoder`.

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
