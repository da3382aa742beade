// CouchDB's JSON collation as a comparison of values (DESIGN.md §2). `CollationKey` is the same order as bytes;
// the two must always agree, and the property tests in Tests/SofaTests/Collation check that they do.

extension JSON {
    /// Compares two values in CouchDB's view collation: -1 if `a` sorts first, 0 if they collate equal, 1 if
    /// `b` sorts first.
    ///
    /// The order, with types first:
    /// - `null < false < true < numbers < strings < arrays < objects`;
    /// - numbers numerically (`1 == 1.0`, `-0 == 0`);
    /// - strings as ICU's root collator orders them at tertiary strength (`ucol_strcollUTF8`): symbols, then
    ///   digits, then letters, accents and then case as tie-breaks: `"~" < "1" < "a" < "A" < "á" < "aa" < "b"`;
    /// - arrays item by item, a prefix first: `["b"] < ["b", "c"] < ["b", "d"]`;
    /// - objects member by member in stored order, each by name (string collation) then by value, a prefix
    ///   first: `{"a":2} < {"b":1} < {"b":2} < {"b":2,"a":1} < {"b":2,"c":2}`.
    ///
    /// It equals the byte order of ``CollationKey``: `collate(a, b)` has the sign of comparing
    /// `CollationKey(a).bytes` with `CollationKey(b).bytes`.
    ///
    /// Values that cannot be keys still compare, so sorting never fails: NaN sorts after every other number and
    /// equal to NaN, infinities sort as the extremes they are, and nesting depth is not limited (the recursion
    /// goes as deep as the shallower value; keys that went through ``CollationKey`` are at most
    /// ``CollationKey/maxDepth`` deep).
    ///
    /// ```swift
    /// JSON.collate(["Rock", 1971], ["Rock", "1971"])   // -1: numbers before strings
    /// JSON.collate(1, 1.0)                             // 0
    /// ```
    ///
    /// - Parameters:
    ///   - a: The first value.
    ///   - b: The second value.
    /// - Returns: -1, 0 or 1.
    public static func collate(_ a: JSON, _ b: JSON) -> Int {
        let rankA = a.collationRank, rankB = b.collationRank
        if rankA != rankB { return rankA < rankB ? -1 : 1 }
        switch (a, b) {
        case (.number(let x), .number(let y)):
            return collateNumbers(x, y)
        case (.string(let x), .string(let y)):
            return ICUCollator.compare(x, y)
        case (.array(let x), .array(let y)):
            return collateArrays(x, y)
        case (.object(let x), .object(let y)):
            return collateObjects(x, y)
        default:
            // null, false and true: one value per rank.
            return 0
        }
    }

    /// The value's place in the type order; false and true get separate ranks, so equal ranks of those are
    /// equal values. These are the type tags of ``CollationKey``'s encoding.
    @inline(__always)
    private var collationRank: UInt8 {
        switch self {
        case .null: CollationKey.Tag.null
        case .bool(let flag): flag ? CollationKey.Tag.true : CollationKey.Tag.false
        case .number: CollationKey.Tag.number
        case .string: CollationKey.Tag.string
        case .array: CollationKey.Tag.array
        case .object: CollationKey.Tag.object
        }
    }

    /// Numeric order, with NaN after everything and equal to itself so that the order stays total.
    @inline(__always)
    private static func collateNumbers(_ x: Double, _ y: Double) -> Int {
        if x < y { return -1 }
        if x > y { return 1 }
        if x == y { return 0 }  // includes -0.0 == 0.0
        return x.isNaN ? (y.isNaN ? 0 : 1) : -1
    }

    private static func collateArrays(_ x: [JSON], _ y: [JSON]) -> Int {
        let common = min(x.count, y.count)
        for index in 0..<common {
            let order = collate(x[index], y[index])
            if order != 0 { return order }
        }
        return x.count == y.count ? 0 : (x.count < y.count ? -1 : 1)
    }

    private static func collateObjects(_ x: JSONObject, _ y: JSONObject) -> Int {
        let common = min(x.count, y.count)
        for index in 0..<common {
            let memberX = x.elements[index], memberY = y.elements[index]
            let nameOrder = ICUCollator.compare(memberX.key, memberY.key)
            if nameOrder != 0 { return nameOrder }
            let valueOrder = collate(memberX.value, memberY.value)
            if valueOrder != 0 { return valueOrder }
        }
        return x.count == y.count ? 0 : (x.count < y.count ? -1 : 1)
    }
}
