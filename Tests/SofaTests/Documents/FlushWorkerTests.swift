import Dispatch
import Glibc
import Synchronization
import Testing

@testable import Sofa

/// ``FlushWorker``: jobs run once each, in order, one at a time; a thread that lingers takes the next job without
/// a new thread being started; closing or waiting past the linger limit lets it go.
@Suite struct FlushWorkerTests {
    /// What the jobs of one run share: the order they ran in and on which thread, how many run at once, and
    /// whether two ever did.
    final class Recorder: Sendable {
        let log = Mutex<[(number: Int, thread: pthread_t)]>([])
        let running = Atomic<Int>(0)
        let overlapped = Atomic<Bool>(false)
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
            if recorder.running.add(1, ordering: .acquiringAndReleasing).newValue != 1 {
                recorder.overlapped.store(true, ordering: .relaxed)
            }
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
        let overlapped = recorder.overlapped.load(ordering: .relaxed)
        #expect(!overlapped, "two jobs of one worker ran at once")
        return recorder.log.withLock { $0 }
    }

    /// Waits (up to 10 s) until no thread of `worker` lingers: one that timed out, or was closed, and left.
    func waitUntilNoneLingers(_ worker: FlushWorker) {
        let deadline = FlushWorker.now() + 10_000_000_000
        while worker.isLingering && FlushWorker.now() < deadline { usleep(1_000) }
        #expect(!worker.isLingering, "a thread still lingers after 10 s")
    }

    @Test(arguments: [false, true]) func jobsRunOnceEachInOrder(spinning: Bool) {
        let worker = FlushWorker(spinning: spinning)
        let log = runJobs(worker, count: 200, work: 20_000)
        #expect(log.map(\.number) == Array(0..<200))
        if !spinning { #expect(worker.threadsStarted == 200, "a thread per job when none lingers") }
        worker.close()
    }

    /// With spinning on and jobs coming well inside the linger limit (a generous one here: a loaded machine may
    /// keep a thread off its CPU for milliseconds), one thread takes them all: the first is started, the rest
    /// are handed over.
    @Test(.enabled(if: FlushWorker.spins, "spinning needs two CPUs"))
    func aLingeringThreadTakesTheNextJobs() {
        let worker = FlushWorker(spinning: true, lingerLimit: 5_000_000_000)
        let log = runJobs(worker, count: 100, gap: 50_000, work: 20_000)
        #expect(log.map(\.number) == Array(0..<100))
        #expect(worker.threadsStarted == 1, "\(worker.threadsStarted) threads for 100 jobs")
        #expect(Set(log.map(\.thread)).count == 1, "every job on the one lingering thread")
        worker.close()
        waitUntilNoneLingers(worker)
    }

    /// Past the linger limit, or after `close()`, the thread has left: the next job starts a new one.
    @Test(.enabled(if: FlushWorker.spins, "spinning needs two CPUs"))
    func closingOrWaitingLetsTheThreadGo() {
        let worker = FlushWorker(spinning: true, lingerLimit: 1_000_000)  // 1 ms
        _ = runJobs(worker, count: 1)
        #expect(worker.threadsStarted == 1)
        waitUntilNoneLingers(worker)  // the limit passed: the thread left by itself
        _ = runJobs(worker, count: 1)
        #expect(worker.threadsStarted == 2, "a new thread once the last one left")
        worker.close()
        waitUntilNoneLingers(worker)
        _ = runJobs(worker, count: 1)
        #expect(worker.threadsStarted == 3, "a closed worker hands nothing over")
    }
}
