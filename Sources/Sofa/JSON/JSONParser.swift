import OrderedCollections

// MARK: - Public entry points

extension JSON {
    /// The deepest nesting of arrays and objects the parser accepts: 512.
    ///
    /// Input nested deeper is rejected with ``SofaError/Code/invalidJSON`` naming the offset of the bracket
    /// that went one level too far, and a value built in code that is nested deeper cannot be serialized
    /// (``SofaError/Code/invalidValue``). The parser recurses once per level; at this depth it uses well
    /// under 256 KiB of stack even in a debug build, so it is safe on any thread.
    public static let maximumNestingDepth = 512

    /// Parses UTF-8 JSON text (RFC 8259). The whole input must be one value, with optional whitespace around it.
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
}

// MARK: - Parser

/// A one-pass recursive-descent parser over UTF-8 bytes, RFC 8259 exactly.
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
    /// How many arrays and objects enclose the value being parsed.
    var depth = 0
    /// Reused buffer for unescaping strings.
    var scratch: [UInt8] = []
    /// Whether the string `parseStringBody` last returned was written with escapes (so its text in the input
    /// is not its content).
    var lastStringHadEscapes = false

    init(bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    /// Parses the whole input as exactly one value.
    mutating func parseDocument() throws -> JSON {
        skipWhitespace()
        let value = try parseValue()
        skipWhitespace()
        guard index == bytes.count else { throw unexpected("the end of the input after the value") }
        return value
    }

    /// Parses one value starting at `index` (whitespace already skipped).
    mutating func parseValue() throws -> JSON {
        guard index < bytes.count else { throw unexpected("a value") }
        switch bytes[index] {
        case ASCII.quote:
            index += 1
            return .string(try parseStringBody())
        case ASCII.openBrace:
            return try parseObject()
        case ASCII.openBracket:
            return try parseArray()
        case ASCII.zero...ASCII.nine, ASCII.minus:
            return .number(try parseNumber())
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            return .null
        default:
            throw unexpected("a value")
        }
    }

    /// Parses an object; `index` is at its `{`.
    ///
    /// Keys and values collect in two arrays that become the `OrderedDictionary`'s storage as they are, with
    /// no copy and no per-member lookups (those were half of the parse time). They start with room for 16
    /// members, more than most documents have, so a typical object costs exactly two allocations.
    private mutating func parseObject() throws -> JSON {
        try enterContainer()
        defer { depth -= 1 }
        skipWhitespace()
        if index < bytes.count, bytes[index] == ASCII.closeBrace {
            index += 1
            return .object([:])
        }
        var keys = ContiguousArray<String>()
        var values = ContiguousArray<JSON>()
        keys.reserveCapacity(16)
        values.reserveCapacity(16)
        var keyFilter = KeyFilter()
        while true {
            guard index < bytes.count, bytes[index] == ASCII.quote else {
                throw unexpected(keys.isEmpty ? "a string key or '}'" : "a string key after ','")
            }
            index += 1
            let keyStart = index
            keys.append(try parseStringBody())
            if lastStringHadEscapes {
                keyFilter.mayHaveDuplicates = true
            } else {
                keyFilter.insert(UnsafeRawBufferPointer(rebasing: bytes[keyStart..<(index - 1)]))
            }
            skipWhitespace()
            guard index < bytes.count, bytes[index] == ASCII.colon else { throw unexpected("':' after an object key") }
            index += 1
            skipWhitespace()
            values.append(try parseValue())
            skipWhitespace()
            guard index < bytes.count else { throw unexpected("',' or '}' after an object member") }
            let separator = bytes[index]
            if separator == ASCII.comma {
                index += 1
                skipWhitespace()
            } else if separator == ASCII.closeBrace {
                index += 1
                return .object(makeObject(keys: keys, values: values, checkDuplicates: keyFilter.mayHaveDuplicates))
            } else {
                throw unexpected("',' or '}' after an object member")
            }
        }
    }

    /// The object with these members, in order.
    ///
    /// Duplicate keys: the first position is kept and the last value wins. When the key filter cannot rule
    /// duplicates out, small objects check pairwise, comparing byte lengths before strings; larger ones let
    /// the dictionary hash.
    private func makeObject(
        keys: ContiguousArray<String>, values: ContiguousArray<JSON>, checkDuplicates: Bool
    ) -> JSONObject {
        var unique = !checkDuplicates || keys.count <= 16
        if unique && checkDuplicates {
            outer: for i in keys.indices {
                let length = keys[i].utf8.count
                for j in 0..<i where keys[j].utf8.count == length && keys[j] == keys[i] {
                    unique = false
                    break outer
                }
            }
        }
        if unique { return JSONObject(uncheckedUniqueKeys: keys, values: values) }
        return JSONObject(zip(keys, values), uniquingKeysWith: { _, last in last })
    }

    /// Parses an array; `index` is at its `[`.
    private mutating func parseArray() throws -> JSON {
        try enterContainer()
        defer { depth -= 1 }
        skipWhitespace()
        var items: [JSON] = []
        if index < bytes.count, bytes[index] == ASCII.closeBracket {
            index += 1
            return .array(items)
        }
        while true {
            items.append(try parseValue())
            skipWhitespace()
            guard index < bytes.count else { throw unexpected("',' or ']' after an array item") }
            let separator = bytes[index]
            if separator == ASCII.comma {
                index += 1
                skipWhitespace()
            } else if separator == ASCII.closeBracket {
                index += 1
                return .array(items)
            } else {
                throw unexpected("',' or ']' after an array item")
            }
        }
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
