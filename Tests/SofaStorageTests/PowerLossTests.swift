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
            var rng = SeededGenerator(seed: seed)
            var images: [(bytes: [UInt8], acked: Int)] = []
            var acked = 0
            simulator.onOperation = { sim in
                for _ in 0..<4 where images.count < 300 {
                    images.append((sim.crashImage(of: path, sector: sector, using: &rng), acked))
                }
            }
            let file = try StorageFile(path: path, options: StorageOptions(durability: .full), system: simulator)
            var tree = BTree(file: file, root: nil, configuration: CrashWorkload.configuration, limit: StorageFile.unlimited)
            for k in 1...25 {
                tree = try tree.modified(by: CrashWorkload.batch(seed: seed, commit: k))
                try file.commit(roots: [tree.root], metadata: CrashWorkload.metadata(commit: k))
                acked = k
            }
            simulator.onOperation = nil
            try file.close()
            #expect(images.count == 300)
            for (n, image) in images.enumerated() {
                let imagePath = dir.file("image-\(n)")
                writeFile(imagePath, image.bytes)
                let context = "seed \(seed) sector \(sector) image \(n) (acked \(image.acked))"
                guard image.acked > 0 || image.bytes.count > 0 else { continue }  // power cut before creation
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
        }
    }
}
