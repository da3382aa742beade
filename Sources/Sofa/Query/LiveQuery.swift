import SofaStorage
import Dispatch
import Synchronization

/// A registered live-query listener; pass it to ``LiveQuery/removeChangeListener(_:)`` to stop it.
public struct LiveQueryListenerToken: Sendable, Hashable {
    let id: UInt64
}

/// A query that keeps its result current: after ``start()`` it runs, then re-runs whenever the database
/// changes — coalescing changes that come close together (``updateInterval``) — and publishes the new rows
/// only when they differ from the last ones (Couchbase Lite's `CBLLiveQuery`).
///
/// ```swift
/// var query = db.view(named: "widgets").createQuery()
/// query.limit = 100
/// let live = query.asLiveQuery()
/// live.addChangeListener { rows in display(rows) }
/// live.start()
/// for await rows in live.changes() { display(rows) }   // or as an async sequence
/// ```
public final class LiveQuery: @unchecked Sendable {
    /// The query it runs.
    public let query: Query
    /// How long after a database change the query re-runs, so a burst of changes makes one run (seconds).
    public let updateInterval: Double

    private struct State {
        var rows: QueryEnumerator?
        var error: SofaError?
        var running = false
        var scheduled = false
        var databaseToken: ChangeListenerToken?
        var listeners: [UInt64: @Sendable (QueryEnumerator) -> Void] = [:]
        var streams: [UInt64: AsyncStream<QueryEnumerator>.Continuation] = [:]
        var nextID: UInt64 = 1
    }
    private let state = Lock(State())
    /// Runs the query and delivers results, one run at a time.
    private let queue = DispatchQueue(label: "sofa.livequery")

    init(query: Query, updateInterval: Double) {
        self.query = query
        self.updateInterval = updateInterval
    }

    deinit { stop() }

    /// The latest rows, nil before the first run completes.
    public var rows: QueryEnumerator? { state.withLock { $0.rows } }

    /// The error of the latest run, nil when it succeeded.
    public var lastError: SofaError? { state.withLock { $0.error } }

    /// Starts watching the database: runs the query now (in the background) and after every change.
    public func start() {
        let alreadyRunning = state.withLock { s -> Bool in
            defer { s.running = true }
            return s.running
        }
        guard !alreadyRunning else { return }
        let token = query.database.addChangeListener { [weak self] _ in self?.schedule() }
        state.withLock { $0.databaseToken = token }
        queue.async { [weak self] in self?.refresh() }
    }

    /// Stops watching; the last rows stay readable. Streams from ``changes()`` finish.
    public func stop() {
        let (token, streams) = state.withLock { s in
            defer {
                s.running = false
                s.databaseToken = nil
                s.streams = [:]
            }
            return (s.databaseToken, Array(s.streams.values))
        }
        if let token { query.database.removeChangeListener(token) }
        for stream in streams { stream.finish() }
    }

    /// Blocks until the first run is complete and returns its rows (running the query now when needed).
    /// Do not call it from a change listener: listeners run on the queue it waits for.
    ///
    /// - Throws: the run's ``SofaError``.
    public func waitForRows() throws -> QueryEnumerator {
        try queue.sync {
            if state.withLock({ $0.rows == nil && $0.error == nil }) { refresh() }
            return try state.withLock { s throws -> QueryEnumerator in
                if let rows = s.rows { return rows }
                throw s.error ?? SofaError(.invalidArgument, "the live query has no rows")
            }
        }
    }

    /// Calls `listener` (on a background queue) with every new result that differs from the previous one.
    ///
    /// - Parameter listener: receives the new rows.
    /// - Returns: a token for ``removeChangeListener(_:)``.
    @discardableResult
    public func addChangeListener(_ listener: @escaping @Sendable (QueryEnumerator) -> Void) -> LiveQueryListenerToken {
        state.withLock { s in
            defer { s.nextID += 1 }
            s.listeners[s.nextID] = listener
            return LiveQueryListenerToken(id: s.nextID)
        }
    }

    /// Stops a listener.
    ///
    /// - Parameter token: what ``addChangeListener(_:)`` returned.
    public func removeChangeListener(_ token: LiveQueryListenerToken) {
        _ = state.withLock { $0.listeners.removeValue(forKey: token.id) }
    }

    /// The results as an asynchronous sequence: the current rows first (when there are some), then every
    /// later result that differs. It ends when the live query stops.
    public func changes() -> AsyncStream<QueryEnumerator> {
        let (stream, continuation) = AsyncStream<QueryEnumerator>.makeStream(bufferingPolicy: .bufferingNewest(16))
        let id = state.withLock { s in
            defer { s.nextID += 1 }
            s.streams[s.nextID] = continuation
            if let rows = s.rows { continuation.yield(rows) }
            return s.nextID
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.streams.removeValue(forKey: id) }
        }
        return stream
    }

    /// Schedules one run after ``updateInterval`` unless one is already scheduled (coalescing).
    private func schedule() {
        let first = state.withLock { s -> Bool in
            guard s.running, !s.scheduled else { return false }
            s.scheduled = true
            return true
        }
        guard first else { return }
        queue.asyncAfter(deadline: .now() + updateInterval) { [weak self] in
            guard let self else { return }
            self.state.withLock { $0.scheduled = false }
            self.refresh()
        }
    }

    /// Runs the query and publishes the result if it changed. Runs on `queue`.
    private func refresh() {
        let result: QueryEnumerator
        do {
            result = try query.run()
        } catch {
            state.withLock { $0.error = error as? SofaError ?? SofaError(.invalidArgument, "\(error)") }
            return
        }
        typealias Delivery = ([@Sendable (QueryEnumerator) -> Void], [AsyncStream<QueryEnumerator>.Continuation])
        let deliver = state.withLock { s -> Delivery? in
            s.error = nil
            if let rows = s.rows, rows == result { return nil }
            s.rows = result
            return (s.listeners.sorted { $0.key < $1.key }.map(\.value), Array(s.streams.values))
        }
        guard let (listeners, streams) = deliver else { return }
        for stream in streams { stream.yield(result) }
        for listener in listeners { listener(result) }
    }
}

extension Query {
    /// A live query running this query; call ``LiveQuery/start()``.
    ///
    /// ```swift
    /// let live = query.asLiveQuery()
    /// live.addChangeListener { rows in print(rows.count) }
    /// live.start()
    /// ```
    ///
    /// - Parameter updateInterval: how long to wait after a change before re-running (default 0.2 s), so a
    ///   burst of changes makes one run.
    public func asLiveQuery(updateInterval: Double = 0.2) -> LiveQuery {
        LiveQuery(query: self, updateInterval: updateInterval)
    }
}
