import Dispatch
import Testing

@testable import Sofa
@testable import SofaStorage

/// `DispatchQueue.forEachChunk`, the view update's and group recompute's parallel loop: every chunk done exactly
/// once whatever the count against the cores (none, fewer, more), on at most one worker per core, each worker
/// keeping its readers from one chunk to the next.
@Suite struct WorkerReadersTests {
    @Test func everyChunkOnceForAnyCount() {
        let cores = DispatchQueue.onlineCoreCount
        #expect(cores >= 1)
        for count in Set([0, 1, max(1, cores - 1), cores, cores + 1, 3 * cores + 2, 200]) {
            let done = Lock([Int](repeating: 0, count: count))
            let workers = Lock([ObjectIdentifier: Set<Int>]())
            DispatchQueue.forEachChunk(count) { c, readers in
                done.withLock { $0[c] += 1 }
                _ = workers.withLock { $0[ObjectIdentifier(readers), default: []].insert(c) }
            }
            #expect(done.withLock { $0 } == [Int](repeating: 1, count: count), "\(count) chunks")
            let seen = workers.withLock { $0 }
            #expect(seen.count <= min(count, cores), "\(count) chunks: at most one worker per core")
            #expect(seen.values.reduce(0) { $0 + $1.count } == count)
        }
    }
}
