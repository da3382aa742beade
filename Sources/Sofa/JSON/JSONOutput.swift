/// Where the serializer writes: a fixed staging buffer, flushed to a byte array in large pieces.
///
/// Appending a few bytes at a time to an `Array` costs a uniqueness and capacity check each time, which was
/// most of the serializer's time; stores into the staging buffer are plain stores through a cursor.
///
/// Invariant: `start <= cursor <= end`, and every store at `cursor` first makes room for all the bytes it
/// writes (`reserve`), flushing if need be.
struct JSONOutput: ~Copyable {
    /// Bytes staged on the stack by `JSONSerializer.write`; big enough for any number or escape sequence.
    static let stagingCapacity = 1024

    /// The staging buffer, `start..<end`; valid only inside the `withUnsafeTemporaryAllocation` call that
    /// provided it.
    private let start: UnsafeMutablePointer<UInt8>
    /// The end of the staging buffer.
    private let end: UnsafeMutablePointer<UInt8>
    /// Where the next byte goes: `start..<cursor` is waiting to be flushed. A cursor rather than a count, so a
    /// store is one pointer write and one increment (callgrind: ~8 % of the serializer's instructions).
    private var cursor: UnsafeMutablePointer<UInt8>
    /// Where flushed bytes go.
    var destination: [UInt8] = []
    /// Whether the value written is an object with a member whose name starts with `_` (set by the serializer).
    var underscoreMember = false
    /// Zero bytes the first flush puts in an empty ``destination`` before the text
    /// (``JSONSerializer/withUnsafeText(of:headroom:_:)``'s headroom); 0 for every other use.
    var destinationHeadroom = 0

    init(staging: UnsafeMutableBufferPointer<UInt8>) {
        start = staging.baseAddress!
        end = start + staging.count
        cursor = start
    }

    /// Bytes staged and not yet flushed.
    var stagedCount: Int { cursor - start }

    /// Moves the staged bytes to `destination`.
    mutating func flush() {
        // (Before the guard: a long run appended straight to `destination` after a flush of nothing follows it.)
        if destinationHeadroom > 0 {
            destination.append(contentsOf: repeatElement(0, count: destinationHeadroom))
            destinationHeadroom = 0
        }
        guard cursor > start else { return }
        destination.append(contentsOf: UnsafeBufferPointer(start: start, count: cursor - start))
        cursor = start
    }

    /// Makes room for `count` staged bytes (`count <= stagingCapacity`).
    @inline(__always)
    private mutating func reserve(_ count: Int) {
        if end - cursor < count { flush() }
    }

    @inline(__always)
    mutating func append(_ byte: UInt8) {
        reserve(1)
        cursor.pointee = byte
        cursor += 1
    }

