// The scalar tokens: strings (finding the closing quote, validating UTF-8, unescaping) and numbers.

// MARK: - Strings

extension JSONParser {
    /// Parses the rest of a string whose opening quote has been consumed, and steps over the closing quote.
    ///
    /// The fast path scans for the closing quote and makes the `String` straight from the input slice. It
    /// validates multi-byte UTF-8 itself so that a bad byte is an error naming its offset: `String(decoding:)`
    /// would replace it with U+FFFD without a word.
    mutating func parseStringBody() throws -> String {
        let start = index
        lastStringHadEscapes = false
        while index < bytes.count {
            skipPlainASCII()
            guard index < bytes.count else { break }
            let byte = bytes[index]
            if byte == ASCII.quote {
                let string = makeString(from: start, to: index)
                index += 1
                return string
            }
            if byte == ASCII.backslash {
                return try parseEscapedString(from: start)
            }
            if byte < ASCII.space {
                throw controlCharacterError()
            }
            try skipMultibyteScalar()
        }
        throw unterminatedString(openedAt: start - 1)
    }

    /// Advances `index` past ASCII string characters that need no attention, stopping at the first `"`, `\`,
    /// control character or non-ASCII byte (or near the end of the input).
    ///
    /// Eight bytes at a time: a SWAR test sets the high bit of every byte lane that holds one of those bytes.
    /// Borrows can flag lanes above a flagged one, never below, so the lowest flag is exact.
    @inline(__always)
    private mutating func skipPlainASCII() {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highBits: UInt64 = 0x8080_8080_8080_8080
        while index + 8 <= bytes.count {
            let word = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self))
            let quotes = word ^ (ones &* UInt64(ASCII.quote))
            let backslashes = word ^ (ones &* UInt64(ASCII.backslash))
            let zeroQuote = (quotes &- ones) & ~quotes
            let zeroBackslash = (backslashes &- ones) & ~backslashes
            let control = word &- (ones &* UInt64(ASCII.space))
            let flags = (zeroQuote | zeroBackslash | control | word) & highBits
            if flags != 0 {
                index += flags.trailingZeroBitCount >> 3
                return
            }
            index += 8
        }
        while index < bytes.count {
            let byte = bytes[index]
            if byte < ASCII.space || byte >= 0x80 || byte == ASCII.quote || byte == ASCII.backslash { return }
            index += 1
        }
    }

    /// The slow path for a string with escapes: unescapes into `scratch`, starting with the plain prefix
    /// `bytes[start..<index]` already scanned.
    private mutating func parseEscapedString(from start: Int) throws -> String {
        lastStringHadEscapes = true
        scratch.removeAll(keepingCapacity: true)
        scratch.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start..<index]))
        while index < bytes.count {
            let byte = bytes[index]
            if byte == ASCII.quote {
                index += 1
                return String(decoding: scratch, as: UTF8.self)
            }
            if byte == ASCII.backslash {
                try appendEscape()
            } else if byte < ASCII.space {
                throw controlCharacterError()
            } else if byte < 0x80 {
                scratch.append(byte)
                index += 1
            } else {
                let scalarStart = index
                try skipMultibyteScalar()
                scratch.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[scalarStart..<index]))
            }
        }
        throw unterminatedString(openedAt: start - 1)
    }

    /// Unescapes one escape sequence at `index` (at its backslash) into `scratch`.
    private mutating func appendEscape() throws {
        let escapeStart = index
        index += 1
        guard index < bytes.count else { throw unexpected("an escape character after '\\'") }
        let replacement: UInt8
        switch bytes[index] {
        case ASCII.quote: replacement = ASCII.quote
        case ASCII.backslash: replacement = ASCII.backslash
        case ASCII.slash: replacement = ASCII.slash
        case UInt8(ascii: "b"): replacement = 0x08
        case UInt8(ascii: "f"): replacement = 0x0C
        case UInt8(ascii: "n"): replacement = ASCII.newline
        case UInt8(ascii: "r"): replacement = ASCII.carriageReturn
        case UInt8(ascii: "t"): replacement = ASCII.tab
        case ASCII.lowercaseU:
            index += 1
            let scalar = try parseUnicodeEscape(startingAt: escapeStart)
            appendUTF8(scalar)
            return
        default:
            throw unexpected(#"one of '"', '\', '/', 'b', 'f', 'n', 'r', 't' or 'u' after '\'"#)
        }
        scratch.append(replacement)
        index += 1
    }

    /// Reads the hex digits of a `\u` escape (its `\u` consumed), combining a surrogate pair into one scalar.
    ///
    /// A high surrogate must be followed at once by a `\u` escape of a low surrogate; a low surrogate on its own
    /// is an error too. Such strings have no UTF-8 form, so accepting them would mean corrupting them.
    private mutating func parseUnicodeEscape(startingAt escapeStart: Int) throws -> Unicode.Scalar {
        let first = try parseHexQuad()
        switch first {
        case 0xD800...0xDBFF:
            let lowStart = index
            guard index + 1 < bytes.count, bytes[index] == ASCII.backslash, bytes[index + 1] == ASCII.lowercaseU else {
                throw SofaError(
                    .invalidJSON,
                    "expected a '\\u' escape of a low surrogate at offset \(index) to complete the high surrogate "
                        + "escape at offset \(escapeStart), found \(describeByte(at: index))",
                    offset: index)
            }
            index += 2
            let second = try parseHexQuad()
            guard (0xDC00...0xDFFF).contains(second) else {
                throw SofaError(
                    .invalidJSON,
                    "expected a low surrogate (\\uDC00–\\uDFFF) at offset \(lowStart) to complete the high "
                        + "surrogate escape at offset \(escapeStart), found \\u\(hex4(second))",
                    offset: lowStart)
            }
            let value = 0x10000 + ((UInt32(first) - 0xD800) << 10) + (UInt32(second) - 0xDC00)
            return Unicode.Scalar(value)!  // in 0x10000...0x10FFFF by construction
        case 0xDC00...0xDFFF:
            throw SofaError(
                .invalidJSON,
                "expected a high surrogate or a non-surrogate code point at offset \(escapeStart), "
                    + "found the lone low surrogate escape \\u\(hex4(first))",
                offset: escapeStart)
        default:
            return Unicode.Scalar(first)!  // not a surrogate, so a valid scalar
        }
    }

    /// Reads four hex digits.
    private mutating func parseHexQuad() throws -> UInt16 {
        var value: UInt16 = 0
        for _ in 0..<4 {
            guard index < bytes.count else { throw unexpected("a hex digit in a '\\u' escape") }
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case ASCII.zero...ASCII.nine: digit = byte - ASCII.zero
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw unexpected("a hex digit in a '\\u' escape")
            }
            value = value << 4 | UInt16(digit)
            index += 1
        }
        return value
    }

    /// Appends the UTF-8 encoding of `scalar` to `scratch`.
    private mutating func appendUTF8(_ scalar: Unicode.Scalar) {
        for unit in UTF8.encode(scalar)! { scratch.append(unit) }
    }

    /// Steps over one multi-byte UTF-8 sequence whose lead byte is at `index`, or throws naming the first
    /// offending byte: bad lead bytes, missing continuation bytes, overlong forms, surrogates, beyond U+10FFFF.
    @inline(__always)
    mutating func skipMultibyteScalar() throws {
        let lead = bytes[index]
        // The allowed range of the second byte depends on the lead byte (Unicode 15, table 3-7);
        // later continuation bytes are always 0x80...0xBF.
        let length: Int
        var secondLow: UInt8 = 0x80
        var secondHigh: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; secondLow = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: length = 3; secondHigh = 0x9F
        case 0xF0: length = 4; secondLow = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; secondHigh = 0x8F
        default: throw invalidUTF8(at: index)
        }
        guard index + 1 < bytes.count, (secondLow...secondHigh).contains(bytes[index + 1]) else {
            throw invalidUTF8(at: index + 1)
        }
        var offset = index + 2
        while offset < index + length {
            guard offset < bytes.count, bytes[offset] & 0xC0 == 0x80 else { throw invalidUTF8(at: offset) }
            offset += 1
        }
        index = offset
    }

    /// A `String` from the already validated UTF-8 in `bytes[start..<end]`.
    ///
    /// Copying into the string's own buffer is about a third cheaper than `String(decoding:)` for the short
    /// strings documents are made of (it skips a byte-by-byte copy into small-string form). The string still
    /// checks the bytes; they are valid, so nothing is repaired.
    @inline(__always)
    private func makeString(from start: Int, to end: Int) -> String {
        let slice = UnsafeRawBufferPointer(rebasing: bytes[start..<end])
        return String(unsafeUninitializedCapacity: slice.count) { buffer in
            UnsafeMutableRawBufferPointer(buffer).copyMemory(from: slice)
            return slice.count
        }
    }

    // MARK: Errors

    private func controlCharacterError() -> SofaError {
        SofaError(
            .invalidJSON,
            "expected '\"' or a string character at offset \(index), found the control character "
                + "U+00\(hex4(UInt16(bytes[index])).suffix(2)), which must be escaped inside a string",
            offset: index)
    }

    private func unterminatedString(openedAt quoteOffset: Int) -> SofaError {
        unexpected("'\"' to close the string that starts at offset \(quoteOffset)", at: bytes.count)
    }

    private func invalidUTF8(at offset: Int) -> SofaError {
        SofaError(
            .invalidJSON,
            "expected valid UTF-8 at offset \(offset), found \(describeByte(at: offset)) "
                + "(an ill-formed UTF-8 sequence)",
            offset: offset)
    }

    private func hex4(_ value: UInt16) -> String {
        let digits = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: 4 - digits.count) + digits
    }
}

