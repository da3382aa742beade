import Dispatch
import SofaStorage
import Synchronization

/// A ``TreeBuilder`` fed from one thread and run on another: the caller's ascending pairs are copied into
/// batches of about 1 MiB, and a serial queue adds each batch to the builder (leaf encoding, LZ4, writes) while
/// the caller produces the next.
///
/// The tail of a first index build is single-threaded — merging the sorted runs, then bulk-loading every row —
/// so splitting it over two threads takes up to half of it off the clock. At most two batches wait for the
/// builder, so memory stays bounded however many rows stream through.
///
/// While pairs are in flight the builder's storage file must not be written by anyone else; ``finish()`` (or
/// ``drain()`` after a failure) waits for the queue before the caller touches the file again.
final class BackgroundTreeBuilder: @unchecked Sendable {
    /// Copied pairs: key and value bytes back to back, and per pair its key and value lengths.
    private struct Batch: Sendable {
        var bytes: [UInt8] = []
        var lengths: [(key: Int32, value: Int32)] = []
    }

    /// Bytes of pairs copied into one batch before it is handed to the queue.
    static let batchBytes = 1 << 20

    private let builder: TreeBuilder
    private let queue = DispatchQueue(label: "sofa.background-tree-builder")
    /// Batches that may wait for the queue at once.
    private let slots = DispatchSemaphore(value: 2)
    private var batch = Batch()
    /// The builder's first error; touched only on `queue`.
    private var failure: (any Error)?
    /// Set on `queue` when ``failure`` is, read by ``add(key:value:)`` so the caller stops early.
    private let failed = Atomic<Bool>(false)

    /// Feeds `builder`, which nothing else uses until ``finish()`` returns.
    init(_ builder: TreeBuilder) {
        self.builder = builder
        batch.bytes.reserveCapacity(BackgroundTreeBuilder.batchBytes + 4096)
    }

    /// Adds the next pair (keys strictly ascending, as ``TreeBuilder/add(key:value:)`` requires; a violation is
    /// reported by ``finish()``).
    ///
    /// - Throws: the builder's first error, as soon as the background queue has met one (so a failed write does
    ///   not wait for the caller to stream every remaining row).
    func add(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) throws {
        if failed.load(ordering: .acquiring) { try queue.sync { if let failure { throw failure } } }
        batch.bytes.append(contentsOf: key)
        batch.bytes.append(contentsOf: value)
        batch.lengths.append((Int32(key.count), Int32(value.count)))
        if batch.bytes.count >= BackgroundTreeBuilder.batchBytes { send() }
    }

    private func send() {
        guard !batch.lengths.isEmpty else { return }
        let full = batch
        batch = Batch()
        batch.bytes.reserveCapacity(BackgroundTreeBuilder.batchBytes + 4096)
        slots.wait()
        queue.async { [self] in
            defer { slots.signal() }
            guard failure == nil else { return }
            do {
                try full.bytes.withUnsafeBytes { bytes in
                    var offset = 0
                    for (keyLength, valueLength) in full.lengths {
                        let k = offset, v = offset + Int(keyLength)
                        offset = v + Int(valueLength)
                        try builder.add(key: UnsafeRawBufferPointer(rebasing: bytes[k..<v]),
                                        value: UnsafeRawBufferPointer(rebasing: bytes[v..<offset]))
                    }
                }
            } catch {
                failure = error
                failed.store(true, ordering: .releasing)
            }
        }
    }

    /// Adds what is left, waits for the builder and returns its tree (uncommitted).
    /// - Throws: the builder's first error.
    func finish() throws -> BTree {
        send()
        return try queue.sync {
            if let failure { throw failure }
            return try builder.finish()
        }
    }

    /// Waits until the builder has stopped working (call before discarding after an error elsewhere).
    func drain() {
        queue.sync {}
    }
}
