#if canImport(Glibc)
import Glibc
#endif

/// A mutual-exclusion lock over `pthread_mutex_t` that protects a value, used instead of the standard
/// library's `Synchronization.Mutex` throughout Sofa.
///
/// Why not `Mutex`: on Linux it is built on raw futex system calls (priority-inheritance futexes, whose
/// contended hand-off happens inside the kernel), which ThreadSanitizer does not intercept. Under contention
/// TSan then sees no happens-before edge between one thread's unlock and the next thread's lock and reports
/// every access to the protected state as a data race (the `NodeCache` reports). `pthread_mutex_lock` and
/// `unlock` are intercepted, so TSan checks the real thing, and the cost on the read path is the same
/// (glibc's uncontended fast path is one atomic compare-and-swap, like `Mutex`'s).
///
/// Invariant: the mutex lives at a stable heap address for the lock's whole life (a `pthread_mutex_t` must not
/// move once initialized), and `value` is touched only between `lock` and `unlock`.
package final class Lock<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    /// A lock protecting `value`.
    package init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let result = pthread_mutex_init(mutex, nil)
        precondition(result == 0, "pthread_mutex_init failed: \(result)")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the value and returns what it returns.
    @inline(__always)
    package func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }

    /// Tries to take the lock without waiting; nil when another thread holds it.
    package func withLockIfAvailable<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R? {
        guard pthread_mutex_trylock(mutex) == 0 else { return nil }
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
