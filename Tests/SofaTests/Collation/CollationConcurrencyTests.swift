import Dispatch
import Foundation
import SofaStorage
import Synchronization
import Testing

@testable import Sofa

/// Encoding and comparing from many threads at once gives the same bytes and answers as one thread: each
/// thread gets its own ICU collator clone, and nothing in the Swift layer is shared and mutable.
@Suite struct CollationConcurrencyTests {
    /// Values, their keys and their pairwise order, all computed on one thread first.
    struct Expected: Sendable {
        let values: [JSON]
        let keys: [[UInt8]]
        let orders: [Int]  // collate(values[i], values[i + 1])

        init(stream: UInt64, count: Int) throws {
            var random = CollationRandom(stream: stream)
            var values: [JSON] = []
            while values.count < count {
                let value = random.json(depth: 3)
                values.append(value)
                values.append(random.variant(of: value))
            }
            self.values = values
            keys = try values.map { try seeded(CollationKey($0).bytes) }
            orders = zip(values, values.dropFirst()).map { JSON.collate($0, $1) }
        }

        /// How many results differ from the single-threaded ones when recomputed here, `round` giving each
        /// worker its own order of work (and a reused scratch buffer, as the view indexer will use one).
        func mismatches(round: Int) -> Int {
            var wrong = 0
            var scratch: [UInt8] = []
            for step in values.indices {
                let index = (step * 7 + round * 13) % values.count
                scratch.removeAll(keepingCapacity: true)
                do {
                    try CollationKey.encode(values[index], into: &scratch)
                    if scratch != keys[index] { wrong += 1 }
                } catch {
                    wrong += 1
                }
                if index + 1 < values.count, JSON.collate(values[index], values[index + 1]) != orders[index] {
                    wrong += 1
                }
            }
            return wrong
        }
    }

    @Test func dispatchWorkersAgreeWithOneThread() throws {
        let expected = try Expected(stream: 50, count: 400)
        let wrong = Lock(0)  // Sofa's lock: a pthread mutex under `make tsan`, which TSan can see
        DispatchQueue.concurrentPerform(iterations: 16) { round in
            let count = expected.mismatches(round: round)
            wrong.withLock { $0 += count }
        }
        #expect(wrong.withLock { $0 } == 0, "\(seedNote)")
    }

    @Test func tasksAgreeWithOneThread() async throws {
        let expected = try Expected(stream: 51, count: 400)
        let wrong = await withTaskGroup(of: Int.self) { group in
            for round in 0..<32 {
                group.addTask { expected.mismatches(round: round) }
            }
            return await group.reduce(0, +)
        }
        #expect(wrong == 0, "\(seedNote)")
    }

    /// Fresh threads that each clone the collator on first use and close the clone when they exit.
    @Test func shortLivedThreadsAgreeWithOneThread() throws {
        let expected = try Expected(stream: 52, count: 100)
        let wrong = Lock(0)  // Sofa's lock: a pthread mutex under `make tsan`, which TSan can see
        let finished = DispatchSemaphore(value: 0)
        let threadCount = 24
        for round in 0..<threadCount {
            let thread = Thread {
                let count = expected.mismatches(round: round)
                wrong.withLock { $0 += count }
                finished.signal()
            }
            thread.start()
        }
        for _ in 0..<threadCount { finished.wait() }
        #expect(wrong.withLock { $0 } == 0, "\(seedNote)")
    }
}
