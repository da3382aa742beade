import SofaStorage

extension SofaError.Code {
    /// A custom reduce function's output does not shrink: larger than
    /// ``Reduce/reduceLimitBytes`` and more than half the size of its input (CouchDB's `reduce_limit`). Such a
    /// function would make every stored reduction grow with the index; return a summary instead.
    public static let reduceOverflow = SofaError.Code(rawValue: "reduceOverflow")
    /// A custom reduce function threw; the message carries its error.
    public static let reduceFailed = SofaError.Code(rawValue: "reduceFailed")
}

/// A view's reduce function: a built-in, or your own.
///
/// Built-ins read the stored rows without building JSON and rereduce natively, so a reduced or grouped query
/// uses the reductions stored with every subtree of the index.
///
/// ```swift
/// view.setMapReduce(version: "1", map: { doc, emit in emit(doc["date"] ?? nil, doc["price"]) }, reduce: .sum)
/// view.setMapReduce(version: "2", map: map, reduce: .custom { keys, values, rereduce in
///     rereduce ? .number(View.totalValues(values)) : .number(Double(values.count))
/// })
/// ```
public enum Reduce: Sendable {
    /// The number of rows.
    case count
    /// The total of the numeric values; other values count as 0 (``View/totalValues(_:)``).
    case sum
    /// `{"sum", "count", "min", "max", "sumsqr"}` of the numeric values; other values are left out (`min` and
    /// `max` are `null` when there is no number).
    case stats
    /// Your function: given keys and values (or, with `rereduce`, earlier outputs of the function and no keys),
    /// returns one value. It must be pure, thread-safe, and shrink its input (``reduceLimitBytes``).
    /// Absent values are passed as `null`.
    case custom(@Sendable (_ keys: [JSON], _ values: [JSON], _ rereduce: Bool) throws -> JSON)

    /// Outputs up to this many bytes (packed) are always accepted from a custom reduce; larger ones must be at
    /// most half their input's size (CouchDB's `reduce_limit` rule).
    public static let reduceLimitBytes = 200

    /// The kind byte stored in an index header (FORMAT.md §10.2): a change of kind resets the index.
    var kind: UInt8 {
        switch self {
        case .count: 1
        case .sum: 2
        case .stats: 3
        case .custom: 4
        }
    }

    /// The built-in for a stored kind byte (nil for none or custom).
    static func builtIn(kind: UInt8) -> Reduce? {
        switch kind {
        case 1: .count
        case 2: .sum
        case 3: .stats
        default: nil
        }
    }

    /// The name used by declarative definitions and the `sofa` tool.
    var name: String {
        switch self {
        case .count: "count"
        case .sum: "sum"
        case .stats: "stats"
        case .custom: "custom"
        }
    }

    /// A built-in by name (`count`, `sum`, `stats`).
    static func builtIn(named name: String) -> Reduce? {
        switch name {
        case "count", "_count": .count
        case "sum", "_sum": .sum
        case "stats", "_stats": .stats
        default: nil
        }
    }
}

/// The `Reducer` a rows tree is built with: computes a ``Reduce``'s stored reduction from row bytes.
///
/// Stored forms (FORMAT.md §10.2, "Reductions"): count — nothing (the pointer's row count is the answer);
/// sum — a little-endian double; stats — five little-endian doubles, sum, count, min, max, sumsqr; custom —
/// the packed JSON of the function's output.
struct ViewReducer: Reducer {
    let reduce: Reduce

    func reduce(_ entries: [(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)]) throws -> [UInt8] {
        switch reduce {
        case .count:
            return []
        case .sum:
            var sum = 0.0
            for e in entries { sum += RowValue.number(e.value) ?? 0 }
            return withUnsafeBytes(of: sum.bitPattern.littleEndian) { Array($0) }
        case .stats:
            var stats = Stats()
            for e in entries { if let n = RowValue.number(e.value) { stats.add(n) } }
            return stats.encoded()
        case .custom(let function):
            var keys: [JSON] = [], values: [JSON] = []
            keys.reserveCapacity(entries.count)
            values.reserveCapacity(entries.count)
            var inputSize = 0
            for e in entries {
                let row = try RowValue(e.value)
                keys.append(row.key)
                values.append(row.value ?? .null)
                inputSize += e.value.count
            }
            return try ViewReducer.call(function, keys, values, rereduce: false, inputSize: inputSize)
        }
    }

