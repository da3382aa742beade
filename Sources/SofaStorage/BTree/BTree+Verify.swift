/// What a tree is made of, as `verify()` and `sofa info` report it.
public struct TreeStatistics: Sendable, Equatable {
    /// Levels from root to leaves (0 for an empty tree).
    public var depth = 0
    /// Leaf nodes.
    public var leafNodes = 0
    /// Inner nodes.
    public var innerNodes = 0
    /// Rows in the leaves.
    public var rows: UInt64 = 0
    /// Bytes the nodes take in the file (chunk prefixes included).
    public var storedBytes: UInt64 = 0
    /// Bytes of the nodes' payloads before compression.
    public var rawBytes: UInt64 = 0

    /// Nodes of either kind.
    public var nodes: Int { leafNodes + innerNodes }
    /// Raw bytes per stored byte (> 1 when compression helps).
    public var compressionRatio: Double { storedBytes == 0 ? 1 : Double(rawBytes) / Double(storedBytes) }
    /// Average node payload as a fraction of the configured node size.
    public func averageFill(nodeSize: Int) -> Double {
        nodes == 0 ? 0 : Double(rawBytes) / Double(nodes) / Double(nodeSize)
    }
}

extension BTree {
    /// Checks the whole tree and returns its statistics and every problem found (empty when sound).
    ///
    /// Every node reachable from the root is read, which verifies its chunk's CRC and its decoding; then:
    /// keys ascend within each node and fall inside the interval their parent's separators give; each
    /// separator equals its child's largest key; leaves are all at one depth; every stored row count,
    /// subtree size and reduction equals the one recomputed from below; no node is reachable twice.
    /// Problems name the file and the node's offset. Corrupt subtrees are reported, not descended.
    public func verify() -> (statistics: TreeStatistics, problems: [SofaError]) {
        var state = VerifyState()
        if let root {
            if let found = check(root.offset, low: nil, high: nil, depth: 1, state: &state) {
                compare(found, with: root, at: root.offset, state: &state)
            }
        }
        return (state.statistics, state.problems)
    }

    private struct Found {
        var rows: UInt64
        var size: UInt64
        var reduction: [UInt8]
        var lastKey: [UInt8]
    }

    private struct VerifyState {
        var statistics = TreeStatistics()
        var problems: [SofaError] = []
        var seen: Set<UInt64> = []
        var leafDepth: Int?
    }

    private func problem(_ message: String, _ offset: UInt64, _ state: inout VerifyState) {
        state.problems.append(SofaError(.corruption, message, path: file.path, offset: Int(clamping: offset)))
    }

    private func compare(_ found: Found, with pointer: NodePointer, at offset: UInt64, state: inout VerifyState) {
        if found.rows != pointer.rowCount {
            problem("stored row count \(pointer.rowCount) but the subtree holds \(found.rows) rows", offset, &state)
        }
        if found.size != pointer.subtreeSize {
            problem("stored subtree size \(pointer.subtreeSize) but the subtree takes \(found.size) bytes", offset,
                    &state)
        }
        if configuration.reducer != nil && found.reduction != pointer.reduction {
            problem("stored reduction differs from the one recomputed from the subtree", offset, &state)
        }
    }

    /// Checks the subtree at `offset`, whose keys must lie in (low, high]; nil when it could not be read.
    private func check(_ offset: UInt64, low: [UInt8]?, high: [UInt8]?, depth: Int,
                       state: inout VerifyState) -> Found? {
        guard state.seen.insert(offset).inserted else {
            problem("node is reachable from more than one parent", offset, &state)
            return nil
        }
        let node: Node
        let fileLength: Int
        do {
            // Decoded from the file's bytes, not taken from the cache: verify checks what is on disk.
            guard offset < limit else {
                throw SofaError(.corruption, "node pointer \(offset) is past the end of its commit (\(limit))",
                                path: file.path, offset: Int(clamping: offset))
            }
            let payload = try file.readChunk(at: offset, kind: nil, limit: limit)
            guard payload.kind == .leaf || payload.kind == .inner else {
                throw SofaError(.corruption, "a \(payload.kind) chunk where a tree node was expected",
                                path: file.path, offset: Int(clamping: offset))
            }
            node = try Node(payload: payload, isLeaf: payload.kind == .leaf, path: file.path)
            fileLength = payload.fileLength
        } catch let error as SofaError {
            state.problems.append(error)
            return nil
        } catch {
            problem("\(error)", offset, &state)
            return nil
        }
        state.statistics.depth = max(state.statistics.depth, depth)
        state.statistics.storedBytes += UInt64(fileLength)
        state.statistics.rawBytes += UInt64(node.payload.count)
        for i in 1..<max(1, node.count) where compareBytes(node.key(i - 1), node.key(i)) >= 0 {
            problem("keys are not in ascending order at entry \(i)", offset, &state)
            break
        }
        if let low, low.withUnsafeBytes({ compareBytes(node.key(0), $0) }) <= 0 {
            problem("first key is not above the parent's previous separator", offset, &state)
        }
        let last = Array(node.key(node.count - 1))
        if let high, last != high {
            problem("largest key differs from the parent's separator for this child", offset, &state)
        }
        if node.isLeaf {
            state.statistics.leafNodes += 1
            state.statistics.rows &+= UInt64(node.count)
            if let d = state.leafDepth, d != depth {
                problem("leaf at depth \(depth) where other leaves are at depth \(d)", offset, &state)
            }
            state.leafDepth = state.leafDepth ?? depth
            var reduction: [UInt8] = []
            if let reducer = configuration.reducer {
                do {
                    reduction = try reducer.reduce((0..<node.count).map { (node.key($0), node.value($0)) })
                } catch {
                    problem("reduce failed: \(error)", offset, &state)
                }
            }
            return Found(rows: UInt64(node.count), size: UInt64(fileLength), reduction: reduction, lastKey: last)
        }
        state.statistics.innerNodes += 1
        var rows: UInt64 = 0
        var size = UInt64(fileLength)
        var previous = low
        for i in 0..<node.count {
            let pointer = node.child(i)
            let separator = Array(node.key(i))
            if let found = check(pointer.offset, low: previous, high: separator, depth: depth + 1, state: &state) {
                compare(found, with: pointer, at: pointer.offset, state: &state)
            }
            rows &+= pointer.rowCount
            size &+= pointer.subtreeSize
            previous = separator
        }
        var reduction: [UInt8] = []
        if let reducer = configuration.reducer {
            do {
                reduction = try rereduce((0..<node.count).map { Array(node.value($0)) }, with: reducer)
            } catch {
                problem("rereduce failed: \(error)", offset, &state)
            }
        }
        return Found(rows: rows, size: size, reduction: reduction, lastKey: last)
    }
}
