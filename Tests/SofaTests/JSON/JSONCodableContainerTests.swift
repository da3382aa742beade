import Testing

@testable import Sofa

// MARK: - Hand-written Codable that exercises every container method

private class Shape: Codable {
    var name: String

    init(name: String) { self.name = name }

    private enum CodingKeys: String, CodingKey { case name }

    required init(from decoder: any Decoder) throws {
        name = try decoder.container(keyedBy: CodingKeys.self).decode(String.self, forKey: .name)
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(name, forKey: .name)
    }
}

/// Encodes its superclass under `super`, as Swift's documentation suggests for class hierarchies.
private final class Circle: Shape {
    var radius: Double

    init(name: String, radius: Double) {
        self.radius = radius
        super.init(name: name)
    }

    private enum CodingKeys: String, CodingKey { case radius }

    required init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        radius = try container.decode(Double.self, forKey: .radius)
        try super.init(from: container.superDecoder())
    }

    override func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(radius, forKey: .radius)
        try super.encode(to: container.superEncoder())
    }
}

/// Shares one keyed container with its superclass: both write into the same object.
private final class Square: Shape {
    var side: Int

    init(name: String, side: Int) {
        self.side = side
        super.init(name: name)
    }

    private enum CodingKeys: String, CodingKey { case side }

    required init(from decoder: any Decoder) throws {
        side = try decoder.container(keyedBy: CodingKeys.self).decode(Int.self, forKey: .side)
        try super.init(from: decoder)
    }

    override func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(side, forKey: .side)
        try super.encode(to: encoder)
    }
}

/// `{"position":{"x":…,"y":…},"rows":[[…],{"label":…}],"base":{…}}` written through nested containers.
private struct Plot: Codable, Equatable {
    var x: Double
    var y: Float
    var rows: [[Int16]]
    var label: String
    var base: String

    init(x: Double, y: Float, rows: [[Int16]], label: String, base: String) {
        (self.x, self.y, self.rows, self.label, self.base) = (x, y, rows, label, base)
    }

    private enum Keys: String, CodingKey { case position, rows, base }
    private enum PositionKeys: String, CodingKey { case x, y }
    private enum LabelKeys: String, CodingKey { case label }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Keys.self)
        let position = try container.nestedContainer(keyedBy: PositionKeys.self, forKey: .position)
        x = try position.decode(Double.self, forKey: .x)
        y = try position.decode(Float.self, forKey: .y)
        var rowsContainer = try container.nestedUnkeyedContainer(forKey: .rows)
        rows = []
        while rowsContainer.count.map({ rowsContainer.currentIndex < $0 - 1 }) ?? false {
            var row = try rowsContainer.nestedUnkeyedContainer()
            var values: [Int16] = []
            while !row.isAtEnd { values.append(try row.decode(Int16.self)) }
            rows.append(values)
        }
        label = try rowsContainer.nestedContainer(keyedBy: LabelKeys.self).decode(String.self, forKey: .label)
        base = try String(from: container.superDecoder(forKey: .base))
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Keys.self)
        var position = container.nestedContainer(keyedBy: PositionKeys.self, forKey: .position)
        try position.encode(x, forKey: .x)
        try position.encode(y, forKey: .y)
        var rowsContainer = container.nestedUnkeyedContainer(forKey: .rows)
        for values in rows {
            var row = rowsContainer.nestedUnkeyedContainer()
            for value in values { try row.encode(value) }
        }
        var labelContainer = rowsContainer.nestedContainer(keyedBy: LabelKeys.self)
        try labelContainer.encode(label, forKey: .label)
        try base.encode(to: container.superEncoder(forKey: .base))
    }
}

// MARK: - Coders that hide Sofa's own types, so `JSON`'s generic Codable path runs

private struct OpaqueDecoder: Decoder {
    let base: any Decoder
    var codingPath: [any CodingKey] { base.codingPath }
    var userInfo: [CodingUserInfoKey: Any] { base.userInfo }
    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        try base.container(keyedBy: type)
    }
    func unkeyedContainer() throws -> any UnkeyedDecodingContainer { try base.unkeyedContainer() }
    func singleValueContainer() throws -> any SingleValueDecodingContainer { try base.singleValueContainer() }
}

