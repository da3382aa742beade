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
        // Not reserved ahead: the serializer's first flush allocates the array at the size it needs, which for
        // text under its 1 KiB staging buffer is the whole text's.
        var buffer: [UInt8] = []
        try JSONSerializer.write(self, into: &buffer, strict: true)
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
            try JSONSerializer.write(self, into: &buffer, strict: true)
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
        _ = try? JSONSerializer.write(self, into: &buffer, strict: false)
        return String(decoding: buffer, as: UTF8.self)
    }
}

// MARK: - Serializer

/// Writes `JSON` values as compact UTF-8 JSON text.
///
/// The first ``recursionDepth`` levels of arrays and objects are written by recursion, which reads each
/// container's items in place; deeper values continue without recursing, on an explicit stack, as the parser
/// does, so a value nested arbitrarily deep (one built in code, for ``JSON/description``) costs no more machine
/// stack than those levels. Bytes go through ``JSONOutput``, which stages them on the stack and appends to the
/// caller's array in large pieces.
enum JSONSerializer {
    /// Levels of arrays and objects written by recursion before ``writeDeep(_:depth:to:strict:)`` takes over:
    /// documents rarely nest deeper, and 64 frames are a few KiB of stack.
    static let recursionDepth = 64

    /// Appends `root` to `out`, and returns whether it is an object with a member whose name starts with `_`
    /// (a document's reserved members, which `put` takes out of the body: told while the names are written, not
    /// by a pass of their own). Non-strict mode is for `description`: it never throws, writing `NaN` and
    /// `Infinity` and ignoring the nesting limit. If it throws, `out` may hold part of the text.
    @discardableResult
    static func write(_ root: JSON, into out: inout [UInt8], strict: Bool) throws -> Bool {
        try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: JSONOutput.stagingCapacity) { staging in
            var output = JSONOutput(staging: staging)
            // Move the caller's array in and back out, so appending never copies it.
            swap(&output.destination, &out)
            defer {
                output.flush()
                swap(&output.destination, &out)
            }
            try write(root, depth: 0, to: &output, strict: strict)
            return output.underscoreMember
        }
    }

    /// Serializes `root` and calls `body` with its text, `headroom` bytes into the buffer `body` gets: the
    /// bytes before the text are the caller's to fill (a put stores its digest's prefix there and hashes the
    /// body where it lies). Text that fits the staging buffer is handed over where the serializer staged it, on
    /// the stack, so no array is made for it (a put's body array cost an allocation, a copy and a free: ~450
    /// instructions of D1's put, callgrind); longer text goes through an array, headroom first.
    ///
    /// - Parameters:
    ///   - headroom: bytes before the text in the buffer `body` gets; at most 64.
    ///   - body: called once with the headroom and the text (valid only during the call), and whether `root`
    ///     is an object with a member whose name starts with `_` (as ``write(_:into:strict:)`` returns it).
    /// - Throws: the serializer's errors (strict mode), before `body` is called; and what `body` throws.
    static func withUnsafeText<R>(
        of root: JSON, headroom: Int,
        _ body: (_ buffer: UnsafeMutableRawBufferPointer, _ underscoreMember: Bool) throws -> R
    ) throws -> R {
        precondition(headroom >= 0 && headroom <= 64, "headroom of \(headroom) bytes")
        // The headroom comes out of the staging buffer: a buffer over 1 KiB would be allocated on the heap.
        return try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: JSONOutput.stagingCapacity) { staging in
            var output = JSONOutput(staging: UnsafeMutableBufferPointer(rebasing: staging[headroom...]))
            // Should the text outgrow the staging buffer, its array starts with the headroom: no copy later.
            output.destinationHeadroom = headroom
            try write(root, depth: 0, to: &output, strict: true)
            let underscore = output.underscoreMember
            if output.destination.isEmpty {
                // All of it staged: the text follows the headroom in place.
                let count = headroom + output.stagedCount
                let staged = UnsafeMutableRawBufferPointer(staging)
                return try body(UnsafeMutableRawBufferPointer(rebasing: staged[..<count]), underscore)
            }
            output.flush()
            return try output.destination.withUnsafeMutableBytes { try body($0, underscore) }
        }
    }

    /// Writes `value`, which lies inside `depth` arrays and objects. Items and keys are read in place through
    /// their arrays' buffers, and no `OpenContainer` is built (the explicit stack's containers and the copies of
    /// items read from them were ~20 % of the serializer's instructions, callgrind); each item is still
    /// retained for its call.
    private static func write(_ value: JSON, depth: Int, to output: inout JSONOutput, strict: Bool) throws {
        if try writeScalar(value, to: &output, strict: strict) { return }
        guard depth < recursionDepth else { return try writeDeep(value, depth: depth, to: &output, strict: strict) }
        // An empty container is a level too, as it is for the parser. (Cannot throw while recursionDepth is below
        // the limit; kept so the limit holds whatever the two constants are.)
        try checkDepth(depth, strict: strict)
        switch value {
        case .array(let items):
            guard !items.isEmpty else { return output.append("[]") }
            output.append(ASCII.openBracket)
            try items.withUnsafeBufferPointer { items in
                for index in items.indices {
                    if index > 0 { output.append(ASCII.comma) }
                    if try !writeScalar(items[index], to: &output, strict: strict) {
                        try write(items[index], depth: depth + 1, to: &output, strict: strict)
                    }
                }
            }
            output.append(ASCII.closeBracket)
        case .object(let members):
            guard !members.isEmpty else { return output.append("{}") }
            output.append(ASCII.openBrace)
            try members.keys.elements.withUnsafeBufferPointer { keys in
                try members.values.withUnsafeBufferPointer { values in
                    for index in keys.indices {
                        if index > 0 { output.append(ASCII.comma) }
                        if output.appendString(keys[index]) == ASCII.underscore && depth == 0 {
                            output.underscoreMember = true
                        }
                        output.append(ASCII.colon)
                        if try !writeScalar(values[index], to: &output, strict: strict) {
                            try write(values[index], depth: depth + 1, to: &output, strict: strict)
                        }
                    }
                }
            }
            output.append(ASCII.closeBrace)
        case .null, .bool, .number, .string:
            return  // written by writeScalar above
        }
    }

    /// An array or object being written by ``writeDeep(_:depth:to:strict:)``, and which of its items comes next.
    ///
    /// Keys and values are held as plain arrays (sharing the object's storage), so reading a member costs an
    /// array subscript rather than building an `OrderedSet` view of the keys each time.
    private struct OpenContainer {
        var isObject = false
        /// The object's keys in stored order; empty for an array.
        var keys: [String] = []
        /// The array's items, or the object's values in the order of `keys`.
        var values: [JSON] = []
        /// The index of the next item to write.
        var position = 0
    }

    /// Writes `root`, an array or object inside `rootDepth` others, without recursing: open containers wait
    /// on an explicit stack (the innermost in local variables).
    private static func writeDeep(_ root: JSON, depth rootDepth: Int, to output: inout JSONOutput,
                                  strict: Bool) throws {
        var enclosing: [OpenContainer] = []
        var open = OpenContainer()  // the innermost open container; meaningful when depth > 0
        var depth = 0  // containers open below `root`'s level
        var next = root  // the value to write now: the root, or an array or object met inside `open`
        descend: while true {
            if try !writeScalar(next, to: &output, strict: strict) {
                // An empty container is a level too, as it is for the parser.
                try checkDepth(rootDepth + depth, strict: strict)
                let container: OpenContainer
                if case .object(let members) = next {
                    container = OpenContainer(isObject: true, keys: members.keys.elements,
                                              values: members.values.elements)
                } else if case .array(let items) = next {
                    container = OpenContainer(isObject: false, values: items)
                } else {
                    preconditionFailure("writeScalar declines only arrays and objects")
                }
                if container.values.isEmpty {
                    output.append(container.isObject ? "{}" : "[]")
                } else {
                    output.append(container.isObject ? ASCII.openBrace : ASCII.openBracket)
                    if depth > 0 { enclosing.append(open) }
                    depth += 1
                    open = container
                }
            }

            // Write the items of the innermost container, scalars in place; an array or object among them is
            // opened by the outer loop. Finished containers are closed on the way out.
            while depth > 0 {
                while open.position < open.values.count {
                    let index = open.position
                    open.position += 1
                    if index > 0 { output.append(ASCII.comma) }
                    if open.isObject {
                        output.appendString(open.keys[index])
                        output.append(ASCII.colon)
                    }
                    if try !writeScalar(open.values[index], to: &output, strict: strict) {
                        next = open.values[index]
                        continue descend
                    }
                }
                output.append(open.isObject ? ASCII.closeBrace : ASCII.closeBracket)
                depth -= 1
                open = enclosing.popLast() ?? OpenContainer()
            }
            return
        }
    }

    /// Writes `value` if it is a scalar and returns true; returns false, writing nothing, for an array or object.
    @inline(__always)
    private static func writeScalar(_ value: JSON, to output: inout JSONOutput, strict: Bool) throws -> Bool {
        switch value {
        case .null: output.append("null")
        case .bool(let flag): output.append(flag ? "true" : "false")
        case .number(let number): try output.appendNumber(number, strict: strict)
        case .string(let string): output.appendString(string)
        case .array, .object: return false
        }
        return true
    }

    /// Refuses to open a container deeper than the parser would accept back.
    @inline(__always)
    private static func checkDepth(_ depth: Int, strict: Bool) throws {
        guard strict, depth >= JSON.maximumNestingDepth else { return }
        throw SofaError(
            .invalidValue,
            "cannot serialize arrays and objects nested deeper than \(JSON.maximumNestingDepth) levels")
    }
}