// MARK: - Numbers: RFC 8259 grammar, correctly rounded to Double

extension JSONParser {
    /// Parses a number at `index` (at its `-` or first digit) to the nearest `Double`.
    ///
    /// Grammar (RFC 8259 §6): `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    ///
    /// Most numbers in documents are short: their decimal digits fit in a `UInt64` below 2^53 and their
    /// decimal exponent is within ±22, so one multiplication or division by an exact power of ten gives the
    /// correctly rounded result (Clinger's fast path). Everything else goes to the standard library's
    /// correctly rounded conversion. A number beyond the range of `Double` is an error, not infinity.
    mutating func parseNumber() throws -> Double {
        let start = index
        let negative = bytes[index] == ASCII.minus
        if negative { index += 1 }

        // Significant digits, without leading zeros, accumulated while they fit in 19 decimal digits.
        var significand: UInt64 = 0
        var significantDigits = 0
        var decimalExponent = 0

        guard index < bytes.count, isDigit(bytes[index]) else { throw unexpected("a digit") }
        if bytes[index] == ASCII.zero {
            index += 1
            if index < bytes.count, isDigit(bytes[index]) {
                throw unexpected("'.', 'e' or the end of the number after a leading '0' (no leading zeros)")
            }
        } else {
            while index < bytes.count, isDigit(bytes[index]) {
                accumulate(bytes[index], into: &significand, digits: &significantDigits)
                index += 1
            }
        }

        if index < bytes.count, bytes[index] == ASCII.dot {
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { throw unexpected("a digit after '.'") }
            while index < bytes.count, isDigit(bytes[index]) {
                accumulate(bytes[index], into: &significand, digits: &significantDigits)
                decimalExponent -= 1
                index += 1
            }
        }

        if index < bytes.count, bytes[index] == ASCII.lowercaseE || bytes[index] == ASCII.uppercaseE {
            index += 1
            var exponentNegative = false
            if index < bytes.count, bytes[index] == ASCII.plus || bytes[index] == ASCII.minus {
                exponentNegative = bytes[index] == ASCII.minus
                index += 1
            }
            guard index < bytes.count, isDigit(bytes[index]) else { throw unexpected("a digit in the exponent") }
            var exponent = 0
            while index < bytes.count, isDigit(bytes[index]) {
                // Saturate: any exponent this large already over- or underflows, and the slow path decides which.
                if exponent < 100_000 { exponent = exponent * 10 + Int(bytes[index] - ASCII.zero) }
                index += 1
            }
            decimalExponent += exponentNegative ? -exponent : exponent
        }

        if significantDigits <= 19, significand <= (1 << 53), let value = fastPath(significand, decimalExponent) {
            return negative ? -value : value
        }
        return try slowPath(from: start)
    }

