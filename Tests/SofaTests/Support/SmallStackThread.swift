#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs `body` to completion on a new thread whose stack is `stackSize` bytes, to show that recursive code
/// stays within a budget; a stack overflow there crashes the test run instead of passing by luck on a
/// thread with a large stack.
func runOnThread(stackSize: Int, _ body: @escaping @Sendable () -> Void) {
    final class Context {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    // AddressSanitizer pads every frame with red zones, so the budget does not apply under it; TOOLCHAIN.md
    // has ASan runs set ASAN_OPTIONS, which is how they are recognized here.
    let sanitizerFactor = getenv("ASAN_OPTIONS") == nil ? 1 : 16
    pthread_attr_setstacksize(&attributes, stackSize * sanitizerFactor)
    let context = Unmanaged.passRetained(Context(body)).toOpaque()
    #if canImport(Glibc)
    var thread = pthread_t()
    #else
    var thread: pthread_t?
    #endif
    let created = pthread_create(&thread, &attributes, { raw in
        let context = Unmanaged<AnyObject>.fromOpaque(raw!).takeRetainedValue() as! Context
        context.body()
        return nil
    }, context)
    precondition(created == 0, "pthread_create failed: \(created)")
    #if canImport(Glibc)
    pthread_join(thread, nil)
    #else
    pthread_join(thread!, nil)
    #endif
}
