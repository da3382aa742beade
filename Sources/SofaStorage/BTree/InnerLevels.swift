/// The open inner node of each level of a tree built bottom-up, level 0 just above the leaves: what a bulk load
/// (``TreeBuilder``) and an append (``TreeAppender``) hand their written leaves to. Each node is filled as far as
/// the target allows (FORMAT.md §8: the entries' bytes, the leading count not counted) and written when the next
/// entry would overflow it; its own entry then goes to the level above, which a full top level creates.
struct InnerLevels {
    /// Each level's open node. The top level's entries are the root's children.
    private var levels: [[InnerEntry]] = []
    /// Each open node's entry bytes (the sum of ``InnerEntry/encodedSize`` over them).
    private var sizes: [Int] = []
    /// The nodes a resumed edge's entries are kept in (``InnerEntry/kept(_:_:)`` does not retain them): alive
    /// as long as the levels are.
    private var edge: [Node] = []

    /// No levels yet: the first leaf pushed starts level 0.
    init() {}

    /// Levels holding a tree's right edge: `edge` is its inner nodes, level 0's first, and each level holds its
    /// node's entries but the last (the child the appender rewrites). The entries stay in the nodes' bytes, to
    /// be copied as they are when the level is written (a resumed edge decoded into keys and pointers, each its
    /// own arrays, then encoded again and freed, was ~40 % of a pipelined batch's commit-time edge writes,
    /// callgrind D1); a node whose key lengths are not in their shortest form (an older build's) is decoded.
    init(resuming edge: [Node]) {
        self.edge = edge
        levels = edge.map { node in (0..<(node.count - 1)).map { .entry($0, of: node) } }
        sizes = levels.map { $0.reduce(0) { $0 + $1.encodedSize } }
    }

    /// Adds `entry` to the open node of `level`, first writing that node when the entry would overflow it.
    mutating func push(_ entry: ChildEntry, level: Int, nodes: inout NodeWriter) throws {
        if level == levels.count {
            levels.append([])
            sizes.append(0)
        }
        let size = NodeWriter.innerEntrySize(entry)
        if !levels[level].isEmpty && sizes[level] + size > nodes.configuration.innerNodeSize {
            let written = try nodes.writeInner(levels[level][...])
            levels[level].removeAll(keepingCapacity: true)
            sizes[level] = 0
            try push(written, level: level + 1, nodes: &nodes)
        }
        levels[level].append(.written(entry))
        sizes[level] += size
    }

    /// Writes the open nodes bottom up and returns the root: the top level's only entry (a lone leaf too), or
    /// the node written from its entries; nil when nothing was pushed. The levels are left empty.
    mutating func finish(nodes: inout NodeWriter) throws -> NodePointer? {
        var level = 0
        while level < levels.count {
            if level == levels.count - 1 {
                let top = levels[level]
                defer {
                    levels = []
                    sizes = []
                    edge = []
                }
                guard top.count == 1 else { return try nodes.writeInner(top[...]).pointer }
                switch top[0] {
                case .written(let only): return only.pointer
                case .kept(let node, let i): return node._withUnsafeGuaranteedRef { $0.child(i) }
                }
            }
            if !levels[level].isEmpty {
                let written = try nodes.writeInner(levels[level][...])
                levels[level].removeAll()
                sizes[level] = 0
                try push(written, level: level + 1, nodes: &nodes)
            }
            level += 1
        }
        return nil
    }
}
