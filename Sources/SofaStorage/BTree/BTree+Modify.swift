import Dispatch

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
    /// Touched leaves from which a batch modify prepares its leaves on every core (below it, on the calling
    /// thread as it goes: a small batch is not worth waking other threads for).
    package static let parallelLeafThreshold = 64

    /// Applies a batch of changes in one pass and returns the new tree (CouchDB's `query_modify` shape).
    ///
    /// Each affected node is read once and rewritten once; subtrees no action touches keep their pointers.
    /// The new nodes are appended to the file but not committed: commit the returned tree's root with
    /// ``StorageFile/commit(roots:metadata:)``.
    ///
    /// When the batch touches at least ``parallelLeafThreshold`` leaves, each touched leaf's merge with its
    /// actions, encoding, reduction and framing run on every core, a window of leaves ahead of this thread,
    /// which appends them in order and writes the inner nodes above them (``LeafPreparation``). The file gets
    /// the same bytes either way (compressed nodes the same payloads: LZ4's output may vary with the history of
    /// the compressor, each worker having its own). Leaves written that way are not put in the node cache, as
    /// a small batch's are: a batch this large rewrites more leaves than are read again soon (1 % of a 1M-row
    /// view index: ~9,300 leaves, against a 64 MiB cache of ~14,000), and inserting each would evict and free
    /// another node — ~15 % of such an update's CPU when they were cached. Full buffers of such a batch's new
    /// nodes are written out on another thread (``StorageFile/beginBackgroundWrites()``): a failed write may
    /// then be reported by the file's next write, flush or commit rather than by this call.
    ///
    /// - Parameters:
    ///   - actions: strictly ascending by key (each key at most once).
    ///   - compress: whether the new nodes are stored LZ4-compressed when that saves space; `nil` follows the
    ///     configuration. A caller writing a path for one or two changes may store it raw: compressing the
    ///     path's nodes costs more than syncing the bytes it saves (readers take either, FORMAT.md §3).
    /// - Throws: `.invalidArgument` when the actions are not strictly ascending; storage errors.
    public func modified(by actions: [BTreeAction], compress: Bool? = nil) throws -> BTree {
        try modified(by: actions, compress: compress, parallelFrom: BTree.parallelLeafThreshold)
    }

    /// ``modified(by:compress:)`` preparing leaves on every core from `parallelFrom` touched leaves on (tests
    /// pass 1 or `Int.max` to take one path or the other).
    package func modified(by actions: [BTreeAction], compress: Bool? = nil, parallelFrom: Int) throws -> BTree {
        guard !actions.isEmpty else { return self }
        // Every key and value in one allocation: the descent and the leaf merges read them as views, copying
        // and retaining no action's arrays (a touched leaf's merge copied its actions' bytes, per leaf).
        return try modified(by: ActionBytes(actions), compress: compress, parallelFrom: parallelFrom)
    }

    /// ``modified(by:compress:)`` with the changes of `buffer` numbered in `order` (strictly ascending by key,
    /// as ``BTreeActionBuffer/sortedUnique()`` orders them), copied from the buffer once, in that order.
    ///
    /// - Throws: `.invalidArgument` when the keys are not strictly ascending in `order`; storage errors.
    package func modified(by buffer: BTreeActionBuffer, order: [Int], compress: Bool? = nil,
                          parallelFrom: Int = BTree.parallelLeafThreshold) throws -> BTree {
        guard !order.isEmpty else { return self }
        return try modified(by: ActionBytes(buffer, order: order), compress: compress, parallelFrom: parallelFrom)
    }

    private func modified(by bytes: ActionBytes, compress: Bool?, parallelFrom: Int) throws -> BTree {
        for i in 1..<max(1, bytes.count) where compareBytes(bytes.key(i - 1), bytes.key(i)) >= 0 {
            throw SofaError(.invalidArgument, "batch actions must be strictly ascending by key (action \(i))",
                            path: file.path)
        }
        let all = 0..<bytes.count
        let writer = self.forWriter
        var written = configuration
        if let compress { written.compress = compress }
        var nodes = NodeWriter(file: file, configuration: written)
        var top: [ChildEntry]
        if let root {
            let height = try writer.height(of: root.offset)
            var jobs: [LeafJob] = []
            if height > 0 { try writer.collectLeaves(root.offset, bytes, all, height: height, into: &jobs) }
            var prepared: LeafPreparation?
            if height > 0 && jobs.count >= parallelFrom {
                prepared = try LeafPreparation(tree: writer, configuration: written, actions: bytes, jobs: jobs)
            }
            // Workers read the file below its written length: wait for them before anything can cut it back.
            defer { prepared?.finish() }
            // The prepared leaves' bytes go out on another thread while this one appends the next ones.
            if prepared != nil { file.beginBackgroundWrites() }
            defer { if prepared != nil { file.endBackgroundWrites() } }
            top = try writer.modify(root.offset, bytes, all, height: height, nodes: &nodes, prepared: prepared)
        } else {
            top = try writer.writeLeaves(existing: nil, bytes, all, nodes: &nodes)
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

    /// Levels of inner nodes above the leaves under the node at `offset` (0: it is a leaf), down its first
    /// children. Every leaf of a tree is at the same depth: bulk loads build level by level, and a batch modify
    /// replaces each node with nodes of its own level.
    func height(of offset: UInt64) throws -> Int {
        var height = 0
        var node = try node(at: offset)
        while !node.isLeaf {
            height += 1
            node = try self.node(at: node.childOffset(0))
        }
        return height
    }

    /// Calls `body` with each child of inner node `node` that actions `range` of `actions` (ascending) touch, in
    /// order, and the actions that go to it: those up to the child's largest key (all remaining ones for the
    /// last child).
    private func forEachTouchedChild(
        _ node: Node, _ actions: ActionBytes, _ range: Range<Int>,
        _ body: (_ child: Int, _ actions: Range<Int>) throws -> Void
    ) throws {
        var next = range.lowerBound
        while next < range.upperBound {
            // The child holding the next action's key (binary search: a small batch skips the other children
            // without comparing), then every further action up to that child's largest key.
            let c = node.childIndex(for: actions.key(next))
            var end = next + 1
            if c == node.count - 1 {
                end = range.upperBound
            } else {
                let separator = node.key(c)
                while end < range.upperBound, compareBytes(actions.key(end), separator) <= 0 {
                    end += 1
                }
            }
            try body(c, next..<end)
            next = end
        }
    }

    /// Appends to `jobs` every leaf under the inner node at `offset` (`height` levels above the leaves) that
    /// actions `range` touch, with its actions, in key order — the leaves ``modify(_:_:_:height:nodes:prepared:)``
    /// will ask for, in the order it asks. Reads inner nodes only.
    private func collectLeaves(_ offset: UInt64, _ actions: ActionBytes, _ range: Range<Int>, height: Int,
                               into jobs: inout [LeafJob]) throws {
        let node = try node(at: offset)
        guard !node.isLeaf else { throw misplacedLeaf(at: offset) }
        try forEachTouchedChild(node, actions, range) { c, sub in
            if height == 1 {
                jobs.append(LeafJob(offset: node.childOffset(c), actions: sub, parent: offset, child: c))
            } else {
                try collectLeaves(node.childOffset(c), actions, sub, height: height - 1, into: &jobs)
            }
        }
    }

    /// The corruption error for a node at `offset` found at another depth than the tree's leaves.
    func misplacedLeaf(at offset: UInt64) -> SofaError {
        SofaError(.corruption, "tree leaves lie at different depths (node \(offset))", path: file.path,
                  offset: Int(clamping: offset))
    }

    /// Rewrites the subtree at `offset` (`height` levels of inner nodes above its leaves) with actions `range`
    /// of `actions` applied; returns its replacement entries (none when it became empty, several when it
    /// split). With `prepared`, the leaves' replacements come from there, made on other threads.
    private func modify(_ offset: UInt64, _ actions: ActionBytes, _ range: Range<Int>, height: Int,
                        nodes: inout NodeWriter, prepared: LeafPreparation?) throws -> [ChildEntry] {
        // This node is about to be replaced: its cached copy serves no newer commit.
        defer { file.nodeCache.remove(at: offset) }
        let node = try node(at: offset)
        // Every leaf lies at the height the first path down gave (as the parallel path requires too).
        guard node.isLeaf == (height == 0) else { throw misplacedLeaf(at: offset) }
        if node.isLeaf { return try writeLeaves(existing: node, actions, range, nodes: &nodes) }
        // Untouched children are kept as references into `node`: their entries are copied byte for byte.
        // They hold `node` unretained (InnerEntry.kept); its lifetime is extended past their writing below.
        // Plain loops, no nested functions: locals captured by a function passed as a closure live in a box
        // whose every access is checked for exclusivity at run time (~13,000 instructions per single-document
        // commit, callgrind).
        var touched: [(child: Int, actions: Range<Int>)] = []
        let fromPrepared = height == 1 && prepared != nil
        // The touched leaves below are the next prepared ones: no need to partition the actions again.
        if !fromPrepared { try forEachTouchedChild(node, actions, range) { touched.append(($0, $1)) } }
        var children: [InnerEntry] = []
        children.reserveCapacity(node.count + 2)
        var i = 0, t = 0
        while i <= node.count {
            var c = node.count
            var sub = range.lowerBound..<range.lowerBound
            if fromPrepared {
                if let next = prepared!.nextChild(of: offset) {
                    // Children come in order; one that does not was listed twice (two parents sharing this node
                    // in a damaged tree).
                    guard next >= i else {
                        throw SofaError(.corruption, "node \(offset) is the child of more than one inner node",
                                        path: file.path, offset: Int(clamping: offset))
                    }
                    c = next
                }
            } else if t < touched.count {
                (c, sub) = touched[t]
                t += 1
            }
            while i < c {
                children.append(.entry(i, of: node))
                i += 1
            }
            if c < node.count && fromPrepared {
                // Its worker took the leaf out of the node cache.
                try prepared!.write(leafAt: node.childOffset(c), nodes: &nodes, into: &children)
            } else if c < node.count {
                for entry in try modify(node.childOffset(c), actions, sub, height: height - 1, nodes: &nodes,
                                        prepared: prepared) {
                    children.append(.written(entry))
                }
            }
            i = c + 1
        }
        guard !children.isEmpty else { return [] }
        let sizes = children.map { $0.encodedSize }
        // Actions all past this node's largest key went to its last child (this node is on the tree's right
        // edge): every entry before that child's is unchanged, and is split off full (NodeWriter.appendRuns).
        let appending = !range.isEmpty && compareBytes(actions.key(range.lowerBound), node.key(node.count - 1)) > 0
        let runs = appending
            ? NodeWriter.appendRuns(sizes: sizes, kept: node.count - 1, nodeSize: configuration.innerNodeSize)
            : NodeWriter.evenRuns(sizes: sizes, nodeSize: configuration.innerNodeSize)
        var out: [ChildEntry] = []
        // The kept entries hold `node` unretained: it must live until the last of them is written.
        try withExtendedLifetime(node) {
            for run in runs { out.append(try nodes.writeInner(children[run])) }
        }
        return out
    }

    /// Merges a leaf's entries (or none) with actions `range` and writes the result as evenly filled leaves, or
    /// full first for appends (``NodeWriter/appendRuns(sizes:kept:nodeSize:)``).
    private func writeLeaves(existing node: Node?, _ actions: ActionBytes, _ range: Range<Int>,
                             nodes: inout NodeWriter) throws -> [ChildEntry] {
        var entries: [(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)] = []
        if let node {
            entries.reserveCapacity(node.count)
            for i in 0..<node.count { entries.append((node.key(i), node.value(i))) }
        }
        var scratch = MergeScratch()
        var out: [ChildEntry] = []
        // The entries are views of `node`'s payload.
        try withExtendedLifetime(node) {
            try BTree.mergeLeaf(entries, actions, range, nodeSize: configuration.nodeSize, scratch: &scratch) {
                run, payloadSize in out.append(try nodes.writeLeaf(run, payloadSize: payloadSize))
            }
        }
        return out
    }

    /// Merges a leaf's `entries` (none for a new tree) with actions `range` of `actions` (an action replaces
    /// or removes the entry of its key) and calls `body` with each run of the result that makes one leaf
    /// (evenly filled, or full first for appends: ``NodeWriter/appendRuns(sizes:kept:nodeSize:)``), in order,
    /// and the run's leaf payload size (``NodeWriter/leafPayloadSize(_:)``, summed from the sizes the split
    /// was made with). The merged list is built in `scratch`, whose buffers a caller merging leaf after leaf
    /// keeps.
    fileprivate static func mergeLeaf(
        _ entries: [(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)], _ actions: ActionBytes,
        _ range: Range<Int>, nodeSize: Int, scratch: inout MergeScratch,
        _ body: (_ run: [(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)],
                 _ payloadSize: Int) throws -> Void
    ) throws {
        scratch.merged.removeAll(keepingCapacity: true)
        scratch.sizes.removeAll(keepingCapacity: true)
        scratch.merged.reserveGrowing(entries.count + range.count)
        scratch.sizes.reserveGrowing(entries.count + range.count)
        var i = 0
        let n = entries.count
        for a in range {
            let key = actions.key(a)
            // The first entry not below the key, by binary search: a leaf gets few actions (about one, when 1 %
            // of a large tree's rows change), so most of its entries are copied without a comparison.
            var lo = i, hi = n
            while lo < hi {
                let mid = (lo + hi) >> 1
                if compareBytes(entries[mid].key, key) < 0 { lo = mid + 1 } else { hi = mid }
            }
            scratch.merged.append(contentsOf: entries[i..<lo])
            i = lo
            if i < n, compareBytes(entries[i].key, key) == 0 { i += 1 }  // replaced or removed
            if let v = actions.value(a) { scratch.merged.append((key, v)) }
        }
        scratch.merged.append(contentsOf: entries[i..<n])
        guard !scratch.merged.isEmpty else { return }
        var total = 0
        for e in scratch.merged {
            let size = NodeWriter.leafEntrySize(keyCount: e.key.count, valueCount: e.value.count)
            scratch.sizes.append(size)
            total += size
        }
        // One leaf, as either split below would make it (most merges: the leaf gained little).
        if total <= nodeSize { return try body(scratch.merged, varintSize(UInt64(scratch.merged.count)) + total) }
        // Actions all past the leaf's last key (appends at the end of the tree's key range) leave its entries
        // as they are, first: split full first, so the leaf the next appends go to starts small.
        let appending = n > 0 && !range.isEmpty && compareBytes(actions.key(range.lowerBound), entries[n - 1].key) > 0
        let runs = appending
            ? NodeWriter.appendRuns(sizes: scratch.sizes, kept: n, nodeSize: nodeSize)
            : NodeWriter.evenRuns(sizes: scratch.sizes, nodeSize: nodeSize)
        for run in runs {
            let payloadSize = varintSize(UInt64(run.count)) + scratch.sizes[run].reduce(0, +)
            try body(Array(scratch.merged[run]), payloadSize)
        }
    }
}

/// Buffers of ``BTree/mergeLeaf(_:_:_:nodeSize:scratch:_:)``, kept from leaf to leaf.
private struct MergeScratch {
    var merged: [(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)] = []
    var sizes: [Int] = []
}

/// A leaf a batch modify rewrites: its offset and the range of the batch's actions that go to it.
private struct LeafJob {
    var offset: UInt64
    var actions: Range<Int>
    /// The inner node pointing to the leaf, and the leaf's index there.
    var parent: UInt64
    var child: Int
}

/// The touched leaves of one batch modify, prepared on every core (read, merged with their actions, encoded,
/// reduced, framed) a window at a time, the next window while the writer appends the current one: memory
/// stays at two windows of jobs whatever the number of leaves touched. A job is one touched leaf with all its
/// actions, so a batch whose actions mostly fall in one leaf (appends at the end of the key range) is one
/// large job, prepared by one thread.
private final class LeafPreparation: @unchecked Sendable {
    /// Leaves per window.
    static let window = 256
    /// Leaves one worker task prepares at a time (with one compressor, when the tree compresses).
    static let perTask = 8
    /// Where windows are prepared: a queue of its own, so that a writer waiting for a window never waits for
    /// threads of the global pool its caller (a view update's mapping, an app's own work) may be holding.
    private static let queue = DispatchQueue(label: "sofa.leaf-preparation", attributes: .concurrent)

    /// One window being prepared, by tasks of ``perTask`` leaves each.
    final class Window: @unchecked Sendable {
        let group = DispatchGroup()
        var tasks: [TaskOutput] = []
    }

    /// What one task prepared: its leaves' replacements (none for a leaf that became empty), framed into one
    /// buffer, listed in one array (no array per leaf, which the writer would free).
    struct TaskOutput {
        var framed: [UInt8] = []
        var leaves: [PreparedLeaf] = []
        /// Per job done, where its replacements end in `leaves`.
        var ends: [Int] = []
        /// The error of the job after the last one done, which ended the task.
        var failure: (any Error)?
    }

    let reader: BTree
    let actions: ActionBytes
    let jobs: [LeafJob]
    /// The window being written and the one being prepared after it.
    private var current: Window?
    private var currentStart = 0
    private var ahead: Window?
    /// The next job the writer takes.
    private var next = 0

    /// Starts preparing the first two windows. The file's appended chunks are written out first: workers read
    /// below its written length, never the writer's buffer (leaves of an earlier, uncommitted pass are there).
    init(tree: BTree, configuration: BTreeConfiguration, actions: ActionBytes, jobs: [LeafJob]) throws {
        try tree.file.flushAppended()
        tree.file.beginHelperReads()
        // `configuration` is the one the new nodes are written with (whether they are compressed); reading
        // does not depend on it, each chunk carrying its own flag.
        reader = BTree(file: tree.file, root: tree.root, configuration: configuration,
                       limit: tree.file.writtenLength)
        self.actions = actions
        self.jobs = jobs
        current = start(at: 0)
        ahead = start(at: LeafPreparation.window)
    }

    /// Prepares jobs `first..<first + window` in the background (nil past the last job).
    private func start(at first: Int) -> Window? {
        guard first < jobs.count else { return nil }
        let window = Window()
        let range = first..<min(jobs.count, first + LeafPreparation.window)
        let tasks = (range.count + LeafPreparation.perTask - 1) / LeafPreparation.perTask
        window.tasks = Array(repeating: TaskOutput(), count: tasks)
        LeafPreparation.queue.async(group: window.group) { [self] in
            window.tasks.withUnsafeMutableBufferPointer { outputs in
                let outputs = UnsafeSendableOutputs(outputs)
                // Task t writes only its own slot of `outputs`.
                DispatchQueue.concurrentPerform(iterations: tasks) { t in
                    let compressor = reader.configuration.compress
                        ? Compressor(acceleration: reader.file.options.compressionAcceleration) : nil
                    let lower = range.lowerBound + t * LeafPreparation.perTask
                    var out = TaskOutput()
                    out.framed.reserveCapacity(LeafPreparation.perTask * (reader.configuration.nodeSize + 256))
                    out.leaves.reserveCapacity(LeafPreparation.perTask)
                    out.ends.reserveCapacity(LeafPreparation.perTask)
                    var scratch = PreparationScratch()
                    for j in lower..<min(range.upperBound, lower + LeafPreparation.perTask) {
                        do {
                            try prepare(jobs[j], compressor: compressor, scratch: &scratch, into: &out)
                        } catch {
                            out.failure = error
                            break
                        }
                        out.ends.append(out.leaves.count)
                    }
                    outputs.buffer[t] = out
                }
            }
        }
        return window
    }

    /// Buffers one worker task keeps from leaf to leaf.
    struct PreparationScratch {
        var entries: [(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)] = []
        var merge = MergeScratch()
        var payload: [UInt8] = []
    }

    /// One leaf's replacements: its entries merged with its actions, encoded, reduced and framed.
    ///
    /// A leaf in the node cache is taken from there (its bytes were checked when it was read) and taken out of
    /// it, off the writer's thread: it serves no newer commit. Any other is read as a list of entry views
    /// over its chunk, not decoded as a ``Node``: a node's entry layout and key heads serve searches, and this
    /// leaf is walked once before it is replaced.
    private func prepare(_ job: LeafJob, compressor: Compressor?, scratch: inout PreparationScratch,
                         into out: inout TaskOutput) throws {
        if let cached = reader.file.nodeCache.node(at: job.offset) {
            reader.file.nodeCache.remove(at: job.offset)
            guard cached.isLeaf else { throw reader.misplacedLeaf(at: job.offset) }
            scratch.entries.removeAll(keepingCapacity: true)
            for i in 0..<cached.count { scratch.entries.append((cached.key(i), cached.value(i))) }
            return try merge(job, entriesOf: cached, compressor: compressor, scratch: &scratch, into: &out)
        }
        guard job.offset < reader.limit else {
            throw SofaError(.corruption, "node pointer \(job.offset) is past the end of its commit (\(reader.limit))",
                            path: reader.file.path, offset: Int(clamping: job.offset))
        }
        let chunk = try reader.file.readChunk(at: job.offset, kind: nil, limit: reader.limit)
        guard chunk.kind == .leaf else {
            if chunk.kind == .inner { throw reader.misplacedLeaf(at: job.offset) }
            throw SofaError(.corruption, "a \(chunk.kind) chunk where a tree node was expected",
                            path: reader.file.path, offset: Int(clamping: job.offset))
        }
        try Node.leafEntries(of: chunk, path: reader.file.path, into: &scratch.entries)
        try merge(job, entriesOf: chunk, compressor: compressor, scratch: &scratch, into: &out)
    }

    /// Merges `scratch.entries`, views of `owner`'s bytes, with the job's actions and prepares the result.
    private func merge(_ job: LeafJob, entriesOf owner: AnyObject, compressor: Compressor?,
                       scratch: inout PreparationScratch, into out: inout TaskOutput) throws {
        try withExtendedLifetime(owner) {
            try BTree.mergeLeaf(scratch.entries, actions, job.actions, nodeSize: reader.configuration.nodeSize,
                                scratch: &scratch.merge) { run, payloadSize in
                out.leaves.append(try NodeWriter.prepareLeaf(
                    run, payloadSize: payloadSize, configuration: reader.configuration, compressor: compressor,
                    scratch: &scratch.payload, framingInto: &out.framed))
            }
        }
    }

    /// Appends the replacements of the leaf at `offset` (the next job: the writer asks in key order) and
    /// their entries for the parent to `children`.
    func write(leafAt offset: UInt64, nodes: inout NodeWriter, into children: inout [InnerEntry]) throws {
        guard next < jobs.count, jobs[next].offset == offset else { throw reader.misplacedLeaf(at: offset) }
        if next - currentStart == LeafPreparation.window {
            current?.group.wait()
            current = ahead
            currentStart = next
            ahead = start(at: next + LeafPreparation.window)
        }
        guard let current else { throw reader.misplacedLeaf(at: offset) }
        current.group.wait()
        let index = next - currentStart
        let (t, j) = index.quotientAndRemainder(dividingBy: LeafPreparation.perTask)
        try current.tasks.withUnsafeBufferPointer { tasks in
            let task = tasks[t]
            guard j < task.ends.count else { throw task.failure ?? reader.misplacedLeaf(at: offset) }
            try task.framed.withUnsafeBytes { buffer in
                for leaf in task.leaves[(j == 0 ? 0 : task.ends[j - 1])..<task.ends[j]] {
                    children.append(.written(try nodes.write(prepared: leaf, from: buffer)))
                }
            }
        }
        next += 1
    }

    /// The index in `parent` of the next leaf to write, when `parent` points to it (the writer asks for each
    /// touched leaf of a parent of leaves in turn).
    func nextChild(of parent: UInt64) -> Int? {
        guard next < jobs.count, jobs[next].parent == parent else { return nil }
        return jobs[next].child
    }

    /// Waits until no worker reads the file any more, then lets a failed write's cut happen
    /// (``StorageFile/endHelperReads()``). Called once, when the modify returns or throws.
    func finish() {
        current?.group.wait()
        ahead?.group.wait()
        reader.file.endHelperReads()
    }
}

/// Slots written from several threads at distinct indices.
private struct UnsafeSendableOutputs: @unchecked Sendable {
    let buffer: UnsafeMutableBufferPointer<LeafPreparation.TaskOutput>
    init(_ buffer: UnsafeMutableBufferPointer<LeafPreparation.TaskOutput>) { self.buffer = buffer }
}

/// A batch's keys and values copied into one allocation, which lives as long as this object: views of any of
/// them can be held at once, on any thread, with no action's arrays retained or pinned.
private final class ActionBytes: @unchecked Sendable {
    /// Where action i's key and value lie in `storage` (`valueCount` -1: a removal).
    private struct Item {
        var keyStart: Int
        var keyCount: Int
        var valueStart: Int
        var valueCount: Int
    }

    /// The number of actions.
    let count: Int
    /// One allocation: the items, then the bytes.
    private let items: UnsafeMutablePointer<Item>
    private let storage: UnsafeMutableRawPointer

    /// Room for `count` actions of `total` key and value bytes, to be filled with ``copy(_:key:value:)``.
    private init(count: Int, total: Int) {
        self.count = count
        let itemBytes = count * MemoryLayout<Item>.stride
        let memory = UnsafeMutableRawPointer.allocate(byteCount: max(1, itemBytes + total),
                                                      alignment: MemoryLayout<Item>.alignment)
        items = memory.bindMemory(to: Item.self, capacity: count)
        storage = memory + itemBytes
    }

    convenience init(_ actions: [BTreeAction]) {
        var total = 0
        for a in actions { total += a.key.count + (a.value?.count ?? 0) }
        self.init(count: actions.count, total: total)
        var at = 0
        for (i, a) in actions.enumerated() {
            a.key.withUnsafeBytes { key in
                if let value = a.value {
                    value.withUnsafeBytes { copy(i, key: key, value: $0, at: &at) }
                } else {
                    copy(i, key: key, value: nil, at: &at)
                }
            }
        }
    }

    /// The changes of `buffer` numbered in `order`, in that order.
    convenience init(_ buffer: BTreeActionBuffer, order: [Int]) {
        var total = 0
        buffer.forEach(in: order) { key, value in total += key.count + (value?.count ?? 0) }
        self.init(count: order.count, total: total)
        var at = 0, i = 0
        buffer.forEach(in: order) { key, value in
            copy(i, key: key, value: value, at: &at)
            i += 1
        }
    }

    /// Copies action `i`'s key and value (nil: a removal) to `at` in the storage, and advances `at` past them.
    private func copy(_ i: Int, key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer?, at: inout Int) {
        // The storage was sized for every action's bytes: these fit.
        if key.count > 0 { (storage + at).copyMemory(from: key.baseAddress!, byteCount: key.count) }
        let keyStart = at
        at += key.count
        let valueStart = at
        if let value, value.count > 0 { (storage + at).copyMemory(from: value.baseAddress!, byteCount: value.count) }
        at += value?.count ?? 0
        (items + i).initialize(to: Item(keyStart: keyStart, keyCount: key.count, valueStart: valueStart,
                                        valueCount: value?.count ?? -1))
    }

    deinit {
        UnsafeMutableRawPointer(items).deallocate()
    }

    /// Action `i`'s key. Valid while this object lives.
    @inline(__always)
    func key(_ i: Int) -> UnsafeRawBufferPointer {
        precondition(i >= 0 && i < count)
        let item = items[i]
        return UnsafeRawBufferPointer(start: storage + item.keyStart, count: item.keyCount)
    }

    /// Action `i`'s value, nil for a removal. Valid while this object lives.
    @inline(__always)
    func value(_ i: Int) -> UnsafeRawBufferPointer? {
        precondition(i >= 0 && i < count)
        let item = items[i]
        return item.valueCount < 0
            ? nil : UnsafeRawBufferPointer(start: storage + item.valueStart, count: item.valueCount)
    }
}

/// `memcmp` order of two arrays.
package func compareArrays(_ a: [UInt8], _ b: [UInt8]) -> Int {
    a.withUnsafeBytes { x in b.withUnsafeBytes { y in compareBytes(x, y) } }
}
