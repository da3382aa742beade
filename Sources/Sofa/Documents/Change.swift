import SofaStorage
import Synchronization

/// One document's latest change, as the changes feed reports it.
public struct Change: Sendable, Equatable, CustomStringConvertible {
    /// The sequence of the change: the document's latest.
    public let sequence: UInt64
    /// The document changed.
    public let documentID: String
    /// Its winning revision after the change.
    public let revisionID: String
    /// True when the winning revision is a deletion.
    public let isDeleted: Bool
    /// True when the document has more than one non-deleted leaf revision.
    public let isConflicted: Bool

    /// `sequence id rev` with a `deleted`/`conflicted` mark when they apply.
    public var description: String {
        "\(sequence) \(documentID) \(revisionID)" + (isDeleted ? " deleted" : "") + (isConflicted ? " conflicted" : "")
    }
}

/// What one commit changed: the sequences it assigned, readable as ``Change``s from the commit's snapshot.
///
/// Delivered to change listeners and streams after every commit that changed something, in commit order.
public struct ChangeBatch: Sendable {
    /// The first sequence the commit assigned.
    public let firstSequence: UInt64
    /// The database's last sequence after the commit.
    public let lastSequence: UInt64
    let snapshot: DocumentSnapshot

    /// The documents the commit changed, each once, in sequence order, read from the commit itself (later
    /// commits do not affect the answer).
    ///
    /// - Throws: ``SofaError`` for a storage failure.
    public func changes() throws -> [Change] {
        try snapshot.changes(since: firstSequence - 1, limit: nil)
    }
}

extension DocumentSnapshot {
    /// Documents whose latest change is after `since`, in sequence order, at most `limit` of them.
    func changes(since: UInt64, limit: Int?) throws -> [Change] {
        var out: [Change] = []
        if limit == 0 || since == UInt64.max { return out }
        let range = KeyRange(lower: KeyBound(DocumentFile.sequenceKey(since), inclusive: false))
        try forEachBySequence(in: range) { sequence, value in
            let idBytes = Array(value)
            guard let record = try record(idBytes) else {
                throw SofaError(.corruption, "by-sequence entry \(sequence) names a document missing from by-ID",
                                path: path)
            }
            let winner = record.tree.winner
            out.append(Change(sequence: sequence, documentID: String(decoding: idBytes, as: UTF8.self),
                              revisionID: winner.id.description, isDeleted: winner.deleted,
                              isConflicted: record.tree.isConflicted))
            return limit.map { out.count < $0 } ?? true
        }
        return out
    }
}

/// Delivers ``ChangeBatch``es to listeners and streams, in commit order, outside the write lock.
///
/// A committing writer enqueues its batch while it still holds the write lock (so the queue is in commit
/// order), then, after releasing it, drains the queue unless another thread is already draining. Listeners
/// therefore run on some writer's thread, one at a time, never under the write lock, and may themselves write
/// to the database (their commit is queued and delivered after the current one).
final class ChangeNotifier: Sendable {
    private struct State {
        var listeners: [UInt64: @Sendable (ChangeBatch) -> Void] = [:]
        var streams: [UInt64: AsyncStream<ChangeBatch>.Continuation] = [:]
        var nextID: UInt64 = 1
        var queue: [ChangeBatch] = []
        var draining = false
    }
    private let state = Lock(State())

    func addListener(_ body: @escaping @Sendable (ChangeBatch) -> Void) -> UInt64 {
        state.withLock { s in
            defer { s.nextID += 1 }
            s.listeners[s.nextID] = body
            return s.nextID
        }
    }

    func removeListener(_ id: UInt64) {
        _ = state.withLock { $0.listeners.removeValue(forKey: id) }
    }

    func makeStream() -> AsyncStream<ChangeBatch> {
        let (stream, continuation) = AsyncStream<ChangeBatch>.makeStream(bufferingPolicy: .unbounded)
        let id = state.withLock { s in
            defer { s.nextID += 1 }
            s.streams[s.nextID] = continuation
            return s.nextID
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.streams.removeValue(forKey: id) }
        }
        return stream
    }

    /// Queues a commit's batch; call with the write lock held. With no listener and no stream the batch is
    /// dropped: nobody registered before the commit could receive it, and one registered later starts after it.
    func enqueue(_ batch: ChangeBatch) {
        state.withLock { s in
            if !s.listeners.isEmpty || !s.streams.isEmpty { s.queue.append(batch) }
        }
    }

    /// Delivers queued batches unless another thread is doing so; call after releasing the write lock. An empty
    /// queue costs one lock: a batch queued after the check is drained by the writer that queued it.
    func drain() {
        let isDrainer = state.withLock { s -> Bool in
            if s.draining || s.queue.isEmpty { return false }
            s.draining = true
            return true
        }
        guard isDrainer else { return }
        while true {
            typealias Delivery = (ChangeBatch, [@Sendable (ChangeBatch) -> Void],
                                  [AsyncStream<ChangeBatch>.Continuation])
            let next = state.withLock { s -> Delivery? in
                guard !s.queue.isEmpty else {
                    s.draining = false  // in the same critical section as the emptiness check: nothing is missed
                    return nil
                }
                let listeners = s.listeners.sorted { $0.key < $1.key }.map(\.value)
                return (s.queue.removeFirst(), listeners, Array(s.streams.values))
            }
            guard let (batch, listeners, streams) = next else { return }
            for continuation in streams { continuation.yield(batch) }
            for listener in listeners { listener(batch) }
        }
    }

    /// Ends every stream (the database closed).
    func finish() {
        let streams = state.withLock { s in
            defer { s.streams.removeAll() }
            return Array(s.streams.values)
        }
        for continuation in streams { continuation.finish() }
    }
}
