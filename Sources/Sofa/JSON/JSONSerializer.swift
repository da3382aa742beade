// MARK: - Public entry points

extension JSON {
    /// The compact JSON text of this value: no whitespace, object members in stored order.
    ///
    /// ```swift
    /// let doc: JSON = ["title": "Qux", "duration": 235, "rating": 4.5]
    /// try doc.serialized()  // {"title":"Qux","duration":235,"rating":4.5}
    /// ```
    ///
    /// Numbers: a whole number of magnitude up to 2^53 prints as an integer (`235`, not `235.0`); other numbers
    /// print in the shortest form that parses back to the same `Double` (`0.1`, `1e-07`, `1.5e+300`). Negative
    /// zero prints as `-0`, so the sign survives a round trip. Strings escape `"`, `\` and the control characters
    /// U+0000–U+001F (`\b \f \n \r \t` in their short forms, the rest as `\u00XX`); `/` and non-ASCII characters
    /// are written as they are, in UTF-8.
    ///
    /// - Returns: The JSON text.
    /// - Throws: ``SofaError`` with code ``SofaError/Code/invalidValue`` if the value holds NaN or an infinity,
    ///   or nests arrays and objects deeper than ``maximumNestingDepth``.
    public func serialized() throws -> String {
        String(decoding: try serializedBytes(), as: UTF8.self)
    }

    /// The compact JSON text of this value as UTF-8 bytes; see ``serialized()`` for the exact form.
    ///
    /// ```swift
    /// let bytes = try (["a", 1] as JSON).serializedBytes()  // Array(#"["a",1]"#.utf8)
    /// ```
    ///
    /// - Returns: UTF-8 encoded JSON text.
    /// - Throws: ``SofaError`` with code ``SofaError/Code/invalidValue`` for NaN, an infinity, or nesting deeper
    ///   than ``maximumNestingDepth``.
    public func serializedBytes() throws -> [UInt8] {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(256)
        try serialize(into: &buffer)
        return buffer
    }

    /// Appends the compact JSON text of this value to `buffer`; see ``serialized()`` for the exact form.
    ///
    /// ```swift
    /// var line: [UInt8] = []
    /// for doc in docs { try doc.serialize(into: &line); line.append(UInt8(ascii: "\n")) }
    /// ```
    ///
    /// - Parameter buffer: The bytes to append to. If serialization fails, `buffer` is left as it was.
    /// - Throws: ``SofaError`` with code ``SofaError/Code/invalidValue`` for NaN, an infinity, or nesting deeper
    ///   than ``maximumNestingDepth``.
    public func serialize(into buffer: inout [UInt8]) throws {
        let originalCount = buffer.count
        do {
            try JSONSerializer.write(self, into: &buffer, depth: 0, strict: true)
        } catch {
            buffer.removeSubrange(originalCount...)
            throw error
        }
    }
}

extension JSON: CustomStringConvertible {
    /// The value's compact JSON text, as ``serialized()`` writes it.
    ///
    /// Where ``serialized()`` would throw, this still gives something readable: NaN and the infinities appear
    /// as `NaN`, `Infinity` and `-Infinity` (which is not valid JSON), and there is no nesting limit.
    public var description: String {
        var buffer: [UInt8] = []
        // Cannot throw: non-strict mode writes the readable forms instead of failing.
        try? JSONSerializer.write(self, into: &buffer, depth: 0, strict: false)
        return String(decoding: buffer, as: UTF8.self)
    }
}

// MARK: - Serializer

/// Writes `JSON` values as compact UTF-8 JSON text.
enum JSONSerializer {
    /// Appends `value` to `out`. `depth` counts the arrays and objects around `value`. Non-strict mode is for
    /// `description`: it never throws, writing `NaN`/`Infinity` and ignoring the nesting limit.
    static func write(_ value: JSON, into out: inout [UInt8], depth: Int, strict: Bool) throws {
        switch value {
        case .null:
            appendLiteral("null", to: &out)
        case .bool(let flag):
            appendLiteral(flag ? "true" : "false", to: &out)
        case .number(let number):
            try writeNumber(number, into: &out, strict: strict)
        case .string(let string):
            writeString(string, into: &out)
        case .array(let items):
            try checkDepth(depth, strict: strict)
            out.append(ASCII.openBracket)
            var first = true
            for item in items {
                if !first { out.append(ASCII.comma) }
                first = false
                try write(item, into: &out, depth: depth + 1, strict: strict)
            }
            out.append(ASCII.closeBracket)
        case .object(let members):
            try checkDepth(depth, strict: strict)
            out.append(ASCII.openBrace)
            var first = true
            for (key, member) in members {
                if !first { out.append(ASCII.comma) }
                first = false
                writeString(key, into: &out)
                out.append(ASCII.colon)
                try write(member, into: &out, depth: depth + 1, strict: strict)
            }
            out.append(ASCII.closeBrace)
        }
    }

