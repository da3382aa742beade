// Writing collation keys: JSON → bytes. The layout is described at the top of CollationKey.swift.

extension CollationKey {
    /// The one-byte type tags. They rise in collation order; `end` is below all of them.
    enum Tag {
        /// Closes the innermost array or object.
        static let end: UInt8 = 0x00
        static let null: UInt8 = 0x10
        static let `false`: UInt8 = 0x20
        static let `true`: UInt8 = 0x21
        /// Followed by 8 bytes, see ``CollationKey/orderedBits(_:)``.
        static let number: UInt8 = 0x30
        /// Followed by an ICU sort key and its terminating 0x00.
        static let string: UInt8 = 0x40
        /// Followed by items, then `end`.
        static let array: UInt8 = 0x50
        /// Followed by (name sort key, value) pairs, then `end`.
        static let object: UInt8 = 0x60
    }

    /// Why a key could not be encoded. Thrown (typed, so without boxing) inside the recursion and turned into a
    /// ``SofaError`` once, at the top, where the whole key is at hand to say where the problem is.
    enum EncodingFailure: Error {
        case nonFinite
        case tooDeep
        case collator
    }

    /// Appends `value`, which sits `depth` arrays/objects deep in the key, to `buffer`.
    static func append(_ value: JSON, to buffer: inout [UInt8], depth: Int) throws(EncodingFailure) {
        switch value {
        case .null:
            buffer.append(Tag.null)
        case .bool(let flag):
            buffer.append(flag ? Tag.true : Tag.false)
        case .number(let number):
            guard number.isFinite else { throw .nonFinite }
            buffer.append(Tag.number)
            withUnsafeBytes(of: orderedBits(number).bigEndian) { buffer.append(contentsOf: $0) }
        case .string(let string):
            buffer.append(Tag.string)
            guard ICUCollator.appendSortKey(of: string, to: &buffer) else { throw .collator }
        case .array(let items):
            guard depth < maxDepth else { throw .tooDeep }
            buffer.append(Tag.array)
            for item in items {
                try append(item, to: &buffer, depth: depth + 1)
            }
            buffer.append(Tag.end)
        case .object(let members):
            guard depth < maxDepth else { throw .tooDeep }
            buffer.append(Tag.object)
            for (name, member) in members {
                guard ICUCollator.appendSortKey(of: name, to: &buffer) else { throw .collator }
                try append(member, to: &buffer, depth: depth + 1)
            }
            buffer.append(Tag.end)
        }
    }

    /// The bits of a finite double, transformed so that unsigned integer order is numeric order.
    ///
    /// A non-negative double's bits already rise with its value: setting the sign bit lifts them above all
    /// negatives. A negative double's bits rise with its magnitude: flipping them all reverses that and clears
    /// the sign bit. -0.0 is taken as +0.0 first, so both give `0x8000_0000_0000_0000`.
    @inline(__always)
    static func orderedBits(_ number: Double) -> UInt64 {
        let bits = number == 0 ? 0 : number.bitPattern
        return bits & (1 << 63) != 0 ? ~bits : bits | (1 << 63)
    }

    /// The double whose ``orderedBits(_:)`` are `ordered` (which may be NaN, infinite or -0.0 when the bytes
    /// did not come from the encoder: callers check).
    @inline(__always)
    static func number(fromOrderedBits ordered: UInt64) -> Double {
        Double(bitPattern: ordered & (1 << 63) != 0 ? ordered & ~(1 << 63) : ~ordered)
    }
}

extension CollationKey.EncodingFailure {
    /// The error to show a person: what is wrong and where in `key`, found by a second, slow walk (only on
    /// failure, so the encoder itself keeps no path).
    func sofaError(for key: JSON) -> SofaError {
        switch self {
        case .collator:
            return SofaError(
                .collationUnavailable,
                "ICU's root collator could not make a sort key (it could not be opened, or memory ran out); "
                    + "check that the ICU data library (libicudata) is installed")
        case .nonFinite:
            let (number, path) = Self.firstNonFinite(in: key, path: "key") ?? (.nan, "key")
            return SofaError(
                .invalidValue,
                "\(number) cannot be a key or part of one (at \(path)): NaN and infinity have no place in "
                    + "JSON collation; emit null or a finite number instead")
        case .tooDeep:
            return SofaError(
                .invalidValue,
                "key nests arrays and objects more than \(CollationKey.maxDepth) levels deep; "
                    + "emit a flatter key")
        }
    }

    /// The first NaN or infinity in `value`, in encoding order, and its path (`key[2]["year"]`).
    private static func firstNonFinite(in value: JSON, path: String) -> (Double, String)? {
        switch value {
        case .number(let number) where !number.isFinite:
            return (number, path)
        case .array(let items):
            for (index, item) in items.enumerated() {
                if let found = firstNonFinite(in: item, path: "\(path)[\(index)]") { return found }
            }
        case .object(let members):
            for (name, member) in members {
                if let found = firstNonFinite(in: member, path: "\(path)[\(quoted(name))]") { return found }
            }
        default:
            break
        }
        return nil
    }

    /// A member name as a JSON string literal, for paths in messages.
    private static func quoted(_ name: String) -> String {
        var text = "\""
        for scalar in name.unicodeScalars {
            switch scalar {
            case "\"": text += "\\\""
            case "\\": text += "\\\\"
            case _ where scalar.value < 0x20: text += "\\u{\(String(scalar.value, radix: 16))}"
            default: text.unicodeScalars.append(scalar)
            }
        }
        return text + "\""
    }
}
