/// The open inner node of each level of a tree built bottom-up, level 0 just above the leaves: what a bulk load
/// (``TreeBuilder``) and an append (``TreeAppender``) hand their written leaves to. Each node is filled as far as
/// the target allows (FORMAT.md §8: the entries' bytes, the leading count not counted) and written when the next
/// entry would overflow it; its own entry then goes to the level above, which a full top level creates.
struct InnerLevels {
    /// Each level's open node. The top level's entries are the root's children.
    private var levels: [[ChildEntry]] = []
    /// Each open node's entry bytes (the sum of ``NodeWriter/innerEntrySize(_:)``).
    private var sizes: [Int] = []

    /// No levels yet: the first leaf pushed starts level 0.
    init() {}

    /// Levels holding `entries`, level 0's first (a tree's right edge, each node's entries but the last).
    init(resuming entries: [[ChildEntry]]) {
        levels = entries
        sizes = entries.map { $0.reduce(0) { $0 + NodeWriter.innerEntrySize($1) } }
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
        levels[level].append(entry)
        sizes[level] += size
    }

    /// Writes the open nodes bottom up and returns the root: the top level's only entry (a lone leaf too), or
    /// the node written from its entries; nil when nothing was pushed. The levels are left empty.
    mutating func finish(nodes: inout NodeWriter) throws -> NodePointer? {
        var level = 0
        while level < levels.count {
            if level == levels.count - 1 {
                let top = levels[level]
                levels = []
                sizes = []
                return top.count == 1 ? top[0].pointer : try nodes.writeInner(top[...]).pointer
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
