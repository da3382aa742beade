import CSofaSys
import Dispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The flush thread of one pipelined batch: runs the chunks the writer hands off (``WriteBatch/FlushJob``), one
/// at a time, in order, and between two of them waits for the next by spinning rather than sleeping.
///
/// A sleeping thread costs the writer a wake-up at every hand-off (a futex wake, which on this machine's VM is an
/// inter-processor interrupt: ~8 µs of the writer's time, and the flush thread starts later still), and the
/// writer waits for a chunk it joins the same way. So the thread that ran a chunk stays (it *lingers*) for up to
/// `lingerLimit` (2 ms), watching `state` for the next; the writer hands a chunk to a lingering thread with one
/// atomic exchange, and only starts a thread (on ``queue``) when none lingers. The commit closes the
/// worker (``close()``), and the lingering thread leaves at once. A batch of 1,000 documents (three hand-offs) took
/// 3.5–7 % less time so (BENCHMARKS.md §3, "D1, fourteenth round").
///
/// Spinning is a loop of `sched_yield` (``relax()``), not of the CPU's `pause`: a thread that holds its CPU
/// while the writer, the node-cache fill or the kernel's I/O threads wait for it made one batch in ten or so
/// take 2–3 times as long (the mean per batch rose ~20 % while the median fell). It is only done with two or
/// more CPUs to run on (``spins``). The cost is CPU time: between chunks (a batch of new documents hands one off
/// every ~0.2 ms of puts) the flush thread keeps its core busy instead of idle, for at most `lingerLimit`
/// after each chunk, and only inside a batch that has handed one off.
final class FlushWorker: @unchecked Sendable {
    /// Whether threads spin while they wait: when the process may run on two or more CPUs (its affinity, which
    /// a container's or `taskset`'s limit sets, not the CPUs online).
    static let spins = sofa_cpus_allowed() >= 2
    /// How long, by default, a thread that ran a chunk waits for the next before it leaves: several hand-offs'
    /// worth of puts.
    static let defaultLingerLimit: UInt64 = 2_000_000  // nanoseconds
    /// How long the writer spins waiting for a chunk to finish before it sleeps: a chunk's flush takes ~0.1 ms.
    static let joinSpinLimit: UInt64 = 500_000  // nanoseconds
    /// Where the flush threads run: a queue of its own, so that a writer waiting for its chunk never waits for
    /// threads of the global pool its caller may be holding. Concurrent: each batch has at most one chunk in
    /// flight, but the batches of different databases run at once.
    private static let queue = DispatchQueue(label: "sofa.batch-flush", qos: .userInitiated, attributes: .concurrent)

    // The values of `state`.
    /// No thread is waiting for a chunk (none runs, or one is running a chunk).
    private static let idle = 0
    /// A thread is waiting for the next chunk, spinning.
    private static let lingering = 1
    /// The writer has put a chunk in ``posted`` for the lingering thread.
    private static let handedOver = 2
    /// The batch is over: a lingering thread leaves.
    private static let closed = 3

    private let state = Atomic<Int>(FlushWorker.idle)
    /// The chunk handed to the lingering thread: written by the writer before it sets ``state`` to `handedOver`
    /// (releasing), read and cleared by the thread after it sees that value (acquiring).
    private var posted: (any FlushWorkerJob)?
    /// Whether this batch's threads spin (``spins``, unless a test turns it off).
    let spinning: Bool
    /// How long a thread that ran a chunk waits for the next before it leaves (nanoseconds).
    let lingerLimit: UInt64

    /// Threads started for this worker's jobs (the writer's count, for tests): one per job when none lingers.
    private(set) var threadsStarted = 0

    /// A worker whose threads spin when `spinning`, lingering up to `lingerLimit` nanoseconds after each job.
    init(spinning: Bool = FlushWorker.spins, lingerLimit: UInt64 = FlushWorker.defaultLingerLimit) {
        self.spinning = spinning
        self.lingerLimit = lingerLimit
    }

    /// Whether a thread is waiting for the next job now (for tests: a thread that timed out or was closed is not).
    var isLingering: Bool { state.load(ordering: .acquiring) == FlushWorker.lingering }

    /// Runs `job` on the flush thread: the lingering one if there is one, else a new one. The writer only, after
    /// it joined the job before (a batch has at most one chunk in flight).
    func submit(_ job: any FlushWorkerJob) {
        job.completion.started()
        if spinning {
            posted = job
            if state.compareExchange(expected: FlushWorker.lingering, desired: FlushWorker.handedOver,
                                     ordering: .acquiringAndReleasing).exchanged {
                return
            }
            posted = nil  // none lingers (or it just left): a new thread takes the job
        }
        threadsStarted += 1
        FlushWorker.queue.async { self.work(job) }
    }