    @inline(__always)
    mutating func append(_ literal: StaticString) {
        append(UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    /// Appends raw bytes, staging them when they fit and passing long runs straight through.
    @inline(__always)
    mutating func append(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard let source = bytes.baseAddress else { return }
        if end - cursor < bytes.count {
            flush()
            if bytes.count > end - start {
                destination.append(contentsOf: bytes)
                return
            }
        }
        cursor.update(from: source, count: bytes.count)
        cursor += bytes.count
    }

    // MARK: Numbers

    /// Appends a number: whole numbers up to 2^53 as integers, others in Swift's shortest round-trip form.
    mutating func appendNumber(_ number: Double, strict: Bool) throws {
        guard number.isFinite else {
            guard !strict else {
                throw SofaError(.invalidValue, "cannot serialize \(number) as JSON: it has no NaN or infinity")
            }
            append(number.isNaN ? "NaN" : number < 0 ? "-Infinity" : "Infinity")
            return
        }
        // Whole when converting to an integer and back is exact (no `rounded`, a libm call); in range, the
        // conversion cannot trap. -0 converts to 0 and keeps its sign through `sign`.
        if number.magnitude <= 9_007_199_254_740_992, Double(Int64(number)) == number {
            if number.sign == .minus { append(ASCII.minus) }
            appendDecimal(Int64(number).magnitude)
            return
        }
        // `description` is the shortest text that reads back as the same double, and its forms (`0.1`,
        // `1e-07`, `1.5e+300`, `9.007199254740994e+15` beyond 2^53) are all JSON numbers.
        var text = number.description
        text.withUTF8 { append($0) }
    }

    /// Appends the decimal digits of `value`, written backwards into place.
    @inline(__always)
    mutating func appendDecimal(_ value: UInt64) {
        var digitCount = 1
        var rest = value
        while rest >= 10 {
            rest /= 10
            digitCount += 1
        }
        reserve(digitCount)
        var position = cursor + digitCount
        rest = value
        repeat {
            position -= 1
            position.pointee = ASCII.zero &+ UInt8(truncatingIfNeeded: rest % 10)
            rest /= 10
        } while rest > 0
        cursor += digitCount
    }

    // MARK: Strings

    /// Appends a quoted string with `"`, `\` and control characters escaped, and returns its first UTF-8 byte
    /// (0 for an empty string): the serializer tells a document's reserved `_` members by it.
    @discardableResult
    mutating func appendString(_ string: String) -> UInt8 {
        // Native strings (small ones included) are contiguous: read them in place, without copying the value.
        if let first = string.utf8.withContiguousStorageIfAvailable({ appendQuoted($0) }) { return first }
        return appendNonContiguousString(string)
    }

    /// ``appendString(_:)`` for a string whose UTF-8 is not stored contiguously (one bridged or sliced).
    private mutating func appendNonContiguousString(_ string: String) -> UInt8 {
        var string = string
        return string.withUTF8 { appendQuoted($0) }
    }

    /// Appends `utf8` quoted and escaped. Most text needs no escape: text of up to 16 bytes that needs none is
    /// checked in registers on its way to the staging buffer (``appendShortClean(_:count:)``; 16 % off the
    /// serializer's time on the benchmark documents, whose names and values are mostly that short); other text
    /// that fits the staging buffer is copied in whole first and then checked where it lies, one copy and one
    /// word-wise scan, and escaped from its first byte needing it.
    @inline(__always)
    private mutating func appendQuoted(_ utf8: UnsafeBufferPointer<UInt8>) -> UInt8 {
        let count = utf8.count
        let first = count > 0 ? utf8[0] : 0
        if count <= 16, let source = utf8.baseAddress, appendShortClean(source, count: count) { return first }
        // The quotes, and 8 bytes of padding after the text: the scan reads whole words past its end.
        let room = count + 2 + 8
        guard room <= end - start, let source = utf8.baseAddress else {
            append(ASCII.quote)
            appendEscapedAndClose(utf8, from: 0)
            return first
        }
        reserve(room)
        let text = cursor + 1
        text[-1] = ASCII.quote
        text.update(from: source, count: count)
        // Bytes that never need escaping, so the scan's last word flags nothing beyond the text.
        UnsafeMutableRawPointer(text + count).storeBytes(of: Self.paddingWord, as: UInt64.self)
        let clean = Self.firstStagedByteNeedingEscape(UnsafeRawPointer(text), count: count)
        if clean == count {
            text[count] = ASCII.quote
            cursor += count + 2
        } else {
            // Keep the opening quote and the clean prefix just copied.
            cursor += 1 + clean
            appendEscapedAndClose(utf8, from: clean)
        }
        return first
    }

    /// Appends `"text"` for text of at most 16 bytes that needs no escape, and returns true; returns false,
    /// writing nothing, when a byte needs one. The text is read in two overlapping words (8 bytes each for 8–16,
    /// 4 for 4–7; the first, middle and last byte for 1–3) kept in registers, tested there and stored: no call to
    /// `memmove`, and no word read back from fresh stores. Only whether a lane is flagged matters, not which, so
    /// the lanes' order (the host's byte order) does not.
    @inline(__always)
    private mutating func appendShortClean(_ source: UnsafePointer<UInt8>, count: Int) -> Bool {
        // The quotes and up to 16 bytes fit the 18 reserved; every load ends by `source + count`.
        reserve(18)
        let text = UnsafeMutableRawPointer(cursor + 1)
        let raw = UnsafeRawPointer(source)
        if count >= 8 {
            let head = raw.loadUnaligned(as: UInt64.self)
            let tail = raw.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self)
            guard Self.escapeFlags(head) | Self.escapeFlags(tail) == 0 else { return false }
            text.storeBytes(of: head, as: UInt64.self)
            text.storeBytes(of: tail, toByteOffset: count - 8, as: UInt64.self)
        } else if count >= 4 {
            let head = raw.loadUnaligned(as: UInt32.self)
            let tail = raw.loadUnaligned(fromByteOffset: count - 4, as: UInt32.self)
            guard Self.escapeFlags(UInt64(head) | UInt64(tail) << 32) == 0 else { return false }
            text.storeBytes(of: head, as: UInt32.self)
            text.storeBytes(of: tail, toByteOffset: count - 4, as: UInt32.self)
        } else if count > 0 {
            // The first, middle and last bytes cover a text of 1–3; the padding fills the other five lanes.
            let first = source[0], middle = source[count >> 1], last = source[count - 1]
            let word = Self.paddingWord << 24 | UInt64(last) << 16 | UInt64(middle) << 8 | UInt64(first)
            guard Self.escapeFlags(word) == 0 else { return false }
            text.storeBytes(of: first, as: UInt8.self)
            text.storeBytes(of: middle, toByteOffset: count >> 1, as: UInt8.self)
            text.storeBytes(of: last, toByteOffset: count - 1, as: UInt8.self)
        }
        cursor.pointee = ASCII.quote
        cursor[count + 1] = ASCII.quote
        cursor += count + 2
        return true
    }

    /// Appends `utf8[offset...]` escaped, then the closing quote: the rest of a string whose opening quote and
    /// first `offset` bytes are written.
    private mutating func appendEscapedAndClose(_ utf8: UnsafeBufferPointer<UInt8>, from offset: Int) {
        appendEscaped(UnsafeBufferPointer(rebasing: utf8[offset...]))
        append(ASCII.quote)
    }

    /// Eight `A`s: padding that ``escapeFlags(_:)`` never flags.
    private static var paddingWord: UInt64 { 0x4141_4141_4141_4141 }

    /// The offset of the first byte of `text` needing an escape, or `count`. Reads whole words, up to 7 bytes
    /// past `count`: the caller has padded the text with ``paddingWord``.
    @inline(__always)
    private static func firstStagedByteNeedingEscape(_ text: UnsafeRawPointer, count: Int) -> Int {
        var offset = 0
        while offset < count {
            let flags = escapeFlags(UInt64(littleEndian: text.loadUnaligned(fromByteOffset: offset, as: UInt64.self)))
            if flags != 0 { return offset + flags.trailingZeroBitCount >> 3 }
            offset += 8
        }
        return count
    }

    /// A SWAR test over eight bytes: sets the high bit of every byte lane holding `"`, `\` or a control
    /// character (bytes of 0x80 and up are masked out: non-ASCII is written as is). Borrows only flag lanes
    /// above a flagged one, so the lowest flag is exact.
    @inline(__always)
    private static func escapeFlags(_ word: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highBits: UInt64 = 0x8080_8080_8080_8080
        let quotes = word ^ (ones &* UInt64(ASCII.quote))
        let backslashes = word ^ (ones &* UInt64(ASCII.backslash))
        return ((quotes &- ones) & ~quotes | (backslashes &- ones) & ~backslashes
            | (word &- ones &* UInt64(ASCII.space)) & ~word) & highBits
    }

    /// Appends UTF-8 text with `"`, `\` and control characters escaped, copying the runs between them whole.
    private mutating func appendEscaped(_ utf8: UnsafeBufferPointer<UInt8>) {
        var runStart = 0
        var index = 0
        while true {
            index = Self.firstByteNeedingEscape(in: utf8, from: index)
            guard index < utf8.count else { break }
            append(UnsafeBufferPointer(rebasing: utf8[runStart..<index]))
            appendEscape(for: utf8[index])
            index += 1
            runStart = index
        }
        append(UnsafeBufferPointer(rebasing: utf8[runStart...]))
    }

    /// The offset of the first `"`, `\` or control character at or after `start`, or `utf8.count`: eight bytes
    /// at a time (``escapeFlags(_:)``), then byte by byte.
    @inline(__always)
    private static func firstByteNeedingEscape(in utf8: UnsafeBufferPointer<UInt8>, from start: Int) -> Int {
        var index = start
        let raw = UnsafeRawBufferPointer(utf8)
        while index + 8 <= utf8.count {
            let flags = escapeFlags(UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)))
            if flags != 0 { return index + flags.trailingZeroBitCount >> 3 }
            index += 8
        }
        while index < utf8.count {
            let byte = utf8[index]
            if byte < ASCII.space || byte == ASCII.quote || byte == ASCII.backslash { return index }
            index += 1
        }
        return index
    }

    /// Appends the escape sequence for `byte`: the short forms RFC 8259 names, `\u00XX` for other controls.
    private mutating func appendEscape(for byte: UInt8) {
        reserve(6)
        let short: UInt8
        switch byte {
        case ASCII.quote: short = ASCII.quote
        case ASCII.backslash: short = ASCII.backslash
        case 0x08: short = UInt8(ascii: "b")
        case 0x0C: short = UInt8(ascii: "f")
        case ASCII.newline: short = UInt8(ascii: "n")
        case ASCII.carriageReturn: short = UInt8(ascii: "r")
        case ASCII.tab: short = UInt8(ascii: "t")
        default:
            for unit in [ASCII.backslash, ASCII.lowercaseU, ASCII.zero, ASCII.zero] { append(unit) }
            append(Self.hexDigit(byte >> 4))
            append(Self.hexDigit(byte & 0xF))
            return
        }
        append(ASCII.backslash)
        append(short)
    }

    @inline(__always)
    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? ASCII.zero + nibble : UInt8(ascii: "A") + nibble - 10
    }
}
