import Glibc
import SofaStorage

/// Sofa's storage engine at the engine level: one ``StorageFile`` holding one ``BTree`` whose every inner
/// pointer stores its subtree's row count and sum of durations.
///
/// W1 sorts the rows (the engine's batch API takes sorted input, as a view update does) and bulk-loads them
/// with ``TreeBuilder``; W6 is one sorted batch through ``BTree/modified(by:)``; W4 and W5 read stored
/// reductions instead of rows. Commits use ``Durability/full`` (data `fdatasync`, header, `fdatasync`).
final class SofaEngine: Engine {
    static let name = "sofa"
    static var configuration: String {
        "SofaStorage B+tree, \(nodeSize) B nodes, LZ4 \(compress ? "on" : "off"), " +
            "\(cacheBytes >> 20) MiB node cache, " +
            "durability full" + (formatVersion.map { ", format version \($0)" } ?? "")
    }

    /// Node size, compression and the node cache's size can be varied for the tuning runs in BENCHMARKS.md
    /// (`SOFA_NODE_SIZE`, `SOFA_COMPRESS=0`, `SOFA_CACHE_MB`); the defaults are the engine's own, 256 MiB of cache.
    static let nodeSize = getenv("SOFA_NODE_SIZE").flatMap { Int(String(cString: $0)) } ?? BTreeConfiguration().nodeSize
    static let cacheBytes = (getenv("SOFA_CACHE_MB").flatMap { Int(String(cString: $0)) } ?? 256) << 20

    private let file: StorageFile
    private let path: String
    static let compress = getenv("SOFA_COMPRESS").map { String(cString: $0) != "0" } ?? true
    private let treeConfiguration = BTreeConfiguration(nodeSize: SofaEngine.nodeSize, compress: SofaEngine.compress,
                                                       reducer: DurationSumReducer())

    /// `SOFA_FORMAT_VERSION=1` creates a version 1 file, whose durable commits sync twice (FORMAT.md §11, §12):
    /// the commit protocol before one-sync commits, for A/B runs of C1 (BENCHMARKS.md).
    static let formatVersion = getenv("SOFA_FORMAT_VERSION").flatMap { UInt32(String(cString: $0)) }

    init(directory: String) throws {
        path = directory + "/index.sofa"
        var options = StorageOptions(durability: .full, nodeCacheBytes: Self.cacheBytes)
        if let version = Self.formatVersion { options.formatVersion = version }
        file = try StorageFile(path: path, options: options)
    }

    /// The tree of the newest commit: a snapshot no later commit changes.
    private var snapshot: BTree {
        BTree(file: file, commit: file.latestCommit, index: 0, configuration: treeConfiguration)
    }

    func build(rows: RowSet) throws {
        let order = sortedOrder(rows)
        let builder = TreeBuilder(file: file, configuration: treeConfiguration)
        for i in order {
            var v = rows.value(i).littleEndian
            try withUnsafeBytes(of: &v) { try builder.add(key: rows.key(i), value: $0) }
        }
        let tree = try builder.finish()
        try file.commit(roots: [tree.root], metadata: [])
    }

    func range(from startKey: UnsafeRawBufferPointer, limit: Int,
               _ visit: (_ key: UnsafeRawBufferPointer, _ value: UInt32) -> Void) throws {
        var seen = 0
        try snapshot.forEach(in: KeyRange(lower: KeyBound(Array(startKey)))) { key, value in
            visit(key, value.loadUnaligned(as: UInt32.self).littleEndian)
            seen += 1
            return seen < limit
        }
    }

    func scan(_ visit: (_ key: UnsafeRawBufferPointer, _ value: UInt32) -> Void) throws {
        try snapshot.forEach { key, value in
            visit(key, value.loadUnaligned(as: UInt32.self).littleEndian)
            return true
        }
    }

    func rangeReduce(low: UnsafeRawBufferPointer, high: UnsafeRawBufferPointer) throws -> (count: Int, sum: Int) {
        let r = try snapshot.reduce(in: KeyRange(lower: KeyBound(Array(low)), upper: KeyBound(Array(high))))
        return (Int(r.rowCount), Int(Int64SumReducer.decode(r.value) ?? 0))
    }

    func countAll() throws -> Int { Int(snapshot.rowCount) }

    func update(_ changes: RowSet) throws {
        let order = sortedOrder(changes)
        let actions = order.map { i in
            BTreeAction.put(Array(changes.key(i)), withUnsafeBytes(of: changes.value(i).littleEndian) { Array($0) })
        }
        let tree = try snapshot.modified(by: actions)
        try file.commit(roots: [tree.root], metadata: [])
    }

    func close() throws { try file.close() }

    var filesOnDisk: [String] { [path] }
}

/// Sums 4-byte little-endian durations into an 8-byte little-endian total (``Int64SumReducer``'s encoding).
struct DurationSumReducer: Reducer {
    func reduce(_ entries: [(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)]) -> [UInt8] {
        var sum: Int64 = 0
        for e in entries where e.value.count == 4 {
            sum &+= Int64(UInt32(littleEndian: e.value.loadUnaligned(as: UInt32.self)))
        }
        return Int64SumReducer.encode(sum)
    }

    func rereduce(_ reductions: [UnsafeRawBufferPointer]) -> [UInt8] {
        Int64SumReducer().rereduce(reductions)
    }
}


/// Row indices in `memcmp` key order. Keys are compared through a flat array of (pointer, length) so the
/// sort's comparator is a `memcmp` and nothing else.
private func sortedOrder(_ rows: RowSet) -> [Int] {
    struct Ref {
        var base: UnsafeRawPointer
        var count: Int
        var index: Int
    }
    var refs = (0..<rows.count).map { i -> Ref in
        let k = rows.key(i)
        return Ref(base: k.baseAddress!, count: k.count, index: i)
    }
    refs.withUnsafeMutableBufferPointer { buffer in
        buffer.sort { a, b in
            let c = memcmp(a.base, b.base, min(a.count, b.count))
            return c != 0 ? c < 0 : a.count < b.count
        }
    }
    return refs.map(\.index)
}
