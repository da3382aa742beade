/// A child pointer with the largest key of its subtree: one entry of an inner node.
package struct ChildEntry {
    package var key: [UInt8]
    package var pointer: NodePointer
}

/// Encodes nodes, appends them to the file and computes their pointers (row count, size, reduction).
/// Shared by batch modify and bulk load, so both write byte-identical nodes.
package struct NodeWriter {
    package let file: StorageFile
    package let configuration: BTreeConfiguration
    private var scratch: [UInt8] = []
    /// Whether written leaves go into the node cache. Batch modify keeps them (the next query reads them); a
    /// bulk load of millions of rows would only push the cache's useful nodes out, paying a node decode per
    /// leaf on the single-threaded tail of an index build to do it.
    private let cachesLeaves: Bool

    package init(file: StorageFile, configuration: BTreeConfiguration, cachesLeaves: Bool = true) {
        self.file = file
        self.configuration = configuration
        self.cachesLeaves = cachesLeaves
    }

    /// Bytes one leaf entry takes in a node payload.
    package static func leafEntrySize(keyCount: Int, valueCount: Int) -> Int {
        varintSize(UInt64(keyCount)) + keyCount + varintSize(UInt64(valueCount)) + valueCount
    }

    /// Bytes one inner entry takes in a node payload.
    package static func innerEntrySize(_ child: ChildEntry) -> Int {
        varintSize(UInt64(child.key.count)) + child.key.count + child.pointer.encodedSize
    }

    /// Writes one leaf holding `entries` (ascending, at least one) and returns its entry for the parent.
    package mutating func writeLeaf(
        _ entries: [(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)]
    ) throws -> ChildEntry {
        precondition(!entries.isEmpty)
        let reduction = try encodeLeaf(entries, into: &scratch)
        let (offset, length) = try scratch.withUnsafeBytes {
            try file.append(kind: .leaf, payload: $0, compress: configuration.compress)
        }
        if cachesLeaves {
            // The entries' positions follow from their sizes: the cached copy needs no decoding.
            // Exactly sized: the node keeps this array.
            var layout: [Node.Layout] = []
            layout.reserveCapacity(entries.count)
            var at = varintSize(UInt64(entries.count))
            for e in entries {
                let keyStart = at + varintSize(UInt64(e.key.count))
                let valueStart = keyStart + e.key.count + varintSize(UInt64(e.value.count))
                layout.append(Node.Layout(keyStart: keyStart, keyLength: e.key.count, valueStart: valueStart,
                                          valueLength: e.value.count))
                at = valueStart + e.value.count
            }
            assert(at == scratch.count)
            file.nodeCache.insert(Node(encodedLeaf: copyOfScratch(at: offset, length: length, kind: .leaf),
                                       layout: layout), at: offset)
        }
        let pointer = NodePointer(offset: offset, rowCount: UInt64(entries.count), subtreeSize: UInt64(length),
                                  reduction: reduction)
        return ChildEntry(key: Array(entries[entries.count - 1].key), pointer: pointer)
    }

    /// Replaces `payload` with the payload of a leaf holding `entries` and returns the leaf's reduction: the
    /// encoding half of ``writeLeaf(_:)``, for callers that frame and append chunks themselves.
    package func encodeLeaf(
        _ entries: [(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)], into payload: inout [UInt8]
    ) throws -> [UInt8] {
        // Sized first, then written with one copy per field: appending each field to the array cost more
        // than copying it.
        var size = varintSize(UInt64(entries.count))
        for e in entries { size += NodeWriter.leafEntrySize(keyCount: e.key.count, valueCount: e.value.count) }
        // The buffer keeps its capacity from leaf to leaf: no allocation once it has grown.
        payload.removeAll(keepingCapacity: true)
        payload.append(contentsOf: repeatElement(0, count: size))
        payload.withUnsafeMutableBytes { out in
            var at = 0
            func varint(_ value: Int) {
                var v = UInt64(value)
                while v >= 0x80 {
                    out[at] = UInt8(truncatingIfNeeded: v) | 0x80
                    at += 1
                    v >>= 7
                }
                out[at] = UInt8(v)
                at += 1
            }
            func bytes(_ field: UnsafeRawBufferPointer) {
                varint(field.count)
                if let base = field.baseAddress, field.count > 0 {
                    (out.baseAddress! + at).copyMemory(from: base, byteCount: field.count)
                    at += field.count
                }
            }
            varint(entries.count)
            for e in entries {
                bytes(e.key)
                bytes(e.value)
            }
            precondition(at == size)
        }
        return try configuration.reducer?.reduce(entries) ?? []
    }

    /// Writes one inner node over `children` (ascending, at least one) and returns its entry for the parent.
    package mutating func writeInner(_ children: ArraySlice<ChildEntry>) throws -> ChildEntry {
        precondition(!children.isEmpty)
        scratch.removeAll(keepingCapacity: true)
        scratch.appendVarint(UInt64(children.count))
        var rows: UInt64 = 0
        var size: UInt64 = 0
        for c in children {
            scratch.appendVarint(UInt64(c.key.count))
            scratch.append(contentsOf: c.key)
            c.pointer.encode(into: &scratch)
            rows &+= c.pointer.rowCount
            size &+= c.pointer.subtreeSize
        }
        var reduction: [UInt8] = []
        if let reducer = configuration.reducer {
            reduction = try rereduce(children.map(\.pointer.reduction), with: reducer)
        }
        let (offset, length) = try scratch.withUnsafeBytes {
            try file.append(kind: .inner, payload: $0, compress: configuration.compress)
        }
        try cacheWrittenNode(at: offset, length: length, kind: .inner)
        let pointer = NodePointer(offset: offset, rowCount: rows, subtreeSize: size + UInt64(length),
                                  reduction: reduction)
        return ChildEntry(key: children.last!.key, pointer: pointer)
    }

    /// Puts the node just encoded in `scratch` into the file's cache (write-through), so reading it back
    /// soon after — the next batch, or queries right after an index build — costs no decompression.
    private func cacheWrittenNode(at offset: UInt64, length: Int, kind: ChunkKind) throws {
        let payload = copyOfScratch(at: offset, length: length, kind: kind)
        file.nodeCache.insert(try Node(payload: payload, isLeaf: kind == .leaf, path: file.path), at: offset)
    }

    /// The node just encoded in `scratch`, copied into a payload of its own.
    private func copyOfScratch(at offset: UInt64, length: Int, kind: ChunkKind) -> ChunkPayload {
        let copy = UnsafeMutableRawPointer.allocate(byteCount: max(1, scratch.count), alignment: 8)
        scratch.withUnsafeBytes { copy.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        return ChunkPayload(taking: copy, count: scratch.count, offset: offset, kind: kind, fileLength: length)
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

    /// Builds inner levels over `children` until one root remains.
    package mutating func buildUpperLevels(_ children: [ChildEntry]) throws -> ChildEntry? {
        var level = children
        while level.count > 1 {
            let runs = NodeWriter.evenRuns(sizes: level.map(NodeWriter.innerEntrySize), nodeSize: configuration.nodeSize)
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
