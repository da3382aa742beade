import Foundation
import Testing

import SofaTestSupport

@testable import SofaStorage

/// Process crashes (RELIABILITY.md R1): the `crash-worker` child commits a seeded workload and is killed with
/// SIGKILL at random moments, again and again on the same file. After each kill the file must reopen at a
/// commit r with lastAck ≤ r ≤ lastBegin whose content equals the model after r commits, and verify clean.
///
/// `SOFA_CRASH_KILLS` sets the number of kills (default 60; `make crash-test` runs thousands).
@Suite struct CrashTests {
    @Test func killedWriterAlwaysRecoversToAnAcknowledgedCommit() throws {
        let worker = builtExecutable("crash-worker")
        try #require(FileManager.default.isExecutableFile(atPath: worker), "build the crash-worker first: \(worker)")
        let kills = Int(ProcessInfo.processInfo.environment["SOFA_CRASH_KILLS"] ?? "") ?? 60
        for seed in SeededGenerator.seeds(fixed: [31]) {
            try run(worker: worker, seed: seed, kills: kills)
        }
    }

    func run(worker: String, seed: UInt64, kills: Int) throws {
        let dir = TemporaryDirectory()
        let path = dir.file("tree")
        var rng = SeededGenerator(seed: seed)
        var killedMidCommit = 0
        // The expected rows, kept up to date commit by commit: recovered commits never go backwards (every
        // acknowledged commit survives), so each kill only applies the batches since the previous one.
        var model: [[UInt8]: [UInt8]] = [:]
        var modeled = 0
        for kill in 1...kills {
            let run = try runAndKill(executable: worker, arguments: ["tree", path, String(seed)],
                                     delay: UInt32.random(in: 2_000...40_000, using: &rng))
            let log = CrashWorkerLog(output: run.output)
            let (lastBegin, lastAck) = (log.lastBegin ?? 0, log.lastAck ?? 0)
            guard FileManager.default.fileExists(atPath: path) else { continue }  // killed before creating it
            let file = try StorageFile(path: path, options: StorageOptions(readOnly: true))
            let recovered = Int(file.latestCommit.commitNumber) - 1
            let context = "seed \(seed) kill \(kill): begin \(lastBegin) ack \(lastAck) recovered \(recovered)"
            if lastBegin > 0 {
                #expect(recovered >= lastAck && recovered <= lastBegin, "\(context)")
            }
            if lastBegin > lastAck { killedMidCommit += 1 }
            let tree = BTree(file: file, commit: file.latestCommit, index: 0,
                             configuration: CrashWorkload.configuration)
            let rows = try tree.rows()
            try #require(recovered >= modeled, "\(context): an earlier recovered commit \(modeled) was lost")
            while modeled < recovered {
                modeled += 1
                for a in CrashWorkload.batch(seed: seed, commit: modeled) { model[a.key] = a.value }
            }
            #expect(rows.count == model.count && rows.allSatisfy { model[$0.key] == $0.value }, "\(context)")
            expectSound(tree, context)
            try file.close()
        }
        #expect(killedMidCommit > 0, "no kill landed inside a commit; the test did not test much")
    }
}