    @inline(__always)
    private func isDigit(_ byte: UInt8) -> Bool {
        byte &- ASCII.zero < 10
    }

    /// Adds one decimal digit to the significand. Leading zeros are skipped; digits past the 19th do not fit
    /// a `UInt64` and only count (the fast path is then off, and the slow path rereads the text).
    @inline(__always)
    private func accumulate(_ byte: UInt8, into significand: inout UInt64, digits: inout Int) {
        let digit = UInt64(byte - ASCII.zero)
        if significand == 0 && digit == 0 { return }
        digits += 1
        if digits <= 19 { significand = significand &* 10 &+ digit }
    }

    /// `significand × 10^exponent` when both are exact doubles, so one IEEE operation rounds correctly.
    @inline(__always)
    private func fastPath(_ significand: UInt64, _ exponent: Int) -> Double? {
        let value = Double(significand)  // exact: significand ≤ 2^53
        if exponent == 0 || significand == 0 { return value }
        if exponent > 0 && exponent <= 22 { return value * exactPowersOfTen[exponent] }
        if exponent < 0 && exponent >= -22 { return value / exactPowersOfTen[-exponent] }
        return nil
    }

    /// Converts the number text `bytes[start..<index]` with the standard library, which rounds correctly for
    /// any length, and rejects results that overflow `Double`.
    private func slowPath(from start: Int) throws -> Double {
        let text = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        guard let value = Double(text), value.isFinite else {
            throw SofaError(
                .invalidJSON,
                "expected a number within the range of a 64-bit double at offset \(start), found \(text)",
                offset: start)
        }
        return value
    }
}

/// 10^0 … 10^22: every power of ten that a `Double` holds exactly.
private let exactPowersOfTen: [Double] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
]
