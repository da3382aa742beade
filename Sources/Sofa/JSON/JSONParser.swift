import OrderedCollections

// MARK: - Public entry points

extension JSON {
    /// The deepest nesting of arrays and objects the parser accepts: 512.
    ///
    /// Input nested deeper is rejected with ``SofaError/Code/invalidJSON`` naming the offset of the bracket
    /// that went one level too far, and a value built in code that is nested deeper cannot be serialized
    /// (``SofaError/Code/invalidValue``). Neither the parser nor the serializer recurses, so nesting costs them
    /// no machine stack; the limit keeps what does recurse over a value (`==`, `hash(into:)`, freeing it) within
    /// a 512 KiB thread stack, the smallest default, even in a debug build.
    public static let maximumNestingDepth = 512

    /// Parses UTF-8 JSON text (RFC 8259). The whole input must be one value, with optional whitespace around it.
    ///
    /// Objects keep their members in input order. A key that appears twice keeps its first position and takes
    /// its last value (`{"a":1,"b":2,"a":3}` reads as `{"a":3,"b":2}`). Numbers become the nearest `Double`, so
    /// integers up to ±2^53 are exact; a number beyond the range of `Double` (`1e400`) is an error, not
    /// infinity. A leading byte order mark is an error, as RFC 8259 forbids sending one.
    ///
    /// ```swift
    /// let doc = try JSON(parsing: #"{"type":"track","duration":235}"#)
    /// doc["duration"]?.intValue  // 235
    /// ```
    ///
    /// - Parameter text: JSON text.
    /// - Throws: ``SofaError`` with code ``SofaError/Code/invalidJSON`` whose message names what was expected and
    ///   the byte offset (in the UTF-8 encoding of `text`) where it was not found; ``SofaError/offset`` holds it.
    public init(parsing text: String) throws {
        var text = text
        self = try text.withUTF8 { try JSON(parsing: UnsafeRawBufferPointer($0)) }
    }

    /// Parses JSON text given as UTF-8 bytes (RFC 8259). The whole input must be one value, with optional
    /// whitespace around it.
    ///
    /// ```swift
    /// let value = try JSON(parsing: Array("[1, 2.5, null]".utf8))
    /// ```
    ///
    /// - Parameter bytes: UTF-8 encoded JSON text. Invalid UTF-8 is an error, never silently replaced.
    /// - Throws: ``SofaError`` with code ``SofaError/Code/invalidJSON``, naming what was expected and the byte
    ///   offset where it was not found.
    public init(parsing bytes: [UInt8]) throws {
        self = try bytes.withUnsafeBytes { try JSON(parsing: $0) }
    }

    /// Parses JSON text from raw UTF-8 bytes (RFC 8259), for callers that hold mapped or borrowed memory.
    ///
    /// The bytes are only read during the call; the result shares no storage with them.
    ///
    /// ```swift
    /// let value = try line.withUnsafeBytes { try JSON(parsing: $0) }
    /// ```
    ///
    /// - Parameter bytes: UTF-8 encoded JSON text.
    /// - Throws: ``SofaError`` with code ``SofaError/Code/invalidJSON``, naming what was expected and the byte
    ///   offset where it was not found: malformed syntax, invalid UTF-8, a lone surrogate escape, a number
    ///   too large for a `Double`, or nesting deeper than ``maximumNestingDepth``.
    public init(parsing bytes: UnsafeRawBufferPointer) throws {
        var parser = JSONParser(bytes: bytes)
        self = try parser.parseDocument()
    }

    /// Parses JSON text that should be an object, with `leading` members placed before the object's own: the
    /// indexer's document (`_id`, `_rev`, then the stored body) built in one pass, without inserting at the front
    /// of a finished object (which moves every member).
    ///
    /// Returns `nil` when the object itself has a member named like one of `leading` (the caller then builds the
    /// document the slow way, with the same result as before). A value that is not an object comes back as
    /// parsed, without the leading members.
    ///
    /// - Throws: As ``init(parsing:)-(UnsafeRawBufferPointer)``.
    static func parsingObject(_ bytes: UnsafeRawBufferPointer, leading: [(String, JSON)]) throws -> JSON? {
        var parser = JSONParser(bytes: bytes)
        parser.leading = leading
        let value = try parser.parseDocument()
        if parser.leadingCollided { return nil }
        if !parser.leadingApplied, case .object(let members) = value, members.isEmpty {
            return .object(JSONObject(uncheckedUniqueKeys: leading.map(\.0), values: leading.map(\.1)))
        }
        return value
    }
}

