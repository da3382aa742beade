/// A registered change listener; pass it to ``Database/removeChangeListener(_:)`` to stop it.
public struct ChangeListenerToken: Sendable, Hashable {
    let id: UInt64
}

extension Database {
    /// The documents changed after sequence `since`, each once at its latest change, in sequence order.
    ///
    /// ```swift
    /// var since: UInt64 = 0
    /// for change in try db.changes(since: since) { print(change.documentID, change.revisionID) }
    /// since = db.lastSequence
    /// ```
    ///
    /// - Parameters:
    ///   - since: report changes with a greater sequence (0 for all).
    ///   - limit: at most this many changes; nil for all.
    /// - Throws: ``SofaError`` — `.invalidArgument` for a negative limit or a closed database; storage errors.
    public func changes(since: UInt64 = 0, limit: Int? = nil) throws -> [Change] {
        if let limit, limit < 0 { throw SofaError(.invalidArgument, "limit must not be negative") }
        return try readSnapshot().changes(since: since, limit: limit)
    }

    /// Calls `listener` after every commit that changed documents, in commit order, one call at a time.
    /// Every commit that completes after this call returns is reported; one that completed before it may or may
    /// not be (to catch up without a gap, register first, then read ``changes(since:limit:)``).
    ///
    /// The listener runs on the thread of some writer after the commit is visible and the write lock released,
    /// so it may read and even write the database (its own commit is reported after this one returns). Keep
    /// it short: the writer that runs it waits.
    ///
    /// ```swift
    /// let token = db.addChangeListener { batch in print("up to", batch.lastSequence) }
    /// db.removeChangeListener(token)
    /// ```
    ///
    /// - Parameter listener: receives the commit's ``ChangeBatch``.
    /// - Returns: a token for ``removeChangeListener(_:)``.
    @discardableResult
    public func addChangeListener(_ listener: @escaping @Sendable (ChangeBatch) -> Void) -> ChangeListenerToken {
        ChangeListenerToken(id: notifier.addListener(listener))
    }

    /// Stops a listener added with ``addChangeListener(_:)``.
    ///
    /// - Parameter token: the listener's token.
    public func removeChangeListener(_ token: ChangeListenerToken) {
        notifier.removeListener(token.id)
    }

    /// An asynchronous sequence of every later commit's ``ChangeBatch``, in commit order; it ends when the
    /// database closes or the consumer stops iterating. Batches are buffered, so a slow consumer misses none.
    /// "Later" as for ``addChangeListener(_:)``: every commit completing after this call returns.
    ///
    /// ```swift
    /// for await batch in db.changeBatches() {
    ///     for change in try batch.changes() { print(change) }
    /// }
    /// ```
    public func changeBatches() -> AsyncStream<ChangeBatch> {
        notifier.makeStream()
    }
}
