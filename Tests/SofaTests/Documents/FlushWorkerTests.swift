import Dispatch
import Glibc
import Synchronization
import Testing

@testable import Sofa

/// ``FlushWorker``: jobs run once each, in order, one at a time; a thread that lingers takes the next job without
/// a new thread being started; closing or waiting past the linger limit lets it go.
@Suite struct FlushWorkerTests {
    /// What the jobs of one run share: the order they ran in and on which thread, and how many run at once.
    final class Recorder: Sendable {
        let log = Mutex<[(number: Int, thread: pthread_t)]>([])
        let running = Atomic<Int>(0)
    }

    /// A job that records when it ran, and on which thread, after `work` nanoseconds of busy work.
    final class RecordingJob: FlushWorkerJob, Sendable {
        let number: Int
        let recorder: Recorder
        let work: UInt64
        let completion = JobCompletion()

        init(_ number: Int, recorder: Recorder, work: UInt64) {
            self.number = number
            self.recorder = recorder
            self.work = work
        }

        func run() {
            let overlapping = recorder.running.add(1, ordering: .acquiringAndReleasing).newValue
            precondition(overlapping == 1, "two jobs of one worker ran at once")
            let start = FlushWorker.now()
            while FlushWorker.now() - start < work {}
            recorder.log.withLock { $0.append((number, pthread_self())) }
            recorder.running.subtract(1, ordering: .releasing)
        }
    }

    /// Submits `count` jobs to `worker` the way a batch does (each joined before the next is handed off), with
    /// `gap` nanoseconds of the writer's own work between them; returns the log.
    func runJobs(_ worker: FlushWorker, count: Int, gap: UInt64 = 0, work: UInt64 = 0)
        -> [(number: Int, thread: pthread_t)] {
        let recorder = Recorder()
        var previous: RecordingJob?
        for n in 0..<count {
            previous?.completion.wait(spinning: worker.spinning)
            let start = FlushWorker.now()
            while FlushWorker.now() - start < gap {}
            let job = RecordingJob(n, recorder: recorder, work: work)
            worker.submit(job)
            previous = job
        }
        previous?.completion.wait(spinning: worker.spinning)
        return recorder.log.withLock { $0 }
    }

    @Test(arguments: [false, true]) func jobsRunOnceEachInOrder(spinning: Bool) {
        let worker = FlushWorker(spinning: spinning)
        let log = runJobs(worker, count: 200, work: 20_000)
        #expect(log.map(\.number) == Array(0..<200))
        if !spinning { #expect(worker.threadsStarted == 200, "a thread per job when none lingers") }
        worker.close()
    }

    /// With spinning on and jobs coming well inside the linger limit, one thread takes them all (the first is
    /// started; the rest are handed over). Shared machines can stall a thread past the limit now and then, so a
    /// few restarts are allowed, not one per job.
    @Test func aLingeringThreadTakesTheNextJobs() throws {
        try #require(FlushWorker.spins, "spinning needs two CPUs")
        let worker = FlushWorker(spinning: true)
        let log = runJobs(worker, count: 100, gap: 50_000, work: 20_000)
        #expect(log.map(\.number) == Array(0..<100))
        #expect(worker.threadsStarted < 10, "\(worker.threadsStarted) threads for 100 jobs")
        worker.close()
    }

    /// After `close()`, or a wait past the linger limit, the next job starts a new thread: none lingers.
    @Test func closingOrWaitingLetsTheThreadGo() throws {
        try #require(FlushWorker.spins, "spinning needs two CPUs")
        let worker = FlushWorker(spinning: true)
        _ = runJobs(worker, count: 1)
        #expect(worker.threadsStarted == 1)
        usleep(UInt32(3 * FlushWorker.lingerLimit / 1_000))  // past the limit: the thread has left
        _ = runJobs(worker, count: 1)
        #expect(worker.threadsStarted == 2)
        worker.close()
        _ = runJobs(worker, count: 1)
        #expect(worker.threadsStarted == 3, "a closed worker hands nothing over")
    }
}