private struct OpaqueEncoder: Encoder {
    let base: any Encoder
    var codingPath: [any CodingKey] { base.codingPath }
    var userInfo: [CodingUserInfoKey: Any] { base.userInfo }
    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        base.container(keyedBy: type)
    }
    func unkeyedContainer() -> any UnkeyedEncodingContainer { base.unkeyedContainer() }
    func singleValueContainer() -> any SingleValueEncodingContainer { base.singleValueContainer() }
}

private struct Opaque: Codable {
    var value: JSON
    init(_ value: JSON) { self.value = value }
    init(from decoder: any Decoder) throws { value = try JSON(from: OpaqueDecoder(base: decoder)) }
    func encode(to encoder: any Encoder) throws { try value.encode(to: OpaqueEncoder(base: encoder)) }
}

@Suite struct JSONCodableContainerTests {
    @Test func superEncoderNestsTheSuperclass() throws {
        let json = try JSON(encoding: Circle(name: "c", radius: 2.5))
        #expect(try json.serialized() == #"{"radius":2.5,"super":{"name":"c"}}"#)
        let back = try json.decode(Circle.self)
        #expect(back.name == "c" && back.radius == 2.5)
        // A missing `super` member decodes as null, which a keyed container then rejects by path.
        let error = try #require(throws: SofaError.self) { try (["radius": 1] as JSON).decode(Circle.self) }
        #expect(error.message.contains("super"), "\(error.message)")
    }

    @Test func sharedContainerMergesTheSuperclass() throws {
        let json = try JSON(encoding: Square(name: "s", side: 3))
        #expect(try json.serialized() == #"{"side":3,"name":"s"}"#)
        let back = try json.decode(Square.self)
        #expect(back.name == "s" && back.side == 3)
    }

    @Test func nestedContainersBothWays() throws {
        let plot = Plot(x: 1.5, y: 0.25, rows: [[1, 2], [], [-3]], label: "L", base: "B")
        let json = try JSON(encoding: plot)
        #expect(try json.serialized()
            == #"{"position":{"x":1.5,"y":0.25},"rows":[[1,2],[],[-3],{"label":"L"}],"base":"B"}"#)
        #expect(try json.decode(Plot.self) == plot)
    }

    @Test func unkeyedSuperEncoderAppendsAnItem() throws {
        struct Pair: Encodable {
            func encode(to encoder: any Encoder) throws {
                var container = encoder.unkeyedContainer()
                try container.encode("first")
                try "second".encode(to: container.superEncoder())
                try container.encodeNil()
                #expect(container.count == 3)
            }
        }
        #expect(try JSON(encoding: Pair()) == ["first", "second", nil])
    }

    @Test func genericCodablePathHandlesEveryKind() throws {
        let values: [JSON] = [nil, true, false, 0, -2.5, "text", [], [1, "a", [nil]], [:], ["b": 1, "a": ["x": []]]]
        for value in values {
            #expect(try value.decode(Opaque.self).value == value)
            #expect(try JSON(encoding: Opaque(value)) == value)
        }
        // Member order survives the generic path with an order-keeping decoder.
        let ordered = try (["z": 1, "a": 2, "m": 3] as JSON).decode(Opaque.self).value
        #expect(ordered.objectValue.map { Array($0.keys) } == ["z", "a", "m"])
    }

    @Test func decodingErrorsInsideCustomCodeStillNameThePath() throws {
        let json: JSON = ["position": ["x": 1, "y": "high"], "rows": [], "base": "b"]
        let error = try #require(throws: SofaError.self) { try json.decode(Plot.self) }
        #expect(error.code == .decodingFailed)
        #expect(error.message.contains("position.y"), "\(error.message)")
    }

    @Test func wrongContainerKindIsATypeMismatch() throws {
        let error = try #require(throws: SofaError.self) { try ([1, 2] as JSON).decode(Shape.self) }
        #expect(error.message.contains("expected an object"), "\(error.message)")
        let other = try #require(throws: SofaError.self) { try (["a": 1] as JSON).decode([Int].self) }
        #expect(other.message.contains("expected an array"), "\(other.message)")
    }
}
