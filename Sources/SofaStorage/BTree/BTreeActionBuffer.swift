/// Changes for one batch modify, collected one by one into a single buffer — each key and value copied in, no
/// array per change — then put in key order by ``sortedUnique()`` and applied with
/// ``BTree/modified(by:order:compress:parallelFrom:)``.
///
/// A view update collects ~10,000 row changes per pass: as ``BTreeAction``s that was two arrays per change,
/// made on the update's thread, copied again by the sort and by the modify's own buffer, and freed after the pass,
/// all on the thread the update waits for. Here the changes are one append each into one buffer, the sort
/// orders indices, and the modify copies the bytes once, in order.
package struct BTreeActionBuffer: Sendable {
    /// Where change i's key lies in `bytes`; its value, if any, follows the key.
    private struct Item {
        var keyStart: Int
        var keyCount: Int
        /// -1: a removal.
        var valueCount: Int
    }

    private var bytes: [UInt8] = []
    private var items: [Item] = []

    /// An empty buffer.
    package init() {}

    /// The number of changes collected (several for one key count once each).
    package var count: Int { items.count }

    /// Whether no change was collected.
    package var isEmpty: Bool { items.isEmpty }

    /// Bytes a change takes beyond its key and value bytes.
    package static var itemOverhead: Int { MemoryLayout<Item>.stride }

    /// Collects a put of `value` under `key`.
    package mutating func put(_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) {
        items.append(Item(keyStart: bytes.count, keyCount: key.count, valueCount: value.count))
        bytes.appendBytes(key)
        bytes.appendBytes(value)
    }

    /// Collects the removal of `key`.
    package mutating func remove(_ key: UnsafeRawBufferPointer) {
        items.append(Item(keyStart: bytes.count, keyCount: key.count, valueCount: -1))
        bytes.appendBytes(key)
    }

    /// Forgets every change, keeping the buffers' capacity for the next batch.
    package mutating func removeAll() {
        bytes.removeAll(keepingCapacity: true)
        items.removeAll(keepingCapacity: true)
    }

    /// Calls `body` with the key and value (nil for a removal) of each change numbered in `order`, in that
    /// order; the views are valid during the call.
    package func forEach(in order: [Int],
                         _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer?) throws -> Void)
        rethrows
    {
        try bytes.withUnsafeBytes { all in
            for i in order {
                let item = items[i]
                let valueStart = item.keyStart + item.keyCount
                try body(UnsafeRawBufferPointer(rebasing: all[item.keyStart..<valueStart]),
                         item.valueCount < 0 ? nil
                             : UnsafeRawBufferPointer(rebasing: all[valueStart..<(valueStart + item.valueCount)]))
            }
        }
    }

    /// The numbers of the changes in ascending `memcmp` order of their keys; of several changes of one key, only
    /// the last collected (a row removed and emitted again: the put wins).
    package func sortedUnique() -> [Int] {
        bytes.withUnsafeBytes { all in
            let order = items.withUnsafeBufferPointer { items in
                byteOrder(count: items.count, in: all) { i in
                    items[i].keyStart..<(items[i].keyStart + items[i].keyCount)
                }
            }
            var out: [Int] = []
            out.reserveCapacity(order.count)
            for i in order {
                // Equal keys are adjacent, in collection order: the later replaces the earlier.
                if let previous = out.last, compareBytes(key(previous, all), key(i, all)) == 0 {
                    out[out.count - 1] = i
                } else {
                    out.append(i)
                }
            }
            return out
        }
    }

    private func key(_ i: Int, _ all: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        let item = items[i]
        return UnsafeRawBufferPointer(rebasing: all[item.keyStart..<(item.keyStart + item.keyCount)])
    }
}

/// The numbers `0..<count` in ascending `memcmp` order of the keys `span(i)` of `bytes`, equal keys in number
/// order.
///
/// Keys are ordered by their first 8 bytes first (one integer compare), by `memcmp` of the whole keys only when
/// those tie: a pass's tens of thousands of keys sort without a `memcmp` per comparison.
package func byteOrder(count: Int, in bytes: UnsafeRawBufferPointer, span: (Int) -> Range<Int>) -> [Int] {
    var order: [(head: UInt64, index: Int)] = []
    order.reserveCapacity(count)
    for i in 0..<count {
        let s = span(i)
        // The first 8 key bytes, big-endian, zero-padded: ordered as the keys are when they differ.
        var head: UInt64 = 0
        for k in 0..<8 { head = head << 8 | UInt64(k < s.count ? bytes[s.lowerBound + k] : 0) }
        order.append((head, i))
    }
    order.sort { x, y in
        if x.head != y.head { return x.head < y.head }
        let c = compareBytes(UnsafeRawBufferPointer(rebasing: bytes[span(x.index)]),
                             UnsafeRawBufferPointer(rebasing: bytes[span(y.index)]))
        return c != 0 ? c < 0 : x.index < y.index
    }
    return order.map(\.index)
}
