/// One change in a batch: put `value` under `key`, or remove `key` when `value` is `nil`.
public struct BTreeAction: Sendable {
    /// The key changed.
    public var key: [UInt8]
    /// The new value, or `nil` to remove the key (removing a missing key does nothing).
    public var value: [UInt8]?

    /// A put (`value` non-nil) or remove (`value` nil).
    public init(key: [UInt8], value: [UInt8]?) {
        self.key = key
        self.value = value
    }

    /// Put `value` under `key`.
    public static func put(_ key: [UInt8], _ value: [UInt8]) -> BTreeAction { BTreeAction(key: key, value: value) }
    /// Remove `key`.
    public static func remove(_ key: [UInt8]) -> BTreeAction { BTreeAction(key: key, value: nil) }
}

extension BTree {
    /// Applies a batch of changes in one pass and returns the new tree (CouchDB's `query_modify` shape).
    ///
    /// Each affected node is read once and rewritten once; subtrees no action touches keep their pointers.
    /// The new nodes are appended to the file but not committed: commit the returned tree's root with
    /// ``StorageFile/commit(roots:metadata:)``.
    ///
    /// - Parameters:
    ///   - actions: strictly ascending by key (each key at most once).
    ///   - compress: whether the new nodes are stored LZ4-compressed when that saves space; `nil` follows the
    ///     configuration. A caller writing a path for one or two changes may store it raw: compressing the
    ///     path's nodes costs more than syncing the bytes it saves (readers take either, FORMAT.md §3).
    /// - Throws: `.invalidArgument` when the actions are not strictly ascending; storage errors.
    public func modified(by actions: [BTreeAction], compress: Bool? = nil) throws -> BTree {
        guard !actions.isEmpty else { return self }
        for i in 1..<max(1, actions.count) where compareArrays(actions[i - 1].key, actions[i].key) >= 0 {
            throw SofaError(.invalidArgument, "batch actions must be strictly ascending by key (action \(i))",
                            path: file.path)
        }
        let writer = self.forWriter
        var written = configuration
        if let compress { written.compress = compress }
        var nodes = NodeWriter(file: file, configuration: written)
        var top: [ChildEntry]
        if let root {
            top = try writer.modify(root.offset, actions[...], nodes: &nodes)
        } else {
            top = try writer.writeLeaves(existing: nil, actions: actions[...], nodes: &nodes)
        }
        guard var newRoot = try nodes.buildUpperLevels(top)?.pointer else {
            return BTree(file: file, root: nil, configuration: configuration, limit: StorageFile.unlimited)
        }
        // An inner root with a single child is replaced by that child, so depth shrinks after removals.
        while true {
            let node = try writer.node(at: newRoot.offset)
            guard !node.isLeaf, node.count == 1 else { break }
            newRoot = node.child(0)
        }
        return BTree(file: file, root: newRoot, configuration: configuration, limit: StorageFile.unlimited)
    }

    /// Rewrites the subtree at `offset` with `actions` applied; returns its replacement entries (none when it
    /// became empty, several when it split).
    private func modify(_ offset: UInt64, _ actions: ArraySlice<BTreeAction>,
                        nodes: inout NodeWriter) throws -> [ChildEntry] {
        let node = try node(at: offset)
        // This node is about to be replaced: its cached copy serves no newer commit.
        defer { file.nodeCache.remove(at: offset) }
        if node.isLeaf { return try writeLeaves(existing: node, actions: actions, nodes: &nodes) }
        // Untouched children are kept as references into `node`: their entries are copied byte for byte.
        var children: [InnerEntry] = []
        children.reserveCapacity(node.count + 2)
        func keep(_ i: Int) {
            children.append(node.hasShortestKeyLengths ? .kept(node, i)
                                : .written(ChildEntry(key: Array(node.key(i)), pointer: node.child(i))))
        }
        var i = 0
        var next = actions.startIndex
        while next < actions.endIndex {
            // The child holding the next action's key (binary search: a small batch skips the other children
            // without comparing), then every further action up to that child's largest key (all remaining ones
            // for the last child).
            let c = actions[next].key.withUnsafeBytes { node.childIndex(for: $0) }
            while i < c {
                keep(i)
                i += 1
            }
            var end = next + 1
            if c == node.count - 1 {
                end = actions.endIndex
            } else {
                let separator = node.key(c)
                while end < actions.endIndex,
                      actions[end].key.withUnsafeBytes({ compareBytes($0, separator) }) <= 0 {
                    end += 1
                }
            }
            for entry in try modify(node.childOffset(c), actions[next..<end], nodes: &nodes) {
                children.append(.written(entry))
            }
            i = c + 1
            next = end
        }
        while i < node.count {
            keep(i)
            i += 1
        }
        guard !children.isEmpty else { return [] }
        let runs = NodeWriter.evenRuns(sizes: children.map(\.encodedSize), nodeSize: configuration.innerNodeSize)
        var out: [ChildEntry] = []
        for run in runs { out.append(try nodes.writeInner(children[run])) }
        return out
    }

    /// Merges a leaf's entries (or none) with `actions` and writes the result as evenly filled leaves.
    private func writeLeaves(existing node: Node?, actions: ArraySlice<BTreeAction>,
                             nodes: inout NodeWriter) throws -> [ChildEntry] {
        // Pin every action's key and value buffer while the merged list of views is in use.
        let flat = FlatActions(actions)
        return try flat.storage.withUnsafeBytes { storage in
            var merged: [(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)] = []
            merged.reserveCapacity((node?.count ?? 0) + actions.count)
            var i = 0
            let n = node?.count ?? 0
            for a in flat.items {
                let key = UnsafeRawBufferPointer(rebasing: storage[a.key])
                while i < n, compareBytes(node!.key(i), key) < 0 {
                    merged.append((node!.key(i), node!.value(i)))
                    i += 1
                }
                if i < n, compareBytes(node!.key(i), key) == 0 { i += 1 }  // replaced or removed
                if let v = a.value { merged.append((key, UnsafeRawBufferPointer(rebasing: storage[v]))) }
            }
            while i < n {
                merged.append((node!.key(i), node!.value(i)))
                i += 1
            }
            let sizes = merged.map { NodeWriter.leafEntrySize(keyCount: $0.key.count, valueCount: $0.value.count) }
            var out: [ChildEntry] = []
            for run in NodeWriter.evenRuns(sizes: sizes, nodeSize: configuration.nodeSize) {
                let payloadSize = varintSize(UInt64(run.count)) + sizes[run].reduce(0, +)
                out.append(try nodes.writeLeaf(Array(merged[run]), payloadSize: payloadSize))
            }
            return out
        }
    }
}

/// A batch's keys and values copied into one buffer, so views of all of them can be held at once.
private struct FlatActions {
    var storage: [UInt8] = []
    var items: [(key: Range<Int>, value: Range<Int>?)] = []

    init(_ actions: ArraySlice<BTreeAction>) {
        items.reserveCapacity(actions.count)
        storage.reserveCapacity(actions.reduce(0) { $0 + $1.key.count + ($1.value?.count ?? 0) })
        for a in actions {
            let k = storage.count..<(storage.count + a.key.count)
            storage.append(contentsOf: a.key)
            var v: Range<Int>?
            if let value = a.value {
                v = storage.count..<(storage.count + value.count)
                storage.append(contentsOf: value)
            }
            items.append((k, v))
        }
    }
}

/// `memcmp` order of two arrays.
package func compareArrays(_ a: [UInt8], _ b: [UInt8]) -> Int {
    a.withUnsafeBytes { x in b.withUnsafeBytes { y in compareBytes(x, y) } }
}
