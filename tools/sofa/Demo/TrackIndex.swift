import Glibc
import Sofa
import SofaStorage

/// The demo's index: one B+tree in its own file, rows keyed by `CollationKey([genre, artist, album, title])`
/// followed by the track's ID, each valued with its duration (8 bytes) and the emitted key as JSON text (a
/// collation key cannot be turned back into the key). Every subtree stores its row count and duration sum.
struct TrackIndex {
    let file: StorageFile
    let tree: BTree

    static let configuration = BTreeConfiguration(nodeSize: 4096, compress: true, reducer: DurationSum())

    struct Row {
        var key: JSON
        var duration: Int
    }

    struct Group {
        var key: JSON
        var count: Int
        var sum: Int
    }

    /// Sorts the rows of `tracks` and bulk-loads them into a new file at `path`, in one durable commit.
    static func build(path: String, tracks: [JSON]) throws -> TrackIndex {
        var rows: [(key: [UInt8], value: [UInt8])] = []
        rows.reserveCapacity(tracks.count)
        for t in tracks {
            let key: JSON = [t["genre"] ?? nil, t["artist"] ?? nil, t["album"] ?? nil, t["title"] ?? nil]
            var rowKey = try CollationKey(key).bytes
            rowKey.append(contentsOf: (t["_id"]?.stringValue ?? "").utf8)
            var value = Int64SumReducer.encode(Int64(t["duration"]?.intValue ?? 0))
            try key.serialize(into: &value)
            rows.append((rowKey, value))
        }
        rows.sort { compareBytes($0.key, $1.key) < 0 }
        let file = try StorageFile(path: path, options: StorageOptions(durability: .full))
        let builder = TreeBuilder(file: file, configuration: configuration)
        for row in rows { try builder.add(key: row.key, value: row.value) }
        let tree = try builder.finish()
        let commit = try file.commit(roots: [tree.root], metadata: [])
        return TrackIndex(file: file, tree: BTree(file: file, commit: commit, index: 0, configuration: configuration))
    }

    var fileSize: Int { Int(file.latestCommit.endOffset) }

    /// The keys that start with the array `prefix`: from `[prefix…]` to `[prefix…, {}]`, as Couchbase Lite
    /// queries spell it (an object sorts after every string, so `{}` ends the range).
    func range(prefix: [JSON]) throws -> KeyRange {
        guard !prefix.isEmpty else { return .all }
        var low = try CollationKey(.array(prefix)).bytes
        low.removeLast()  // drop the array's end byte: every longer array with these items sorts after
        let high = try CollationKey(.array(prefix + [[:]])).bytes
        return KeyRange(lower: KeyBound(low), upper: KeyBound(high))
    }

    /// Groups of rows sharing their first `level` key items, inside `prefix`, from stored reductions.
    func groups(level: Int, prefix: [JSON] = []) throws -> [Group] {
        var out: [Group] = []
        try tree.reduceGroups(in: try range(prefix: prefix),
                              groupPrefix: { try CollationKey.groupPrefixLength($0, level: level) }) { g in
            let key = try TrackIndex.emittedKey(g.firstValue)
            out.append(Group(key: .array(Array((key.arrayValue ?? []).prefix(level))), count: Int(g.reduction.rowCount),
                             sum: Int(Int64SumReducer.decode(g.reduction.value) ?? 0)))
            return true
        }
        return out
    }

    /// Up to `limit` rows inside `prefix`.
    func rows(prefix: [JSON], descending: Bool, limit: Int) throws -> [Row] {
        var out: [Row] = []
        try tree.forEach(in: try range(prefix: prefix), descending: descending) { _, value in
            out.append(Row(key: (try? TrackIndex.emittedKey(Array(value))) ?? nil,
                           duration: Int(value.loadUnaligned(as: Int64.self).littleEndian)))
            return out.count < limit
        }
        return out
    }

    /// Count and duration sum of the rows inside `prefix`.
    func reduce(prefix: [JSON]) throws -> Group {
        let r = try tree.reduce(in: try range(prefix: prefix))
        return Group(key: .array(prefix), count: Int(r.rowCount), sum: Int(Int64SumReducer.decode(r.value) ?? 0))
    }

    static func emittedKey(_ value: [UInt8]) throws -> JSON {
        try JSON(parsing: Array(value.dropFirst(8)))
    }
}

/// Sums the 8-byte duration that starts every row value.
struct DurationSum: Reducer {
    func reduce(_ entries: [(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)]) -> [UInt8] {
        var sum: Int64 = 0
        for e in entries where e.value.count >= 8 { sum &+= Int64(littleEndian: e.value.loadUnaligned(as: Int64.self)) }
        return Int64SumReducer.encode(sum)
    }

    func rereduce(_ reductions: [UnsafeRawBufferPointer]) -> [UInt8] { Int64SumReducer().rereduce(reductions) }
}

/// `memcmp` order of two byte arrays.
func compareBytes(_ a: [UInt8], _ b: [UInt8]) -> Int {
    a.withUnsafeBytes { x in
        b.withUnsafeBytes { y in
            let n = min(x.count, y.count)
            let c = n == 0 ? 0 : memcmp(x.baseAddress!, y.baseAddress!, n)
            return c != 0 ? Int(c) : x.count - y.count
        }
    }
}
