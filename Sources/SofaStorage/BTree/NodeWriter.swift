/// A child pointer with the largest key of its subtree: one entry of an inner node.
package struct ChildEntry {
    package var key: [UInt8]
    package var pointer: NodePointer
}

/// One entry of an inner node being written: a child a batch did not touch, whose encoded entry is copied
/// from its old node's bytes (no key or reduction array is made for it), or a child the batch wrote.
package enum InnerEntry {
    /// Entry `Int` of an inner node, copied as it is encoded there (the node must have
    /// ``Node/hasShortestKeyLengths``). The node is not retained: whoever makes the entries keeps it alive
    /// until they are written (the batch modify, ``BTree/modified(by:compress:)``, holds the old node while it
    /// rewrites it). A single append keeps ~200 entries of the inner nodes on its paths, and a retain and
    /// release for each, made again by every copy of an entry, was a sizable share of a single-document
    /// commit's instructions.
    case kept(Unmanaged<Node>, Int)
    /// A child given by its key and pointer.
    case written(ChildEntry)

    /// Entry `i` of `node`, which the caller keeps alive while the entry is used.
    static func kept(unretained node: Node, _ i: Int) -> InnerEntry { .kept(Unmanaged.passUnretained(node), i) }

    /// Entry `i` of `node`, which the caller keeps alive while the entry is used: kept in the node's bytes when
    /// its key lengths are in their shortest form (what lets the bytes be copied as they are), else decoded into
    /// a key and a pointer (a node an older build wrote).
    static func entry(_ i: Int, of node: Node) -> InnerEntry {
        node.hasShortestKeyLengths ? .kept(unretained: node, i)
            : .written(ChildEntry(key: Array(node.key(i)), pointer: node.child(i)))
    }

    /// Bytes the entry takes in a node payload.
    var encodedSize: Int {
        switch self {
        case .kept(let node, let i): node._withUnsafeGuaranteedRef { $0.encodedEntryRange(i).count }
        case .written(let c): NodeWriter.innerEntrySize(c)
        }
    }
}

/// A leaf encoded, reduced and framed, waiting to be appended
/// (``NodeWriter/prepareLeaf(_:payloadSize:configuration:compressor:scratch:framingInto:)``).
package struct PreparedLeaf: Sendable {
    /// Where the chunk as it goes into the file (prefix, then the payload, compressed when that saved space)
    /// lies in the buffer it was framed into.
    var framed: Range<Int>
    var lastKey: [UInt8]
    var rows: Int
    var reduction: [UInt8]
}