// MARK: - Parser

/// A one-pass parser over UTF-8 bytes, RFC 8259 exactly.
///
/// It does not recurse: open arrays and objects live on an explicit stack, so input nested to
/// ``JSON/maximumNestingDepth`` (or far deeper, which is rejected at the limit) uses no more machine stack than
/// flat input, on any thread. The innermost container is kept in a local variable and only its enclosing ones
/// go on the heap stack, so a flat document never allocates for it.
///
/// It never builds strings character by character: a string without escapes becomes a `String` straight from
/// its slice of the input, after the parser has checked the slice is valid UTF-8 (so bad bytes are reported
/// with their offset instead of being replaced). Strings with escapes are unescaped into one reused buffer.
///
/// Objects keep their members in input order; a repeated key keeps its first position and takes its last value.
///
/// Invariant: every read of `bytes[i]` is preceded by a check that `i < bytes.count`; the release build has
/// no bounds checks (`-Ounchecked`), so this is what keeps a truncated input from reading past its end.
struct JSONParser: ~Copyable {
    /// The input; valid for the parser's whole lifetime (it only exists inside a `withUnsafe…` call).
    let bytes: UnsafeRawBufferPointer
    /// Offset of the next unread byte.
    var index = 0
    /// How many arrays and objects are open around the value being parsed.
    var depth = 0
    /// Reused buffer for unescaping strings.
    var scratch: [UInt8] = []
    /// Whether the string `parseStringBody` last returned was written with escapes (so its text in the input
    /// is not its content).
    var lastStringHadEscapes = false
    /// Members to place first in the top-level object (``JSON/parsingObject(_:leading:)``), if any.
    var leading: [(String, JSON)] = []
    /// Whether the top-level object received ``leading``.
    var leadingApplied = false
    /// Whether the top-level object has a member of its own named like one of ``leading``.
    var leadingCollided = false

