/// Turns rows into a summary stored with every subtree, and summaries into the summary of their union.
///
/// The tree calls `reduce` on the entries of each leaf it writes and `rereduce` on the stored reductions of
/// each inner node's children, and keeps the result in the parent's pointer, so a range's reduction costs
/// O(log n) node reads (CouchDB's stored reductions). Both must be deterministic and associative:
/// `rereduce([reduce(a), reduce(b)])` must equal `reduce(a + b)` in meaning.
public protocol Reducer: Sendable {
    /// The reduction of leaf entries (key and value bytes), in key order.
    func reduce(_ entries: [(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)]) throws -> [UInt8]
    /// The reduction of reductions, in key order of the subtrees they summarize.
    func rereduce(_ reductions: [UnsafeRawBufferPointer]) throws -> [UInt8]
}

/// Sums values that are 8-byte little-endian signed integers; the reduction is the same encoding.
/// The engine-level benchmark and tests use it; views bring their own reducers.
public struct Int64SumReducer: Reducer {
    /// A sum reducer.
    public init() {}

    /// The sum of the entries' values; a value that is not 8 bytes counts as 0.
    public func reduce(_ entries: [(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)]) -> [UInt8] {
        var sum: Int64 = 0
        for e in entries where e.value.count == 8 {
            sum &+= Int64(littleEndian: e.value.loadUnaligned(as: Int64.self))
        }
        return Int64SumReducer.encode(sum)
    }

    /// The sum of the reductions.
    public func rereduce(_ reductions: [UnsafeRawBufferPointer]) -> [UInt8] {
        var sum: Int64 = 0
        for r in reductions where r.count == 8 { sum &+= Int64(littleEndian: r.loadUnaligned(as: Int64.self)) }
        return Int64SumReducer.encode(sum)
    }

    /// 8 bytes, little-endian.
    public static func encode(_ value: Int64) -> [UInt8] {
        withUnsafeBytes(of: value.littleEndian) { Array($0) }
    }

    /// The value of an 8-byte reduction, or `nil` when `bytes` is not 8 bytes long.
    public static func decode(_ bytes: [UInt8]) -> Int64? {
        guard bytes.count == 8 else { return nil }
        return bytes.withUnsafeBytes { Int64(littleEndian: $0.loadUnaligned(as: Int64.self)) }
    }
}