/// Encodes nodes, appends them to the file and computes their pointers (row count, size, reduction).
/// Shared by batch modify and bulk load, so both write byte-identical nodes.
package struct NodeWriter {
    package let file: StorageFile
    package let configuration: BTreeConfiguration
    private var scratch: [UInt8] = []
    /// Whether the leaves ``writeLeaf(_:payloadSize:)`` and ``writeLeaf(encodedEntries:layout:)`` write go into
    /// the node cache. A small batch modify keeps them (the next
    /// query reads them; a large one prepares its leaves on other threads and caches none, see
    /// ``BTree/modified(by:)``); a bulk load of millions of rows would only push the cache's useful nodes out,
    /// paying a node decode per leaf on the single-threaded tail of an index build to do it.
    private let cachesLeaves: Bool
    /// Where ``writeLeaf(encodedEntries:layout:)`` puts a leaf's payload when the cache does not take it: one
    /// buffer for every leaf, instead of an allocation and a free of each (8 KiB ones, which send the allocator
    /// down its slow paths for the small allocations around them; BENCHMARKS.md §3, "D1, twelfth round").
    /// Copies of the writer share it: they must not write leaves at the same time (a ``TreeAppender`` has one
    /// writer, which moves between threads only as its batch's chunks are joined).
    private let leafScratch: ScratchBuffer?

    package init(file: StorageFile, configuration: BTreeConfiguration, cachesLeaves: Bool = true) {
        self.file = file
        self.configuration = configuration
        self.cachesLeaves = cachesLeaves
        leafScratch = cachesLeaves ? nil : ScratchBuffer()
    }

    /// Bytes one leaf entry takes in a node payload.
    @inline(__always)
    package static func leafEntrySize(keyCount: Int, valueCount: Int) -> Int {
        varintSize(UInt64(keyCount)) + keyCount + varintSize(UInt64(valueCount)) + valueCount
    }

    /// Bytes one inner entry takes in a node payload.
    package static func innerEntrySize(_ child: ChildEntry) -> Int {
        varintSize(UInt64(child.key.count)) + child.key.count + child.pointer.encodedSize
    }

    /// Bytes the payload of a leaf holding `entries` takes.
    package static func leafPayloadSize(
        _ entries: [(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)]
    ) -> Int {
        var size = varintSize(UInt64(entries.count))
        for e in entries { size += leafEntrySize(keyCount: e.key.count, valueCount: e.value.count) }
        return size
    }

    /// Encodes the payload of a leaf holding `entries` into `out`, which is exactly
    /// ``leafPayloadSize(_:)`` bytes: batch modify and bulk load write the same bytes through it, and a
    /// ``TreeAppender`` the same entries through ``storeLeafEntry(key:valueCount:writingValue:at:base:)``.
    /// Sized first, then written with one copy per field (appending each field to an array cost more).
    ///
    /// - Parameter layout: when non-nil, each entry's ``Node/Layout`` is appended to it, for a node the cache
    ///   takes without parsing the bytes again.
    package static func encodeLeafPayload(
        _ entries: [(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)],
        into out: UnsafeMutableRawBufferPointer, layout: inout [Node.Layout]?
    ) {
        let base = out.baseAddress!
        var at = storeVarint(UInt64(entries.count), at: base)
        for e in entries {
            let entry = storeLeafEntry(key: e.key, valueCount: e.value.count,
                                       writingValue: { $0.copyMemory(from: e.value) }, at: at, base: base)
            layout?.append(entry)
            at = base + Int(entry.valueStart) + e.value.count
        }
        precondition(at - base == out.count)
    }

    /// Stores one leaf entry at `at` — the key's length and bytes, then the value's length and the `valueCount`
    /// bytes `write` stores in place (all of them) — and returns where its key and value lie, counted from
    /// `base`: the one leaf-entry encoder, for ``encodeLeafPayload(_:into:layout:)`` and a ``TreeAppender``'s
    /// open leaf. ``leafEntrySize(keyCount:valueCount:)`` bytes must be free at `at`.
    @inline(__always)
    package static func storeLeafEntry(
        key: UnsafeRawBufferPointer, valueCount: Int, writingValue write: (UnsafeMutableRawBufferPointer) -> Void,
        at start: UnsafeMutableRawPointer, base: UnsafeMutableRawPointer
    ) -> Node.Layout {
        var at = storeVarint(UInt64(key.count), at: start)
        let keyStart = at - base
        if key.count > 0 { at.copyMemory(from: key.baseAddress!, byteCount: key.count) }
        at = storeVarint(UInt64(valueCount), at: at + key.count)
        write(UnsafeMutableRawBufferPointer(start: at, count: valueCount))
        return Node.Layout(keyStart: Int32(keyStart), keyLength: Int32(key.count), valueStart: Int32(at - base),
                           valueLength: Int32(valueCount))
    }

    /// Writes one leaf holding `entries` (ascending, at least one) and returns its entry for the parent.
    ///
    /// The payload is encoded straight into an allocation of its exact size, which the node cache then takes
    /// over (write-through) without a copy or a parse.
    ///
    /// - Parameter payloadSize: ``leafPayloadSize(_:)`` of `entries`, when the caller has already summed the
    ///   entry sizes.
    package mutating func writeLeaf(
        _ entries: [(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)], payloadSize: Int? = nil
    ) throws -> ChildEntry {
        precondition(!entries.isEmpty)
        let total = payloadSize ?? NodeWriter.leafPayloadSize(entries)
        assert(total == NodeWriter.leafPayloadSize(entries))
        let bytes = UnsafeMutableRawPointer.allocate(byteCount: total, alignment: 8)
        var layout: [Node.Layout]? = nil
        if cachesLeaves {
            layout = []
            layout!.reserveCapacity(entries.count)
        }
        NodeWriter.encodeLeafPayload(entries, into: UnsafeMutableRawBufferPointer(start: bytes, count: total),
                                     layout: &layout)
        let reduction: [UInt8]
        do {
            reduction = try configuration.reducer?.reduce(entries) ?? []
        } catch {
            bytes.deallocate()
            throw error
        }
        return try writeLeafPayload(bytes, count: total, rows: entries.count, layout: layout,
                                    reduction: reduction, lastKey: entries[entries.count - 1].key)
    }

    /// Writes one leaf whose entries are already encoded and returns its entry for the parent: `entries` holds
    /// `layout.count` (at least one) leaf entries, ascending, one after the other as a leaf payload holds them
    /// after its entry count (FORMAT.md §8), and `layout` says where each one's key and value lie in `entries`.
    /// For a writer that encodes entries as they come (``TreeAppender``): the payload is the count and one copy
    /// of `entries`, with no entry list to encode from.
    package mutating func writeLeaf(encodedEntries entries: UnsafeRawBufferPointer,
                                    layout: [Node.Layout]) throws -> ChildEntry {
        precondition(!layout.isEmpty && entries.count > 0)
        let countSize = varintSize(UInt64(layout.count))
        let total = countSize + entries.count
        let bytes = leafScratch?.reserve(total) ?? UnsafeMutableRawPointer.allocate(byteCount: total, alignment: 8)
        (bytes + countSize).copyMemory(from: entries.baseAddress!, byteCount: entries.count)
        let countEnd = storeVarint(UInt64(layout.count), at: bytes)
        precondition(countEnd == bytes + countSize)
        func view(_ start: Int32, _ length: Int32) -> UnsafeRawBufferPointer {
            UnsafeRawBufferPointer(start: entries.baseAddress! + Int(start), count: Int(length))
        }
        let reduction: [UInt8]
        do {
            reduction = try configuration.reducer?.reduce(layout.map {
                (view($0.keyStart, $0.keyLength), view($0.valueStart, $0.valueLength))
            }) ?? []
        } catch {
            if leafScratch == nil { bytes.deallocate() }
            throw error
        }
        // The cached node's layout counts from the payload's start, before the entry count.
        let shift = Int32(countSize)
        let payloadLayout = cachesLeaves ? layout.map {
            Node.Layout(keyStart: $0.keyStart + shift, keyLength: $0.keyLength, valueStart: $0.valueStart + shift,
                        valueLength: $0.valueLength)
        } : nil
        let last = layout[layout.count - 1]
        return try writeLeafPayload(bytes, count: total, rows: layout.count, layout: payloadLayout,
                                    reduction: reduction, lastKey: view(last.keyStart, last.keyLength),
                                    owned: leafScratch == nil)
    }

    /// Appends the leaf payload `bytes` (`count` bytes) and returns its entry for the parent. When `owned` (an
    /// allocation for it, owned from here on), the node cache takes the payload if `layout` is given, else it is
    /// freed; otherwise it is ``leafScratch``'s, and `layout` must be nil.
    private mutating func writeLeafPayload(
        _ bytes: UnsafeMutableRawPointer, count: Int, rows: Int, layout: [Node.Layout]?, reduction: [UInt8],
        lastKey: UnsafeRawBufferPointer, owned: Bool = true
    ) throws -> ChildEntry {
        let offset: UInt64, length: Int
        do {
            (offset, length) = try file.append(kind: .leaf, payload: UnsafeRawBufferPointer(start: bytes, count: count),
                                               compress: configuration.compress)
        } catch {
            if owned { bytes.deallocate() }
            throw error
        }
        let key = Array(lastKey)
        if let layout {
            precondition(owned, "a scratch payload cached")
            let payload = ChunkPayload(taking: bytes, count: count, offset: offset, kind: .leaf, fileLength: length)
            file.nodeCache.insert(Node(payload: payload, isLeaf: true, layout: layout, children: []), at: offset)
        } else if owned {
            bytes.deallocate()
        }
        let pointer = NodePointer(offset: offset, rowCount: UInt64(rows), subtreeSize: UInt64(length),
                                  reduction: reduction)
        return ChildEntry(key: key, pointer: pointer)
    }

    /// Encodes, reduces and frames one leaf holding `entries` (ascending, at least one) for ``write(prepared:from:)``:
    /// the half of ``writeLeaf(_:)`` that does not touch the file, so a batch modify runs it for many leaves on
    /// other threads (each with its own `compressor`, nil when the tree does not compress, and its own
    /// `scratch` buffer for the payload; `payloadSize` as in ``writeLeaf(_:payloadSize:)``). The framed bytes,
    /// appended to `buffer` (one buffer for several leaves: one allocation, not one per leaf), are those
    /// ``writeLeaf(_:)`` appends.
    package static func prepareLeaf(
        _ entries: [(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)],
        payloadSize: Int? = nil, configuration: BTreeConfiguration, compressor: Compressor?, scratch: inout [UInt8],
        framingInto buffer: inout [UInt8]
    ) throws -> PreparedLeaf {
        precondition(!entries.isEmpty)
        let size = payloadSize ?? NodeWriter.leafPayloadSize(entries)
        assert(size == NodeWriter.leafPayloadSize(entries))
        // The buffer only grows, and is not cleared from leaf to leaf: its first `size` bytes are all written.
        if scratch.count < size { scratch.append(contentsOf: repeatElement(0, count: size - scratch.count)) }
        var noLayout: [Node.Layout]? = nil
        scratch.withUnsafeMutableBytes {
            NodeWriter.encodeLeafPayload(entries, into: UnsafeMutableRawBufferPointer(rebasing: $0[..<size]),
                                         layout: &noLayout)
        }
        let reduction = try configuration.reducer?.reduce(entries) ?? []
        let start = buffer.count
        let length = scratch.withUnsafeBytes {
            Chunk.append(kind: .leaf, payload: UnsafeRawBufferPointer(rebasing: $0[..<size]), compressor: compressor,
                         to: &buffer)
        }
        return PreparedLeaf(framed: start..<(start + length), lastKey: Array(entries[entries.count - 1].key),
                            rows: entries.count, reduction: reduction)
    }

    /// Appends a leaf ``prepareLeaf(_:payloadSize:configuration:compressor:scratch:framingInto:)`` framed into `buffer`
    /// and returns its entry for the parent. The leaf is not cached (see ``BTree/modified(by:)``).
    package mutating func write(prepared leaf: PreparedLeaf, from buffer: UnsafeRawBufferPointer) throws -> ChildEntry {
        let (offset, length) = try file.append(framed: UnsafeRawBufferPointer(rebasing: buffer[leaf.framed]))
        let pointer = NodePointer(offset: offset, rowCount: UInt64(leaf.rows), subtreeSize: UInt64(length),
                                  reduction: leaf.reduction)
        return ChildEntry(key: leaf.lastKey, pointer: pointer)
    }

    /// Replaces `payload` with the payload of a leaf holding `entries` and returns the leaf's reduction: the
    /// encoding half of ``writeLeaf(_:)``, for callers that frame and append chunks themselves.
    package func encodeLeaf(
        _ entries: [(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)], into payload: inout [UInt8]
    ) throws -> [UInt8] {
        // The buffer keeps its capacity from leaf to leaf: no allocation once it has grown.
        payload.removeAll(keepingCapacity: true)
        payload.append(contentsOf: repeatElement(0, count: NodeWriter.leafPayloadSize(entries)))
        var noLayout: [Node.Layout]? = nil
        payload.withUnsafeMutableBytes { NodeWriter.encodeLeafPayload(entries, into: $0, layout: &noLayout) }
        return try configuration.reducer?.reduce(entries) ?? []
    }

    /// Writes one inner node over `children` (ascending, at least one) and returns its entry for the parent.
    package mutating func writeInner(_ children: ArraySlice<ChildEntry>) throws -> ChildEntry {
        try writeInner(children.map { InnerEntry.written($0) }[...])
    }

    /// Writes one inner node over `entries` (ascending, at least one) and returns its entry for the parent.
    /// A kept entry's bytes are copied from its old node as they are; its reduction is read from those bytes.
    package mutating func writeInner(_ entries: ArraySlice<InnerEntry>) throws -> ChildEntry {
        precondition(!entries.isEmpty)
        scratch.removeAll(keepingCapacity: true)
        scratch.appendVarint(UInt64(entries.count))
        var layout: [Node.Layout] = []
        layout.reserveCapacity(entries.count)
        var fields: [Node.Child] = []
        fields.reserveCapacity(entries.count)
        var rows: UInt64 = 0
        var size: UInt64 = 0
        var k = entries.startIndex
        while k < entries.endIndex {
            switch entries[k] {
            case .kept(let unretained, let first):
                // A run of consecutive entries of one old node is one copy; each entry's fields move by `shift`.
                var last = first
                while k + 1 < entries.endIndex, case .kept(let next, let i) = entries[k + 1],
                      next.toOpaque() == unretained.toOpaque(), i == last + 1 {
                    last = i
                    k += 1
                }
                unretained._withUnsafeGuaranteedRef { node in
                    let start = node.encodedEntryRange(first).lowerBound
                    let end = node.encodedEntryRange(last).upperBound
                    let shift = Int32(scratch.count - start)
                    scratch.append(contentsOf: UnsafeRawBufferPointer(start: node.payload.base + start,
                                                                      count: end - start))
                    for i in first...last {
                        let child = Node.Child(offset: node.childOffset(i), rows: node.childRowCount(i),
                                               size: node.childSubtreeSize(i))
                        fields.append(child)
                        var l = node.entryLayout(i)
                        l.keyStart += shift
                        l.valueStart += shift
                        layout.append(l)
                        rows &+= child.rows
                        size &+= child.size
                    }
                }
            case .written(let c):
                scratch.appendVarint(UInt64(c.key.count))
                let keyStart = scratch.count
                scratch.append(contentsOf: c.key)
                c.pointer.encode(into: &scratch)
                fields.append(Node.Child(offset: c.pointer.offset, rows: c.pointer.rowCount,
                                         size: c.pointer.subtreeSize))
                layout.append(Node.Layout(keyStart: Int32(keyStart), keyLength: Int32(c.key.count),
                                          valueStart: Int32(scratch.count - c.pointer.reduction.count),
                                          valueLength: Int32(c.pointer.reduction.count)))
                rows &+= c.pointer.rowCount
                size &+= c.pointer.subtreeSize
            }
            k += 1
        }
        var reduction: [UInt8] = []
        if let reducer = configuration.reducer {
            // Every child's reduction is in the payload just encoded: rereduce views of it, copying none.
            reduction = try scratch.withUnsafeBytes { payload in
                try reducer.rereduce(layout.map {
                    UnsafeRawBufferPointer(rebasing: payload[Int($0.valueStart)..<Int($0.valueStart + $0.valueLength)])
                })
            }
        }
        let (offset, length) = try scratch.withUnsafeBytes {
            try file.append(kind: .inner, payload: $0, compress: configuration.compress)
        }
        cacheWrittenNode(at: offset, length: length, kind: .inner, layout: layout, children: fields)
        let pointer = NodePointer(offset: offset, rowCount: rows, subtreeSize: size + UInt64(length),
                                  reduction: reduction)
        let key: [UInt8]
        switch entries.last! {
        case .kept(let node, let i): key = node._withUnsafeGuaranteedRef { Array($0.key(i)) }
        case .written(let c): key = c.key
        }
        return ChildEntry(key: key, pointer: pointer)
    }

    /// Puts the node just encoded in `scratch` into the file's cache (write-through), so reading it back
    /// soon after — the next batch, or queries right after an index build — costs no decompression. The
    /// encoder recorded where every entry lies, so the bytes are not parsed again.
    private func cacheWrittenNode(at offset: UInt64, length: Int, kind: ChunkKind, layout: [Node.Layout],
                                  children: [Node.Child]) {
        let copy = UnsafeMutableRawPointer.allocate(byteCount: max(1, scratch.count), alignment: 8)
        scratch.withUnsafeBytes { copy.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        let payload = ChunkPayload(taking: copy, count: scratch.count, offset: offset, kind: kind, fileLength: length)
        file.nodeCache.insert(Node(payload: payload, isLeaf: kind == .leaf, layout: layout, children: children),
                              at: offset)
    }

    /// Splits items of the given sizes into runs of about equal size — `ceil(total / nodeSize)` runs, each
    /// within one item of `total / runs` — never empty. Cuts fall at the cumulative boundaries
    /// `k · total / runs`, so no shortfall piles up in the last run.
    package static func evenRuns(sizes: [Int], nodeSize: Int) -> [Range<Int>] {
        guard !sizes.isEmpty else { return [] }
        let total = sizes.reduce(0, +)
        let runs = max(1, (total + nodeSize - 1) / nodeSize)
        if runs == 1 { return [0..<sizes.count] }
        var out: [Range<Int>] = []
        out.reserveCapacity(runs)
        var start = 0, before = 0
        for (i, s) in sizes.enumerated() {
            // Cut before item i when its middle lies past the next boundary.
            if i > start && out.count < runs - 1 && before + s / 2 > (out.count + 1) * total / runs {
                out.append(start..<i)
                start = i
            }
            before += s
        }
        out.append(start..<sizes.count)
        return out
    }

    /// Splits items of the given sizes into runs for a node whose first `kept` items are its old entries,
    /// unchanged, and whose other items all come after them (a batch appending at the end of the tree's key
    /// range): full first. Each run takes items while it stays within `nodeSize`, the first one starting with
    /// all kept items, so the last run — the node the next appends go to — holds only what is left over.
    /// SQLite splits an appended-to rightmost page the same way ("quickbalance"); splitting it evenly instead
    /// would leave every node behind the right edge half full and make the node each later single append
    /// rewrites half again as large. Past the guard this is greedy packing from the first item (the kept items
    /// fit in the first run by the guard). Falls back to ``evenRuns(sizes:nodeSize:)`` when everything fits in
    /// one node (the same single run) or the kept items alone do not.
    package static func appendRuns(sizes: [Int], kept: Int, nodeSize: Int) -> [Range<Int>] {
        precondition(kept >= 0 && kept <= sizes.count)
        let keptSize = sizes[..<kept].reduce(0, +)
        guard keptSize <= nodeSize, sizes.reduce(0, +) > nodeSize else {
            return evenRuns(sizes: sizes, nodeSize: nodeSize)
        }
        var out: [Range<Int>] = []
        var start = 0, size = keptSize
        for i in kept..<sizes.count {
            // Cut before item i when it would overflow a run that holds something.
            if i > start && size + sizes[i] > nodeSize {
                out.append(start..<i)
                start = i
                size = 0
            }
            size += sizes[i]
        }
        out.append(start..<sizes.count)
        return out
    }

    /// Builds inner levels over `children` until one root remains.
    package mutating func buildUpperLevels(_ children: [ChildEntry]) throws -> ChildEntry? {
        var level = children
        while level.count > 1 {
            let runs = NodeWriter.evenRuns(sizes: level.map(NodeWriter.innerEntrySize),
                                           nodeSize: configuration.innerNodeSize)
            var next: [ChildEntry] = []
            next.reserveCapacity(runs.count)
            for run in runs { next.append(try writeInner(level[run])) }
            level = next
        }
        return level.first
    }
}

/// `rereduce` over owned reduction byte arrays (copied into one buffer so every view stays valid).
package func rereduce(_ reductions: [[UInt8]], with reducer: any Reducer) throws -> [UInt8] {
    var flat: [UInt8] = []
    var ranges: [Range<Int>] = []
    ranges.reserveCapacity(reductions.count)
    for r in reductions {
        ranges.append(flat.count..<(flat.count + r.count))
        flat.append(contentsOf: r)
    }
    return try flat.withUnsafeBytes { all in
        try reducer.rereduce(ranges.map { UnsafeRawBufferPointer(rebasing: all[$0]) })
    }
}
