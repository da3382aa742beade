/// One node as `sofa dump --tree` shows it.
package struct NodeSummary: Sendable {
    /// The node's chunk offset.
    package var offset: UInt64
    /// Leaf or inner.
    package var isLeaf: Bool
    /// 1 for the root, one more per level down.
    package var level: Int
    /// Entries (rows for a leaf, children for an inner node).
    package var entries: Int
    /// Bytes of the chunk in the file, prefix included.
    package var storedBytes: Int
    /// Bytes of the payload before compression.
    package var rawBytes: Int
    /// The node's smallest and largest key.
    package var firstKey: [UInt8]
    package var lastKey: [UInt8]
}

extension BTree {
    /// Calls `body` with every node reachable from the root, depth first, each parent before its children
    /// (the order an index file dump reads best in).
    ///
    /// - Throws: the first error reading a node (`.corruption` with file and offset).
    package func forEachNode(_ body: (NodeSummary) throws -> Void) throws {
        guard let root else { return }
        try visitNode(root.offset, level: 1, body)
    }

    private func visitNode(_ offset: UInt64, level: Int, _ body: (NodeSummary) throws -> Void) throws {
        let node = try node(at: offset)
        let stored = try file.readChunk(at: offset, kind: nil, limit: limit).fileLength
        try body(NodeSummary(offset: offset, isLeaf: node.isLeaf, level: level, entries: node.count,
                             storedBytes: stored, rawBytes: node.payload.count, firstKey: Array(node.key(0)),
                             lastKey: Array(node.key(node.count - 1))))
        guard !node.isLeaf else { return }
        for i in 0..<node.count { try visitNode(node.childOffset(i), level: level + 1, body) }
    }
}
