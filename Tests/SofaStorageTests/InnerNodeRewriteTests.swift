import Testing

@testable import SofaStorage

/// Batch modify copies an untouched child's entry from the old inner node byte for byte only when every key
/// length there is the shortest varint (``Node/hasShortestKeyLengths``); otherwise it re-encodes the entry from
/// its key and pointer. Sofa never writes the longer form, but a reader accepts it, so the fallback is tested
/// on a root written by hand with two-byte key lengths.
@Suite struct InnerNodeRewriteTests {
    static let leaves = 5
    static let rowsPerLeaf = 4

    /// A file whose committed tree is `leaves` leaves of `rowsPerLeaf` rows (keys 0, 10, 20, …; value = key)
    /// under one inner root whose key lengths take two bytes each.
    static func writeTree(_ file: StorageFile, _ config: BTreeConfiguration) throws {
        var nodes = NodeWriter(file: file, configuration: config)
        var children: [ChildEntry] = []
        for leaf in 0..<leaves {
            let keys = (0..<rowsPerLeaf).map { numericKey(10 * (leaf * rowsPerLeaf + $0)) }
            let values = keys.indices.map { int64Value(Int64(10 * (leaf * rowsPerLeaf + $0))) }
            let flat = keys.flatMap { $0 } + values.flatMap { $0 }
            children.append(try flat.withUnsafeBytes { all in
                var entries: [(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)] = []
                for i in keys.indices {
                    let v = keys.count * 4 + i * 8
                    entries.append((UnsafeRawBufferPointer(rebasing: all[(i * 4)..<(i * 4 + 4)]),
                                    UnsafeRawBufferPointer(rebasing: all[v..<(v + 8)])))
                }
                return try nodes.writeLeaf(entries)
            })
        }
        var payload: [UInt8] = []
        payload.appendVarint(UInt64(children.count))
        for child in children {
            // The key length as a two-byte varint: its low 7 bits with the continuation bit, then a zero byte.
            precondition(child.key.count < 0x80)
            payload.append(contentsOf: [UInt8(child.key.count) | 0x80, 0])
            payload.append(contentsOf: child.key)
            child.pointer.encode(into: &payload)
        }
        let (offset, length) = try payload.withUnsafeBytes {
            try file.append(kind: .inner, payload: $0, compress: config.compress)
        }
        let root = NodePointer(offset: offset, rowCount: children.reduce(0) { $0 + $1.pointer.rowCount },
                               subtreeSize: children.reduce(UInt64(length)) { $0 + $1.pointer.subtreeSize },
                               reduction: try rereduce(children.map(\.pointer.reduction), with: config.reducer!))
        _ = try file.commit(roots: [root], metadata: [])
    }

    /// The tree's rows as (key number, value) pairs.
    static func contents(_ tree: BTree) throws -> [(Int, Int64)] {
        try tree.rows().map { row in
            (row.key.reduce(0) { $0 << 8 | Int($1) }, Int64SumReducer.decode(row.value)!)
        }
    }

    @Test func smallBatchRewritesARootWithLongKeyLengths() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("tree")
        let config = BTreeConfiguration(nodeSize: 4096, innerNodeSize: 4096, compress: true,
                                        reducer: Int64SumReducer())
        var file = try StorageFile(path: path, options: StorageOptions(durability: .none))
        try Self.writeTree(file, config)
        try file.close()
        // Reopened, so the root is decoded from its bytes rather than taken from the writer's cache.
        file = try StorageFile(path: path, options: StorageOptions(durability: .none))
        defer { try? file.close() }
        var tree = BTree(file: file, commit: file.latestCommit, index: 0, configuration: config)
        let oldRoot = try tree.node(at: tree.root!.offset)
        #expect(!oldRoot.isLeaf && oldRoot.count == Self.leaves)
        #expect(!oldRoot.hasShortestKeyLengths, "the hand-written root must take the fallback")
        expectSound(tree, "before the batch")

        // A small batch touching only the third leaf: a put between two of its keys, a replacement and a
        // removal. The other four children are kept, re-encoded from their keys and pointers.
        var model = Dictionary(uniqueKeysWithValues: try Self.contents(tree))
        let actions: [BTreeAction] = [.put(numericKey(85), int64Value(-7)), .put(numericKey(90), int64Value(1000)),
                                      .remove(numericKey(110))]
        tree = try tree.modified(by: actions)
        model[85] = -7
        model[90] = 1000
        model[110] = nil
        _ = try file.commit(roots: [tree.root], metadata: [])
        try file.close()
        file = try StorageFile(path: path, options: StorageOptions(durability: .none))
        tree = BTree(file: file, commit: file.latestCommit, index: 0, configuration: config)

        let expected = model.keys.sorted().map { ($0, model[$0]!) }
        let found = try Self.contents(tree)
        #expect(found.map(\.0) == expected.map(\.0))
        #expect(found.map(\.1) == expected.map(\.1))
        let total = try tree.reduce()
        #expect(total.rowCount == UInt64(expected.count))
        #expect(Int64SumReducer.decode(total.value) == expected.reduce(0) { $0 + $1.1 })
        let newRoot = try tree.node(at: tree.root!.offset)
        #expect(!newRoot.isLeaf && newRoot.count == Self.leaves)
        #expect(newRoot.hasShortestKeyLengths, "Sofa writes the shortest key lengths")
        // The untouched children keep their pointers.
        for i in [0, 1, 3, 4] { #expect(newRoot.childOffset(i) == oldRoot.childOffset(i), "child \(i)") }
        expectSound(tree, "after the batch")
    }
}
