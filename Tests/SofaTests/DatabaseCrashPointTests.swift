#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing

@testable import Sofa
@testable import SofaStorage

/// Every crash point of the whole database (RELIABILITY.md R2): the crash tests' workload
/// (``DatabaseCrashWorkload``: puts, batches, deletes, conflicts, view index updates, compaction) runs in
/// process on a fault-injecting file layer that stops after the N-th write or sync — every later `pwrite`,
/// `fsync`, `fdatasync`, `rename`, `unlink`, `mkdir` and `ftruncate` fails, as if the process had died there —
/// for N = 0, 1, 2, … until the workload runs through. After each, the database is reopened and must pass the
/// crash tests' oracle: the recovered step r with lastAck ≤ r ≤ lastBegin, documents equal to the model after r
/// steps, views equal to a fresh map, verify clean, no temporary file left.
///
/// The databases live in /dev/shm when it exists (a tmpfs: syncs cost nothing there, and every sync is still
/// a crash point). `SOFA_CRASH_POINT_STEPS` sets the workload's length (default 30).
@Suite struct DatabaseCrashPointTests {
    @Test func everyCrashPointOfTheDatabaseWorkloadRecovers() throws {
        let steps = Int(ProcessInfo.processInfo.environment["SOFA_CRASH_POINT_STEPS"] ?? "") ?? 30
        let seed = SeededRandom.testSeeds[0]
        let base = access("/dev/shm", W_OK) == 0 ? "/dev/shm/" : NSTemporaryDirectory()
        let dir = base + "sofa-crashpoints-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        var failed = false
        defer { if !failed { try? FileManager.default.removeItem(atPath: dir) } }

        var kinds = Set<DatabaseCrashWorkload.Kind>()
        var n = 0
        while true {
            let path = dir + "/p\(n).sofa"
            try Database(path: path, options: testOptions()).close()
            let faults = FaultInjectingSystemCalls()
            let db = try Database(path: path, options: DatabaseOptions(durability: .full), system: faults)
            faults.crashAfter(writesAndSyncs: n)
            var model = DatabaseCrashWorkload.Model(seed: seed)
            var lastBegin = 0, lastAck = 0
            let context = "seed \(seed) crash point \(n)"
            do {
                let views = try DatabaseCrashWorkload.views(of: db)
                while model.steps < steps {
                    let step = model.nextStep()
                    lastBegin = step.number
                    try DatabaseCrashWorkload.perform(step, on: db, views: views)
                    model.apply(step)
                    kinds.insert(step.kind)
                    lastAck = step.number
                }
            } catch let error as SofaError {
                #expect([.ioError, .writesRefused].contains(error.code), "\(context): \(error)")
            }
            let ranThrough = faults.failuresInjected == 0
            faults.arm(nil)
            try? db.close()

            let reopened = try Database(path: path, options: testOptions())
            var recovered = DatabaseCrashWorkload.Model(seed: seed)
            var problems: [String] = []
            if !recovered.advance(toSequence: reopened.lastSequence) {
                problems.append("lastSequence \(reopened.lastSequence) ends no step")
            } else if recovered.steps < lastAck || recovered.steps > lastBegin {
                problems.append("recovered step \(recovered.steps) outside [\(lastAck), \(lastBegin)]")
            } else {
                problems += try DatabaseCrashTests.problems(reopened, model: recovered)
            }
            try reopened.close()
            if !problems.isEmpty {
                failed = true
                for problem in problems.prefix(10) {
                    let where_ = "database kept at \(path); replay with SOFA_SEED=\(seed)"
                    Issue.record("\(context) (begin \(lastBegin), ack \(lastAck)): \(problem); \(where_)")
                }
                return
            }
            try FileManager.default.removeItem(atPath: path)
            if ranThrough { break }
            n += 1
        }
        print("DatabaseCrashPointTests seed \(seed): \(n + 1) crash points over \(steps) steps " +
              "(\(kinds.map(\.rawValue).sorted().joined(separator: ", "))), all recovered")
        #expect(n > steps * 2, "the workload made fewer writes and syncs than expected")
    }
}
