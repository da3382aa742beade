import OrderedCollections

/// The members of a JSON object, in the order they were written.
///
/// Order matters in Sofa: objects used as view keys collate member by member in stored order (DESIGN.md §2),
/// and a document read back serializes with its members where they were.
public typealias JSONObject = OrderedDictionary<String, JSON>

/// A JSON value: what documents are made of and what map functions emit as keys and values.
///
/// Numbers are IEEE doubles, so integers round-trip exactly up to 2^53. Literals build values directly:
///
/// ```swift
/// let key: JSON = ["red", [:]]          // an array key whose last item is an empty object
/// let doc: JSON = ["type": "track", "duration": 235, "tags": ["live"]]
/// ```
///
/// Equality is structural and order-sensitive for objects, which matches how objects collate.
/// A `JSON` value may hold NaN or infinity when built in code; such values cannot be serialized or used as
/// keys, and the operations that reject them say so with a ``SofaError``.
@frozen
public enum JSON: Sendable, Hashable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number. JSON does not distinguish integers from decimals; neither does collation (`1 == 1.0`).
    case number(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSON])
    /// An object, with its members in stored order.
    case object(JSONObject)
}

// MARK: - Literals

extension JSON: ExpressibleByNilLiteral {
    /// `nil` as a literal is JSON `null`.
    public init(nilLiteral: ()) { self = .null }
}

extension JSON: ExpressibleByBooleanLiteral {
    /// A boolean literal.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
}

extension JSON: ExpressibleByIntegerLiteral {
    /// An integer literal.
    public init(integerLiteral value: Int) { self = .number(Double(value)) }
}

extension JSON: ExpressibleByFloatLiteral {
    /// A floating-point literal.
    public init(floatLiteral value: Double) { self = .number(value) }
}

extension JSON: ExpressibleByStringLiteral {
    /// A string literal.
    public init(stringLiteral value: String) { self = .string(value) }
}

extension JSON: ExpressibleByArrayLiteral {
    /// An array literal: `["red", [:]]`.
    public init(arrayLiteral elements: JSON...) { self = .array(elements) }
}

extension JSON: ExpressibleByDictionaryLiteral {
    /// A dictionary literal; members keep the order they are written in. A repeated key keeps its first
    /// position and its last value.
    public init(dictionaryLiteral elements: (String, JSON)...) {
        var object = JSONObject(minimumCapacity: elements.count)
        for (key, value) in elements { object[key] = value }
        self = .object(object)
    }
}

// MARK: - Conversions from Swift values

extension JSON {
    /// A number from any binary integer. Integers beyond ±2^53 lose precision, as in every JSON number.
    public init<T: BinaryInteger>(_ value: T) { self = .number(Double(value)) }

    /// A number.
    public init(_ value: Double) { self = .number(value) }

    /// A string.
    public init(_ value: String) { self = .string(value) }

    /// A boolean.
    public init(_ value: Bool) { self = .bool(value) }
}

// MARK: - Subscripts and accessors

extension JSON {
    /// The member named `key` of an object; `nil` when this is not an object or has no such member.
    ///
    /// Setting a member of a non-object turns the value into an object holding just that member;
    /// setting `nil` removes the member.
    public subscript(key: String) -> JSON? {
        get {
            if case .object(let members) = self { return members[key] }
            return nil
        }
        set {
            var members: JSONObject
            if case .object(let existing) = self { members = existing } else { members = [:] }
            self = .null  // release the old storage so the write below does not copy it
            members[key] = newValue
            self = .object(members)
        }
    }

    /// The item at `index` of an array; `nil` when this is not an array or the index is out of range.
    public subscript(index: Int) -> JSON? {
        if case .array(let items) = self, items.indices.contains(index) { return items[index] }
        return nil
    }

    /// True for `null`.
    public var isNull: Bool { if case .null = self { return true } else { return false } }

    /// The value of a boolean, else `nil`.
    public var boolValue: Bool? { if case .bool(let b) = self { return b } else { return nil } }

    /// The value of a number, else `nil`.
    public var doubleValue: Double? { if case .number(let n) = self { return n } else { return nil } }

    /// The value of a number that is a whole number representable as `Int`, else `nil`.
    public var intValue: Int? {
        guard case .number(let n) = self, n.rounded(.towardZero) == n, let i = Int(exactly: n) else { return nil }
        return i
    }

    /// The value of a string, else `nil`.
    public var stringValue: String? { if case .string(let s) = self { return s } else { return nil } }

    /// The items of an array, else `nil`.
    public var arrayValue: [JSON]? { if case .array(let a) = self { return a } else { return nil } }

    /// The members of an object, else `nil`.
    public var objectValue: JSONObject? { if case .object(let o) = self { return o } else { return nil } }

    /// The name of this value's type as JSON spells it, for error messages.
    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .number: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }
}
