// Storage layer microbenchmarks: the chunk, the unit everything in a Sofa file is written as (FORMAT.md).
//
//   swift package benchmark --target StorageBenchmarks
//
// A chunk write is what every B+tree node costs when a tree is saved: CRC32C of the payload, LZ4 compression
// (kept when it saves space) and the append to the file's write buffer, which is written out with `pwrite` as it
// fills. A chunk read is what a node-cache miss costs: bounds and CRC check through the mapping, then LZ4
// decompression. The payloads are 4 KiB of leaf-like bytes (engine-level rows of the track data set, packed
// back to back), which compress as the B+tree's leaves do.
import Benchmark
import MicrobenchmarkSupport
import SofaStorage

/// 1,000 distinct 4 KiB payloads of packed rows, so LZ4 sees varied input.
let payloads: [[UInt8]] = {
    var all: [[UInt8]] = []
    var current: [UInt8] = []
    for track in Tracks.generate(count: 100_000) {
        let row = Tracks.rowKey(track) + Tracks.rowValue(track)
        if current.count + row.count > 4096 {
            current += [UInt8](repeating: 0, count: 4096 - current.count)
            all.append(current)
            current = []
            if all.count == 1_000 { break }
        }
        current += row
    }
    precondition(all.count == 1_000, "StorageBenchmarks: too few tracks for 1,000 payloads")
    return all
}()

/// The file the write benchmark appends to; every iteration's chunks are discarded afterwards (outside the
/// measurement), so the file does not grow.
nonisolated(unsafe) var writeFile: StorageFile?
/// The file the read benchmark reads: 1,000 committed chunks, one per payload, and their offsets.
nonisolated(unsafe) var readFile: (file: StorageFile, offsets: [UInt64])?
nonisolated(unsafe) var scratch: ScratchDirectory?

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = Microbenchmarks.configuration

    Benchmark("Storage.chunk.write.4KiB") { benchmark in
        guard let file = writeFile else { return }
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            blackHole(try payloads[i % payloads.count].withUnsafeBytes {
                try file.append(kind: .leaf, payload: $0, compress: true)
            })
        }
        benchmark.stopMeasurement()
        file.discardUncommitted()
    } setup: {
        let directory = ScratchDirectory("storage-write")
        scratch = directory
        writeFile = orFail("StorageBenchmarks: create") {
            try StorageFile(path: directory.path + "/write.sofa", options: StorageOptions(durability: .none))
        }
        // The payloads are built before the first iteration, not inside it.
        blackHole(payloads.count)
    } teardown: {
        try? writeFile?.close()
        scratch?.remove()
    }

    Benchmark("Storage.chunk.read.4KiB") { benchmark in
        guard let (file, offsets) = readFile else { return }
        let limit = file.latestCommit.endOffset
        for i in benchmark.scaledIterations {
            let chunk = try file.readChunk(at: offsets[i % offsets.count], kind: .leaf, limit: limit)
            blackHole(chunk.fileLength)
        }
    } setup: {
        let directory = ScratchDirectory("storage-read")
        scratch = directory
        readFile = orFail("StorageBenchmarks: write the chunks to read") {
            let file = try StorageFile(path: directory.path + "/read.sofa", options: StorageOptions(durability: .none))
            let offsets = try payloads.map { payload in
                try payload.withUnsafeBytes { try file.append(kind: .leaf, payload: $0, compress: true).offset }
            }
            try file.commit(roots: [], metadata: [])
            return (file, offsets)
        }
    } teardown: {
        try? readFile?.file.close()
        scratch?.remove()
    }
}