    init(bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    /// An array or object whose closing bracket has not been reached yet.
    ///
    /// Keys and values collect in arrays that become the finished value's storage as they are: no copy and no
    /// per-member dictionary lookups (those were half of the parse time). An object starts with room for 16
    /// members, more than most documents have, so a typical object costs exactly two allocations; the price is
    /// spare capacity in small objects, which is fine for values that are parsed, used and dropped.
    struct OpenContainer {
        let isObject: Bool
        /// Object keys, parallel to `values`; empty for an array.
        var keys = ContiguousArray<String>()
        /// Array items or object member values.
        var values = ContiguousArray<JSON>()
        /// Rules out duplicate keys cheaply in the common case.
        var keyFilter = KeyFilter()
        /// How many of the members were put there before parsing (``JSONParser/leading``).
        var leadingCount = 0

        init(isObject: Bool) {
            self.isObject = isObject
            if isObject {
                keys.reserveCapacity(16)
                values.reserveCapacity(16)
            }
        }
    }

    /// Parses the whole input as exactly one value.
    mutating func parseDocument() throws -> JSON {
        skipWhitespace()
        let value = try parseValue()
        skipWhitespace()
        guard index == bytes.count else { throw unexpected("the end of the input after the value") }
        return value
    }

    /// Parses one value starting at `index` (whitespace already skipped), including everything nested in it.
    mutating func parseValue() throws -> JSON {
        var enclosing: [OpenContainer] = []
        var open = OpenContainer(isObject: false)  // the innermost open container; meaningful when depth > 0
        let baseDepth = depth
        while true {
            // At the start of a value.
            guard index < bytes.count else { throw unexpected("a value") }
            var value: JSON
            switch bytes[index] {
            case ASCII.quote:
                index += 1
                value = .string(try parseStringBody())
            case ASCII.zero...ASCII.nine, ASCII.minus:
                value = .number(try parseNumber())
            case ASCII.openBrace, ASCII.openBracket:
                let isObject = bytes[index] == ASCII.openBrace
                try enterContainer()
                skipWhitespace()
                if index < bytes.count, bytes[index] == (isObject ? ASCII.closeBrace : ASCII.closeBracket) {
                    index += 1
                    depth -= 1
                    value = isObject ? .object([:]) : .array([])
                    break
                }
                if depth > baseDepth + 1 { enclosing.append(open) }
                open = OpenContainer(isObject: isObject)
                if isObject && !leading.isEmpty && depth == baseDepth + 1 && !leadingApplied { applyLeading(to: &open) }
                if isObject { try parseMemberKey(into: &open) }
                continue
            case UInt8(ascii: "t"):
                try expectLiteral("true")
                value = .bool(true)
            case UInt8(ascii: "f"):
                try expectLiteral("false")
                value = .bool(false)
            case UInt8(ascii: "n"):
                try expectLiteral("null")
                value = .null
            default:
                throw unexpected("a value")
            }

            // A value is complete: add it to the innermost open container, and close every container that
            // ends right after it.
            while true {
                guard depth > baseDepth else { return value }
                open.values.append(value)
                skipWhitespace()
                let closer = open.isObject ? ASCII.closeBrace : ASCII.closeBracket
                guard index < bytes.count, bytes[index] == ASCII.comma || bytes[index] == closer else {
                    throw unexpected(
                        open.isObject ? "',' or '}' after an object member" : "',' or ']' after an array item")
                }
                index += 1
                if bytes[index - 1] == ASCII.comma {
                    skipWhitespace()
                    if open.isObject { try parseMemberKey(into: &open) }
                    break
                }
                if leadingApplied && depth == baseDepth + 1 && open.keyFilter.mayHaveDuplicates {
                    leadingCollided = collidesWithLeading(open)
                }
                value = open.isObject ? .object(makeObject(open)) : .array(Array(open.values))
                depth -= 1
                open = enclosing.popLast() ?? OpenContainer(isObject: false)
            }
        }
    }

    /// Parses a member's key and the colon after it, leaving `index` at the start of its value.
    private mutating func parseMemberKey(into object: inout OpenContainer) throws {
        guard index < bytes.count, bytes[index] == ASCII.quote else {
            let isFirst = object.keys.count == object.leadingCount
            throw unexpected(isFirst ? "a string key or '}'" : "a string key after ','")
        }
        index += 1
        let keyStart = index
        object.keys.append(try parseStringBody())
        if lastStringHadEscapes {
            object.keyFilter.mayHaveDuplicates = true
        } else {
            object.keyFilter.insert(UnsafeRawBufferPointer(rebasing: bytes[keyStart..<(index - 1)]))
        }
        skipWhitespace()
        guard index < bytes.count, bytes[index] == ASCII.colon else { throw unexpected("':' after an object key") }
        index += 1
        skipWhitespace()
    }

    /// Puts ``leading`` into the freshly opened top-level object, keys into its duplicate filter too.
    private mutating func applyLeading(to object: inout OpenContainer) {
        leadingApplied = true
        for (key, value) in leading {
            var key = key
            object.keys.append(key)
            object.values.append(value)
            key.withUTF8 { object.keyFilter.insert(UnsafeRawBufferPointer($0)) }
        }
        object.leadingCount = leading.count
    }

    /// Whether one of the object's own members (after the leading ones) has the name of a leading member.
    private func collidesWithLeading(_ object: OpenContainer) -> Bool {
        for i in object.leadingCount..<object.keys.count where leading.contains(where: { $0.0 == object.keys[i] }) {
            return true
        }
        return false
    }

    /// The finished object.
    ///
    /// Duplicate keys: the first position is kept and the last value wins. When the key filter cannot rule
    /// duplicates out, small objects check pairwise, comparing byte lengths before strings; larger ones let
    /// the dictionary hash.
    private func makeObject(_ object: OpenContainer) -> JSONObject {
        let keys = object.keys
        guard object.keyFilter.mayHaveDuplicates else {
            return JSONObject(uncheckedUniqueKeys: keys, values: object.values)
        }
        var unique = keys.count <= 16
        if unique {
            outer: for i in keys.indices {
                let length = keys[i].utf8.count
                for j in 0..<i where keys[j].utf8.count == length && keys[j] == keys[i] {
                    unique = false
                    break outer
                }
            }
        }
        if unique { return JSONObject(uncheckedUniqueKeys: keys, values: object.values) }
        return JSONObject(zip(keys, object.values), uniquingKeysWith: { _, last in last })
    }

    /// Steps over an opening bracket, refusing to go deeper than the limit.
    private mutating func enterContainer() throws {
        guard depth < JSON.maximumNestingDepth else {
            throw SofaError(
                .invalidJSON,
                "expected at most \(JSON.maximumNestingDepth) nested arrays and objects at offset \(index), "
                    + "found one more",
                offset: index)
        }
        depth += 1
        index += 1
    }

    /// Checks that the bytes at `index` spell `literal` and steps over them.
    private mutating func expectLiteral(_ literal: StaticString) throws {
        let start = index
        let count = literal.utf8CodeUnitCount
        for i in 0..<count {
            let expected = literal.utf8Start[i]
            guard index < bytes.count, bytes[index] == expected else {
                let name = String(decoding: UnsafeBufferPointer(start: literal.utf8Start, count: count), as: UTF8.self)
                let message = "expected '\(name)' (the literal that starts at offset \(start)) at offset \(index), "
                    + "found \(describeByte(at: index))"
                throw SofaError(.invalidJSON, message, offset: index)
            }
            index += 1
        }
    }

    /// Skips the four whitespace characters RFC 8259 allows: space, tab, line feed, carriage return.
    @inline(__always)
    mutating func skipWhitespace() {
        while index < bytes.count {
            let byte = bytes[index]
            // Every byte above space is significant, so one comparison settles the common case.
            guard byte <= ASCII.space,
                byte == ASCII.space || byte == ASCII.newline || byte == ASCII.tab || byte == ASCII.carriageReturn
            else { return }
            index += 1
        }
    }

    // MARK: Errors

    /// An `.invalidJSON` error at `index`: what was expected, and what was found there instead.
    func unexpected(_ expected: String) -> SofaError {
        unexpected(expected, at: index)
    }

    /// An `.invalidJSON` error at `offset`: what was expected, and what was found there instead.
    func unexpected(_ expected: String, at offset: Int) -> SofaError {
        SofaError(.invalidJSON, "expected \(expected) at offset \(offset), found \(describeByte(at: offset))",
                  offset: offset)
    }

    /// The byte at `offset` as a person would want it named in an error message.
    func describeByte(at offset: Int) -> String {
        guard offset < bytes.count else { return "the end of the input" }
        let byte = bytes[offset]
        if byte > ASCII.space, byte < 0x7F { return "'\(Character(Unicode.Scalar(byte)))'" }
        let hex = String(byte, radix: 16, uppercase: true)
        return "byte 0x\(hex.count == 1 ? "0" + hex : hex)"
    }
}

/// The ASCII bytes the parser and serializer look for, named.
enum ASCII {
    static let tab = UInt8(ascii: "\t")
    static let newline = UInt8(ascii: "\n")
    static let carriageReturn = UInt8(ascii: "\r")
    static let space = UInt8(ascii: " ")
    static let quote = UInt8(ascii: "\"")
    static let plus = UInt8(ascii: "+")
    static let comma = UInt8(ascii: ",")
    static let minus = UInt8(ascii: "-")
    static let dot = UInt8(ascii: ".")
    static let slash = UInt8(ascii: "/")
    static let zero = UInt8(ascii: "0")
    static let nine = UInt8(ascii: "9")
    static let colon = UInt8(ascii: ":")
    static let backslash = UInt8(ascii: "\\")
    static let openBracket = UInt8(ascii: "[")
    static let closeBracket = UInt8(ascii: "]")
    static let openBrace = UInt8(ascii: "{")
    static let closeBrace = UInt8(ascii: "}")
    static let lowercaseE = UInt8(ascii: "e")
    static let uppercaseE = UInt8(ascii: "E")
    static let lowercaseU = UInt8(ascii: "u")
    static let underscore = UInt8(ascii: "_")
}

/// A 256-bit Bloom filter over the raw bytes of an object's keys, so that the common object, whose keys all
/// differ in length or first, middle or last byte, is known to have no duplicates without comparing strings.
struct KeyFilter {
    private var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
    /// Set once two keys share a filter bit, or a key had escapes (its raw bytes are not its content).
    var mayHaveDuplicates = false

    /// Adds a key given as its unescaped UTF-8 bytes.
    @inline(__always)
    mutating func insert(_ key: UnsafeRawBufferPointer) {
        var summary = UInt64(key.count)
        if !key.isEmpty {
            summary |= UInt64(key[0]) << 16 | UInt64(key[key.count >> 1]) << 24 | UInt64(key[key.count - 1]) << 32
        }
        let bitIndex = (summary &* 0x9E37_79B9_7F4A_7C15) >> 56  // Fibonacci hashing: the top 8 bits mix best
        let bit: UInt64 = 1 << (bitIndex & 63)
        let seen: Bool
        switch bitIndex >> 6 {
        case 0: seen = words.0 & bit != 0; words.0 |= bit
        case 1: seen = words.1 & bit != 0; words.1 |= bit
        case 2: seen = words.2 & bit != 0; words.2 |= bit
        default: seen = words.3 & bit != 0; words.3 |= bit
        }
        if seen { mayHaveDuplicates = true }
    }
}
