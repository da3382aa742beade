import Foundation
import Testing

@testable import SofaStorage

/// Simulated power loss (RELIABILITY.md R3): at random moments of a durable workload, build possible file
/// contents after a power cut (unsynced writes dropped, reordered, torn at 512 B and 4 KiB) and reopen each.
/// Oracle: no acknowledged commit lost (recovered ≥ lastAck), nothing beyond the commit in flight, content
/// equal to the model, verify clean — 0 undetected corruption.
@Suite struct PowerLossTests {
    @Test(arguments: [512, 4096])
    func powerCutsNeverLoseAcknowledgedCommits(sector: Int) throws {
        var checked = 0
        defer { print("PowerLossTests: \(checked) power-loss states checked at \(sector) B sectors") }
        for seed in SeededGenerator.seeds(fixed: [41]) {
            let dir = TemporaryDirectory()
            let path = dir.file("tree")
            let simulator = PowerLossSimulator()
            let cuts = PowerCuts(of: path, on: simulator, sector: sector, seed: seed, perOperation: 4, limit: 300)
            var (file, tree) = try Self.durableTree(at: path, system: simulator)
            // 36 commits: a one-sync commit is two operations (its data and header in one write, a sync), plus a
            // write when it adds a zero tail, so 300 images need about 75 operations.
            for k in 1...36 {
                tree = try tree.modified(by: CrashWorkload.batch(seed: seed, commit: k))
                try file.commit(roots: [tree.root], metadata: CrashWorkload.metadata(commit: k))
                cuts.acked = k
            }
            simulator.onOperation = nil
            try file.close()
            #expect(cuts.images.count == 300)
            checked += try Self.expectRecovered(cuts.images, in: dir, seed: seed, "seed \(seed) sector \(sector)")
        }
    }

    /// Power-cut images of a file, taken at its simulator's operations (a few per operation, up to a limit),
    /// each with the number of commits acknowledged when it was taken.
    final class PowerCuts {
        private(set) var images: [(bytes: [UInt8], acked: Int)] = []
        /// Commits acknowledged so far; the test sets it after each commit returns.
        var acked = 0

        /// Starts taking images of `path` at every operation of `simulator`, `perOperation` at a time, until
        /// there are `limit` (called on the test's thread, or on an early sync's while the test waits for it).
        init(of path: String, on simulator: PowerLossSimulator, sector: Int, seed: UInt64, perOperation: Int,
             limit: Int) {
            var rng = SeededGenerator(seed: seed)
            simulator.onOperation = { [unowned self] sim in
                for _ in 0..<perOperation where images.count < limit {
                    images.append((sim.crashImage(of: path, sector: sector, using: &rng), acked))
                }
            }
        }
    }

    /// A new durable storage file at `path` over `system`, and an empty tree of ``CrashWorkload``'s in it.
    static func durableTree(at path: String, system: any SystemCalls) throws -> (StorageFile, BTree) {
        let file = try StorageFile(path: path, options: StorageOptions(durability: .full), system: system)
        return (file, BTree(file: file, root: nil, configuration: CrashWorkload.configuration,
                            limit: StorageFile.unlimited))
    }