    func rereduce(_ reductions: [UnsafeRawBufferPointer]) throws -> [UInt8] {
        switch reduce {
        case .count:
            return []
        case .sum:
            var sum = 0.0
            for r in reductions where r.count == 8 {
                sum += Double(bitPattern: UInt64(littleEndian: r.loadUnaligned(as: UInt64.self)))
            }
            return withUnsafeBytes(of: sum.bitPattern.littleEndian) { Array($0) }
        case .stats:
            var stats = Stats()
            for r in reductions { stats.merge(try Stats(decoding: r)) }
            return stats.encoded()
        case .custom(let function):
            var values: [JSON] = []
            var inputSize = 0
            for r in reductions {
                values.append(try PackedJSON.decode(r) ?? .null)
                inputSize += r.count
            }
            return try ViewReducer.call(function, [], values, rereduce: true, inputSize: inputSize)
        }
    }

    private static func call(_ function: @Sendable ([JSON], [JSON], Bool) throws -> JSON, _ keys: [JSON],
                             _ values: [JSON], rereduce: Bool, inputSize: Int) throws -> [UInt8] {
        let output: JSON
        do {
            output = try function(keys, values, rereduce)
        } catch {
            throw SofaError(.reduceFailed, "the reduce function threw: \(error)")
        }
        let packed = PackedJSON.encode(output)
        if packed.count > Reduce.reduceLimitBytes && packed.count * 2 > inputSize {
            throw SofaError(.reduceOverflow, """
                reduce output of \(packed.count) bytes from \(inputSize) bytes of input does not shrink; a reduce \
                function must summarize its input (return a count, total or small object), not collect it
                """)
        }
        return packed
    }

    /// The JSON a query shows for a stored reduction of `rowCount` rows.
    func output(_ reduction: [UInt8], rowCount: UInt64) throws -> JSON {
        try reduction.withUnsafeBytes { try output($0, rowCount: rowCount) }
    }

    /// ``output(_:rowCount:)`` reading the reduction in place (a stored group aggregate's).
    func output(_ reduction: UnsafeRawBufferPointer, rowCount: UInt64) throws -> JSON {
        switch reduce {
        case .count:
            return .number(Double(rowCount))
        case .sum:
            guard reduction.count == 8 else {
                throw SofaError(.corruption, "a sum reduction of \(reduction.count) bytes; 8 expected")
            }
            return .number(Double(bitPattern: UInt64(littleEndian: reduction.loadUnaligned(as: UInt64.self))))
        case .stats:
            return try Stats(decoding: reduction).json
        case .custom:
            return try PackedJSON.decode(reduction) ?? .null
        }
    }
}

/// The `stats` reduction: sum, count, min, max and sum of squares of the numeric values.
struct Stats: Equatable {
    var sum = 0.0, count = 0.0, min = Double.infinity, max = -Double.infinity, sumsqr = 0.0

    init() {}

    mutating func add(_ n: Double) {
        sum += n
        count += 1
        min = Swift.min(min, n)
        max = Swift.max(max, n)
        sumsqr += n * n
    }

    mutating func merge(_ o: Stats) {
        sum += o.sum
        count += o.count
        min = Swift.min(min, o.min)
        max = Swift.max(max, o.max)
        sumsqr += o.sumsqr
    }

    func encoded() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(40)
        for v in [sum, count, min, max, sumsqr] { out.appendLittleEndian(v.bitPattern) }
        return out
    }

    init(decoding bytes: UnsafeRawBufferPointer) throws {
        guard bytes.count == 40 else {
            throw SofaError(.corruption, "a stats reduction of \(bytes.count) bytes; 40 expected")
        }
        func at(_ i: Int) -> Double {
            Double(bitPattern: UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: i * 8, as: UInt64.self)))
        }
        (sum, count, min, max, sumsqr) = (at(0), at(1), at(2), at(3), at(4))
    }

    var json: JSON {
        ["sum": .number(sum), "count": .number(count), "min": count > 0 ? .number(min) : .null,
         "max": count > 0 ? .number(max) : .null, "sumsqr": .number(sumsqr)]
    }
}