    /// Refuses to open a container deeper than the parser would accept back.
    @inline(__always)
    private static func checkDepth(_ depth: Int, strict: Bool) throws {
        guard strict, depth >= JSON.maximumNestingDepth else { return }
        throw SofaError(
            .invalidValue,
            "cannot serialize arrays and objects nested deeper than \(JSON.maximumNestingDepth) levels")
    }

    /// Appends a number: whole numbers up to 2^53 as integers, others in Swift's shortest round-trip form.
    static func writeNumber(_ number: Double, into out: inout [UInt8], strict: Bool) throws {
        guard number.isFinite else {
            guard !strict else {
                throw SofaError(.invalidValue, "cannot serialize \(number) as JSON: it has no NaN or infinity")
            }
            appendLiteral(number.isNaN ? "NaN" : number < 0 ? "-Infinity" : "Infinity", to: &out)
            return
        }
        if number.magnitude <= 9_007_199_254_740_992, number == number.rounded(.towardZero) {
            if number.sign == .minus { out.append(ASCII.minus) }
            appendDecimal(UInt64(number.magnitude), to: &out)
            return
        }
        // `description` is the shortest text that reads back as the same double, and its forms (`0.1`,
        // `1e-07`, `1.5e+300`, `9.007199254740994e+15` beyond 2^53) are all JSON numbers.
        out.append(contentsOf: number.description.utf8)
    }

    /// Appends the decimal digits of `value`.
    @inline(__always)
    static func appendDecimal(_ value: UInt64, to out: inout [UInt8]) {
        if value < 10 {
            out.append(ASCII.zero + UInt8(value))
            return
        }
        var digitCount = 1
        var rest = value
        while rest >= 10 {
            rest /= 10
            digitCount += 1
        }
        let start = out.count
        out.append(contentsOf: repeatElement(ASCII.zero, count: digitCount))
        var position = start + digitCount - 1
        rest = value
        while rest > 0 {
            out[position] = ASCII.zero + UInt8(rest % 10)
            rest /= 10
            position -= 1
        }
    }

    /// Appends a quoted, escaped string.
    static func writeString(_ string: String, into out: inout [UInt8]) {
        out.append(ASCII.quote)
        let done: Void? = string.utf8.withContiguousStorageIfAvailable { appendEscaped($0, to: &out) }
        if done == nil {
            Array(string.utf8).withUnsafeBufferPointer { appendEscaped($0, to: &out) }
        }
        out.append(ASCII.quote)
    }

    /// Appends UTF-8 text with `"`, `\` and control characters escaped, copying the runs between them whole.
    private static func appendEscaped(_ utf8: UnsafeBufferPointer<UInt8>, to out: inout [UInt8]) {
        var runStart = 0
        for index in 0..<utf8.count {
            let byte = utf8[index]
            guard byte < ASCII.space || byte == ASCII.quote || byte == ASCII.backslash else { continue }
            if runStart < index { out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<index])) }
            runStart = index + 1
            out.append(ASCII.backslash)
            switch byte {
            case ASCII.quote: out.append(ASCII.quote)
            case ASCII.backslash: out.append(ASCII.backslash)
            case 0x08: out.append(UInt8(ascii: "b"))
            case 0x0C: out.append(UInt8(ascii: "f"))
            case ASCII.newline: out.append(UInt8(ascii: "n"))
            case ASCII.carriageReturn: out.append(UInt8(ascii: "r"))
            case ASCII.tab: out.append(UInt8(ascii: "t"))
            default:
                out.append(contentsOf: [ASCII.lowercaseU, ASCII.zero, ASCII.zero, hexDigit(byte >> 4), hexDigit(byte & 0xF)])
            }
        }
        if runStart < utf8.count { out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...])) }
    }

    @inline(__always)
    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? ASCII.zero + nibble : UInt8(ascii: "A") + nibble - 10
    }

    @inline(__always)
    private static func appendLiteral(_ literal: StaticString, to out: inout [UInt8]) {
        out.append(contentsOf: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }
}