    /// Writes each power-cut image into `dir` and opens it: no acknowledged commit lost, nothing beyond the
    /// commit in flight, the tree equal to ``CrashWorkload``'s model for `seed`, verify clean. Returns how many
    /// images were checked (a cut before the file's creation leaves nothing to check).
    static func expectRecovered(_ images: [(bytes: [UInt8], acked: Int)], in dir: TemporaryDirectory,
                                seed: UInt64, _ what: String) throws -> Int {
        var checked = 0
        for (n, image) in images.enumerated() {
            let context = "\(what) image \(n) (acked \(image.acked))"
            guard image.acked > 0 || image.bytes.count > 0 else { continue }  // power cut before creation
            let imagePath = dir.file("image-\(n)")
            writeFile(imagePath, image.bytes)
            let f: StorageFile
            do {
                f = try StorageFile(path: imagePath, options: StorageOptions(readOnly: true))
            } catch {
                // Only a file whose creation never became durable may fail to open.
                #expect(image.acked == 0, "\(context): \(error)")
                continue
            }
            let recovered = Int(f.latestCommit.commitNumber) - 1
            #expect(recovered >= image.acked && recovered <= image.acked + 1, "\(context): recovered \(recovered)")
            let t = BTree(file: f, commit: f.latestCommit, index: 0, configuration: CrashWorkload.configuration)
            let model = CrashWorkload.model(seed: seed, commits: recovered)
            let rows = try t.rows()
            #expect(rows.map(\.key) == model.map(\.key) && rows.map(\.value) == model.map(\.value), "\(context)")
            expectSound(t, context)
            checked += 1
        }
        return checked
    }

    /// The same oracle around early syncs (FORMAT.md §11): each commit's data goes out in steps, as a pipelined
    /// batch's chunks do — a value chunk written (and synced early when the rule says so, the zero tail extended
    /// when it runs short), a second one, then the tree's changes with the commit; every ninth commit also
    /// carries more than a one-sync commit's 1 MiB, so that two-sync commits are cut as well. With `minimum` at
    /// ``StorageFile/earlyWritebackMinimum`` every step syncs; at the default
    /// ``StorageFile/earlySyncMinimum`` most steps are written into the zero tail unsynced and only the larger
    /// commits (every third carries ~280 KiB) sync early. Power cuts during the writes, the early syncs, the
    /// zero tail's writes and both kinds of commit never lose an acknowledged commit.
    @Test(arguments: [512, 4096], [StorageFile.earlyWritebackMinimum, StorageFile.earlySyncMinimum])
    func powerCutsAroundEarlySyncsNeverLoseAcknowledgedCommits(sector: Int, minimum: Int) throws {
        let seed: UInt64 = 47
        let dir = TemporaryDirectory()
        let path = dir.file("tree")
        let simulator = PowerLossSimulator()
        var bodies = SeededGenerator(seed: seed + 1)
        let cuts = PowerCuts(of: path, on: simulator, sector: sector, seed: seed, perOperation: 3, limit: 240)
        var (file, tree) = try Self.durableTree(at: path, system: simulator)
        var oneSync = 0, twoSync = 0, earlySyncs = 0
        for k in 1...27 {
            let first = k % 9 == 0 ? StorageFile.oneSyncLimit + (64 << 10) : k % 3 == 0 ? 240 << 10 : 40 << 10
            for size in [first, 40 << 10] {
                let body = (0..<size).map { _ in UInt8.random(in: 1...255, using: &bodies) }
                _ = try body.withUnsafeBytes { try file.append(kind: .value, payload: $0, compress: false) }
                let before = simulator.syncCount
                try file.flushAppendedStartingSync(minimum: minimum)
                file.waitForWriteback()
                earlySyncs += simulator.syncCount - before
            }
            tree = try tree.modified(by: CrashWorkload.batch(seed: seed, commit: k))
            let header = try file.commit(roots: [tree.root], metadata: CrashWorkload.metadata(commit: k))
            if header.dataCheck == nil { twoSync += 1 } else { oneSync += 1 }
            cuts.acked = k
        }
        simulator.onOperation = nil
        try file.close()
        #expect(oneSync == 24 && twoSync == 3, "both kinds of commit (\(oneSync) one-sync, \(twoSync) two-sync)")
        if minimum == StorageFile.earlySyncMinimum {
            // Early syncs only for the larger commits and the zero tail's extensions (this file is small, so its
            // tail steps are too, and run short often): at least ten of the 54 steps written and left unsynced
            // (37 syncs when written).
            #expect(earlySyncs > 0 && earlySyncs <= 44, "\(earlySyncs) early syncs at the default minimum")
        } else {
            #expect(earlySyncs == 54, "\(earlySyncs) early syncs: every step syncs")
        }
        #expect(cuts.images.count == 240)
        _ = try Self.expectRecovered(cuts.images, in: dir, seed: seed, "sector \(sector), minimum \(minimum)")
    }

