import Testing

@testable import SofaStorage

/// How batch modify splits entries into nodes: about equal runs, none oversized beyond one entry.
@Suite struct NodeWriterTests {
    @Test func evenRunsAreEvenAndBounded() {
        for seed in SeededGenerator.seeds(fixed: [3]) {
            var rng = SeededGenerator(seed: seed)
            for _ in 0..<300 {
                let nodeSize = [256, 1024, 4096, 8192].randomElement(using: &rng)!
                let largest = Int.random(in: 1...(nodeSize / 2), using: &rng)
                let sizes = (0..<Int.random(in: 1...5_000, using: &rng)).map { _ in
                    Int.random(in: 1...largest, using: &rng)
                }
                let runs = NodeWriter.evenRuns(sizes: sizes, nodeSize: nodeSize)
                let total = sizes.reduce(0, +)
                let context = "seed \(seed): \(sizes.count) items, node \(nodeSize), largest \(largest)"
                #expect(runs.count == max(1, (total + nodeSize - 1) / nodeSize), "\(context): run count")
                #expect(runs.first?.lowerBound == 0 && runs.last?.upperBound == sizes.count, "\(context): coverage")
                for (a, b) in zip(runs, runs.dropFirst()) { #expect(a.upperBound == b.lowerBound, "\(context): gap") }
                let share = total / runs.count
                for run in runs {
                    let size = sizes[run].reduce(0, +)
                    #expect(!run.isEmpty, "\(context): empty run")
                    #expect(size <= share + 2 * largest, "\(context): run of \(size) bytes, share \(share)")
                }
            }
        }
    }

    /// A node appended to at the end of the key range splits full first: the kept items stay together at the
    /// front, every run but the last is as full as fits, the last holds the rest; when everything fits, or the
    /// kept items alone do not, the split is `evenRuns`'.
    @Test func appendRunsFillFirst() {
        #expect(NodeWriter.appendRuns(sizes: [100, 100, 20], kept: 2, nodeSize: 256) == [0..<3])
        #expect(NodeWriter.appendRuns(sizes: [120, 120, 20], kept: 2, nodeSize: 256) == [0..<2, 2..<3])
        #expect(NodeWriter.appendRuns(sizes: [120, 100, 30, 30], kept: 1, nodeSize: 256) == [0..<3, 3..<4])
        #expect(NodeWriter.appendRuns(sizes: [120, 100, 50, 30, 90], kept: 1, nodeSize: 256) == [0..<2, 2..<5])
        #expect(NodeWriter.appendRuns(sizes: [200, 100, 30], kept: 2, nodeSize: 256)
                == NodeWriter.evenRuns(sizes: [200, 100, 30], nodeSize: 256))
        for seed in SeededGenerator.seeds(fixed: [5]) {
            var rng = SeededGenerator(seed: seed)
            for _ in 0..<300 {
                let nodeSize = [256, 1024, 4096].randomElement(using: &rng)!
                let largest = Int.random(in: 1...(nodeSize / 2), using: &rng)
                let sizes = (0..<Int.random(in: 1...2_000, using: &rng)).map { _ in
                    Int.random(in: 1...largest, using: &rng)
                }
                var kept = 0, keptSize = 0
                while kept < sizes.count && keptSize + sizes[kept] <= nodeSize && Bool.random(using: &rng) {
                    keptSize += sizes[kept]
                    kept += 1
                }
                let runs = NodeWriter.appendRuns(sizes: sizes, kept: kept, nodeSize: nodeSize)
                let context = "seed \(seed): \(sizes.count) items, \(kept) kept, node \(nodeSize)"
                #expect(runs.first?.lowerBound == 0 && runs.last?.upperBound == sizes.count, "\(context): coverage")
                for (a, b) in zip(runs, runs.dropFirst()) { #expect(a.upperBound == b.lowerBound, "\(context): gap") }
                #expect(runs.first!.count >= kept, "\(context): kept items split")
                for (r, run) in runs.enumerated() {
                    let size = sizes[run].reduce(0, +)
                    #expect(!run.isEmpty && size <= nodeSize, "\(context): run of \(size) bytes")
                    if r < runs.count - 1 {
                        #expect(size + sizes[run.upperBound] > nodeSize, "\(context): run \(r) not full")
                    }
                }
            }
        }
    }

    /// A leaf written from entries already encoded (``NodeWriter/writeLeaf(encodedEntries:layout:)``) holds the
    /// bytes ``NodeWriter/writeLeaf(_:payloadSize:)`` writes for the same entries, and the node it caches reads
    /// as the one decoded from the file (its layout shifted past the entry count).
    @Test func leafFromEncodedEntriesIsTheLeafFromEntries() throws {
        let dir = TemporaryDirectory()
        let file = try StorageFile(path: dir.file("tree"), options: StorageOptions(durability: .none))
        let config = BTreeConfiguration(nodeSize: 4096, compress: false, reducer: Int64SumReducer())
        var writer = NodeWriter(file: file, configuration: config, cachesLeaves: true)
        // 200 entries: a two-byte entry count.
        let rows: [([UInt8], [UInt8])] = (0..<200).map { n in
            (Array("key-\(1000 + n)".utf8), withUnsafeBytes(of: Int64(n).littleEndian) { Array($0) })
        }
        let size = rows.reduce(0) { $0 + NodeWriter.leafEntrySize(keyCount: $1.0.count, valueCount: $1.1.count) }
        var encoded = [UInt8](repeating: 0, count: size)
        var layout: [Node.Layout] = []
        encoded.withUnsafeMutableBytes { out in
            var at = out.baseAddress!
            for (key, value) in rows {
                let entry = key.withUnsafeBytes { k in
                    value.withUnsafeBytes { v in
                        NodeWriter.storeLeafEntry(key: k, valueCount: v.count, writingValue: { $0.copyMemory(from: v) },
                                                  at: at, base: out.baseAddress!)
                    }
                }
                layout.append(entry)
                at = out.baseAddress! + Int(entry.valueStart) + Int(entry.valueLength)
            }
        }
        let fromEncoded = try encoded.withUnsafeBytes { try writer.writeLeaf(encodedEntries: $0, layout: layout) }
        let fromEntries = try withViews(rows) { try writer.writeLeaf($0) }
        func payload(_ offset: UInt64) throws -> [UInt8] {
            try file.readChunk(at: offset, kind: .leaf, limit: StorageFile.unlimited).withUnsafeBytes { Array($0) }
        }
        #expect(try payload(fromEncoded.pointer.offset) == payload(fromEntries.pointer.offset))
        #expect(fromEncoded.key == rows.last!.0 && fromEncoded.pointer.reduction == fromEntries.pointer.reduction)
        let cached = try #require(file.nodeCache.node(at: fromEncoded.pointer.offset))
        for (i, (key, value)) in rows.enumerated() {
            #expect(Array(cached.key(i)) == key && Array(cached.value(i)) == value)
        }
    }

    /// Runs `body` with `rows` as raw views.
    private func withViews<R>(_ rows: [([UInt8], [UInt8])],
                              _ body: ([(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)]) throws -> R)
        rethrows -> R {
        let keys = rows.map { UnsafeMutableRawBufferPointer.allocate(byteCount: max($0.0.count, 1), alignment: 1) }
        let values = rows.map { UnsafeMutableRawBufferPointer.allocate(byteCount: max($0.1.count, 1), alignment: 1) }
        defer { for b in keys + values { b.deallocate() } }
        for (i, row) in rows.enumerated() {
            keys[i].copyBytes(from: row.0)
            values[i].copyBytes(from: row.1)
        }
        return try body(rows.indices.map {
            (UnsafeRawBufferPointer(rebasing: keys[$0][..<rows[$0].0.count]),
             UnsafeRawBufferPointer(rebasing: values[$0][..<rows[$0].1.count]))
        })
    }
}