    /// Ends the batch's use of the worker: a thread lingering leaves now. The writer only, with no chunk in flight
    /// (a batch joins its chunk first). Called with one in flight by mistake, it leaves a chunk handed over in
    /// place, so that the thread still takes it and the writer's join returns (the thread then lingers until its
    /// limit).
    func close() {
        var current = state.load(ordering: .relaxed)
        while current != FlushWorker.handedOver && current != FlushWorker.closed {
            let (exchanged, original) = state.compareExchange(expected: current, desired: FlushWorker.closed,
                                                              ordering: .acquiringAndReleasing)
            if exchanged { return }
            current = original
        }
    }

    /// The flush thread: runs `first`, then each chunk handed over while it lingers.
    private func work(_ first: any FlushWorkerJob) {
        var job = first
        while true {
            job.run()
            // Lingering before the job is seen done: a writer that joins the job and hands off the next finds
            // this thread waiting, instead of starting a second one while this one is still on its way.
            let lingers = spinning && state.compareExchange(expected: FlushWorker.idle, desired: FlushWorker.lingering,
                                                            ordering: .releasing).exchanged
            job.completion.finished()
            guard lingers, let next = awaitHandOver() else { return }
            job = next
        }
    }

    /// Spins until the writer hands over a chunk (and returns it), closes the worker, or `lingerLimit` passes
    /// (nil: the thread leaves, and the next hand-off starts a new one).
    private func awaitHandOver() -> (any FlushWorkerJob)? {
        let deadline = FlushWorker.now() + lingerLimit
        var rounds = 0
        while true {
            switch state.load(ordering: .acquiring) {
            case FlushWorker.handedOver:
                let job = posted!
                posted = nil
                state.store(FlushWorker.idle, ordering: .relaxed)
                return job
            case FlushWorker.closed:
                return nil
            default:
                rounds &+= 1
                // The clock every 8 rounds: a `sched_yield` with nothing else to run costs about what a clock
                // read does.
                if rounds & 7 == 0, FlushWorker.now() >= deadline {
                    // Leaving, unless the writer handed over (or closed) in the meantime.
                    if state.compareExchange(expected: FlushWorker.lingering, desired: FlushWorker.idle,
                                             ordering: .acquiringAndReleasing).exchanged {
                        return nil
                    }
                } else {
                    FlushWorker.relax()
                }
            }
        }
    }

    /// One round of a spin: gives the CPU to any other thread waiting for it (`sched_yield` returns at once when
    /// none does).
    @inline(__always)
    static func relax() {
        sched_yield()
    }

    /// Nanoseconds of the monotonic clock.
    @inline(__always)
    static func now() -> UInt64 {
        DispatchTime.now().uptimeNanoseconds
    }
}

/// Work a ``FlushWorker`` runs on its thread: a pipelined batch's chunk (``WriteBatch/FlushJob``).
protocol FlushWorkerJob: AnyObject, Sendable {
    /// Does the work (on the flush thread). Errors are the job's to keep.
    func run()
    /// Tells the writer when the work is done.
    var completion: JobCompletion { get }
}

/// Whether a job handed to another thread is done, for a writer that waits by spinning a while, then sleeping.
final class JobCompletion: Sendable {
    /// Entered when the job is handed off, left when it is done: what a writer that stopped spinning sleeps on.
    private let done = DispatchGroup()
    /// Set when the job is done, just before ``done`` is left: what a writer spinning watches.
    private let isFinished = Atomic<Bool>(false)

    /// A job not handed off yet.
    init() {}

    /// Marks the job in flight (the writer, as it hands the job off).
    func started() {
        done.enter()
    }

    /// Marks the job done (its thread, after the work): everything the work wrote is the writer's to read.
    func finished() {
        isFinished.store(true, ordering: .releasing)
        done.leave()
    }

    /// Waits until the job is done: spinning first, for up to ``FlushWorker/joinSpinLimit`` when `spinning`
    /// (a chunk that is nearly done then costs no sleep and wake-up), then sleeping.
    func wait(spinning: Bool) {
        if isFinished.load(ordering: .acquiring) { return }
        if spinning {
            let deadline = FlushWorker.now() + FlushWorker.joinSpinLimit
            var rounds = 0
            while !isFinished.load(ordering: .acquiring) {
                rounds &+= 1
                if rounds & 7 == 0, FlushWorker.now() >= deadline { break }
                FlushWorker.relax()
            }
        }
        done.wait()  // returns at once once finished, and orders the job's writes before the writer's reads
    }
}
