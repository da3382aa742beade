#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// A mutual-exclusion lock that protects a value: the one lock type of Sofa's engine and database.
///
/// Normally it is the standard library's `Synchronization.Mutex`. Built with `-DSOFA_TSAN` (what `make tsan`
/// does) it is a `pthread_mutex_t` instead, because ThreadSanitizer cannot see `Mutex` on Linux: `Mutex` is
/// built on raw priority-inheritance futex system calls, whose contended hand-off happens inside the kernel, so
/// TSan sees no happens-before edge between one thread's unlock and the next one's lock and reports every access
/// to the protected state as a race (987 such reports in `NodeCache` in one run of the concurrency tests, every
/// one between two accesses made under the lock). `pthread_mutex_lock`/`unlock` are intercepted by TSan, so
/// under TSan the real locking discipline is checked: which state is touched under which lock is the same in
/// both builds. Why not pthread always: a cached B+tree lookup (three cache lookups, each a lock round trip)
/// costs ≈ 2,087 instructions with `Mutex` and ≈ 2,199 with `pthread_mutex_t` (+5 %, callgrind); this wrapper
/// over `Mutex` costs nothing measurable (2,087).
package final class Lock<Value: Sendable>: @unchecked Sendable {
    #if SOFA_TSAN
    /// Invariant: lives at a stable heap address for the lock's whole life (a `pthread_mutex_t` must not move
    /// once initialized), and `value` is touched only between `lock` and `unlock`.
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
    #else
    private let mutex: Mutex<Value>

    /// A lock protecting `value`.
    package init(_ value: Value) {
        mutex = Mutex(value)
    }

    /// Runs `body` with exclusive access to the value and returns what it returns.
    @inline(__always)
    package func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        // The value never leaves the lock except through `body`'s result, as with `Mutex` itself.
        try mutex.withLock { (value: inout sending Value) throws(E) -> sending R in
            nonisolated(unsafe) let result = try body(&value)
            return result
        }
    }
    #endif
}

extension Lock where Value == StorageFile {
    /// The file held, read under the lock. Not generic, so it is compiled here, specialized: a caller in another
    /// module (the document file reads it on every document read) calls it directly instead of the unspecialized
    /// generic `withLock`, which instantiates `Mutex` metadata at run time on each call.
    package var file: StorageFile { withLock { $0 } }
}
