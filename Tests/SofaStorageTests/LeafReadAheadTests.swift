import Testing

@testable import SofaStorage

/// Scans with read-ahead (leaves decoded into the node cache on another thread) give exactly the rows of the
/// same scan without it — whole tree, ranges, descending, skips, a stop part-way — on a tree of three levels
/// whose leaves are not cached when the scan starts (a cache too small to hold them).
@Suite struct LeafReadAheadTests {
    @Test func readAheadScansMatchPlainScans() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("tree")
        let config = BTreeConfiguration(nodeSize: 256, compress: true)
        var file = try StorageFile(path: path, options: StorageOptions(durability: .none))
        var tree = BTree(file: file, commit: file.latestCommit, index: 0, configuration: config)
        let count = 20_000
        tree = try tree.modified(by: (0..<count).map { .put(numericKey($0, width: 6), numericKey($0 * 7, width: 8)) })
        _ = try file.commit(roots: [tree.root], metadata: [])
        try file.close()
        file = try StorageFile(path: path, options: StorageOptions(durability: .none, nodeCacheBytes: 64 << 10))
        tree = BTree(file: file, commit: file.latestCommit, index: 0, configuration: config)
        defer { try? file.close() }

        func scan(_ range: KeyRange, descending: Bool, skip: UInt64, stopAfter: Int?, readAhead: Bool) throws
            -> [[UInt8]] {
            var keys: [[UInt8]] = []
            try tree.forEachEntry(in: range, descending: descending, skip: skip, readAhead: readAhead) { leaf, i in
                keys.append(Array(leaf.key(i)) + Array(leaf.value(i)))
                return stopAfter.map { keys.count < $0 } ?? true
            }
            return keys
        }
        let ranges: [KeyRange] = [
            .all,
            KeyRange(lower: KeyBound(numericKey(1_234, width: 6), inclusive: true),
                     upper: KeyBound(numericKey(17_001, width: 6), inclusive: false)),
            KeyRange(lower: KeyBound(numericKey(5, width: 6), inclusive: false), upper: nil),
        ]
        for (r, range) in ranges.enumerated() {
            for descending in [false, true] {
                for (skip, stop) in [(0, nil), (0, 3_000), (777, nil)] as [(UInt64, Int?)] {
                    let plain = try scan(range, descending: descending, skip: skip, stopAfter: stop, readAhead: false)
                    let ahead = try scan(range, descending: descending, skip: skip, stopAfter: stop, readAhead: true)
                    #expect(!plain.isEmpty)
                    #expect(ahead == plain, "range \(r) descending \(descending) skip \(skip) stop \(String(describing: stop))")
                }
            }
        }
        #expect(try scan(.all, descending: false, skip: 0, stopAfter: nil, readAhead: true).count == count)
    }
}
