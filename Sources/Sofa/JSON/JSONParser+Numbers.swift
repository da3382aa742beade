// Numbers: RFC 8259 grammar, correctly rounded to Double.

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
                throw unexpected("'.', 'e' or the end of the number after a leading '0' (leading zeros are not allowed)")
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