    /// A one-sync commit (FORMAT.md §11) cut by a power failure during its only `fdatasync`: its header and
    /// trailer reached the disk but its data did not, or only in part. Opening must fall back to the previous,
    /// acknowledged commit exactly as it was (0 acknowledged commits lost); a writable open cuts the torn
    /// commit off and commits go on.
    @Test(arguments: [512, 4096])
    func oneSyncCommitWithLostOrTornDataFallsBack(sector: Int) throws {
        let seed: UInt64 = 43
        let dir = TemporaryDirectory()
        let path = dir.file("tree")
        let simulator = PowerLossSimulator()
        var (file, tree) = try Self.durableTree(at: path, system: simulator)
        for k in 1...5 {
            tree = try tree.modified(by: CrashWorkload.batch(seed: seed, commit: k))
            try file.commit(roots: [tree.root], metadata: CrashWorkload.metadata(commit: k))
        }
        simulator.syncsReachDisk = false  // the power fails during commit 6's fdatasync
        // A 16 KiB value (a document body) with the tree's changes, so that the data spans several sectors.
        var rng = SeededGenerator(seed: seed)
        let body = (0..<(16 << 10)).map { _ in UInt8.random(in: 1...255, using: &rng) }
        _ = try body.withUnsafeBytes { try file.append(kind: .value, payload: $0, compress: false) }
        tree = try tree.modified(by: CrashWorkload.batch(seed: seed, commit: 6))
        let inFlight = try file.commit(roots: [tree.root], metadata: CrashWorkload.metadata(commit: 6))
        try file.close()
        let check = try #require(inFlight.dataCheck, "a small commit is a one-sync commit")
        let dataStart = Int(check.start)
        let headerOffset = Int(inFlight.offset)
        let end = Int(inFlight.endOffset)
        #expect(headerOffset - dataStart > 2 * sector, "the commit's data spans several sectors")
        let complete = simulator.crashImage(of: path, sector: sector) { _ in true }
        // Every data sector lost but the one the header starts in; then each sector of the commit lost alone.
        var images = [("data lost, header kept",
                       simulator.crashImage(of: path, sector: sector) { $0 + sector > headerOffset })]
        #expect(Array(images[0].1[headerOffset..<end]) == Array(complete[headerOffset..<end]),
                "header and trailer kept")
        for lost in stride(from: dataStart / sector * sector, to: end, by: sector) {
            images.append(("sector \(lost) lost", simulator.crashImage(of: path, sector: sector) { $0 != lost }))
        }
        for (n, (what, image)) in images.enumerated() {
            let context = "sector size \(sector), \(what)"
            let intact = image.count >= end && image[dataStart..<end] == complete[dataStart..<end]
            let imagePath = dir.file("image-\(n)")
            writeFile(imagePath, image)
            try RecoveryTests.expectCommit(imagePath, seed: seed, expected: intact ? 6 : 5, context)
            let reopened = try StorageFile(path: imagePath)
            if !intact {
                #expect(reopened.latestCommit.endOffset == check.start, "\(context): not the acknowledged commit")
                let t = try BTree(file: reopened, commit: reopened.latestCommit, index: 0,
                                  configuration: CrashWorkload.configuration)
                    .modified(by: CrashWorkload.batch(seed: seed, commit: 6))
                try reopened.commit(roots: [t.root], metadata: CrashWorkload.metadata(commit: 6))
            }
            try reopened.close()
            try RecoveryTests.expectCommit(imagePath, seed: seed, expected: 6, "\(context), committed again")
        }
    }
}
