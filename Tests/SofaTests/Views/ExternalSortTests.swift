#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing

@testable import Sofa
@testable import SofaStorage

/// The external sort of index builds: forced to spill many runs, it gives the same index as an in-memory sort;
/// a failing run write is a typed error that loses nothing. Serialized: the tests lower the process-wide
/// ``ViewIndex/sortBudget``.
@Suite(.serialized) struct ExternalSortTests {
    @Test func spilledBuildEqualsInMemoryBuild() throws {
        let dir = TemporaryDatabaseDirectory("sofa-views")
        let db = try Database(path: dir.database(), options: testOptions())
        var rng = SeededRandom(seed: 42)
        try db.inBatch {
            for i in 0..<3000 {
                try db.put(["k": .string(String(UInt32.random(in: 0...9999, using: &rng))), "v": .number(Double(i))],
                           id: "doc\(i)")
            }
        }
        let map: MapFunction = { doc, emit in
            emit(doc["k"] ?? nil, doc["v"])
            emit([doc["k"] ?? nil, doc["v"] ?? nil], nil)
        }
        let memory = db.view(named: "memory")
        memory.setMapReduce(version: "1", map: map, reduce: .count)
        try memory.updateIndex()
        let spilled = db.view(named: "spilled")
        spilled.setMapReduce(version: "1", map: map, reduce: .count)
        let saved = ViewIndex.sortBudget.exchange(16 << 10, ordering: .relaxed)
        defer { ViewIndex.sortBudget.store(saved, ordering: .relaxed) }
        try spilled.updateIndex()
        let a = try run(memory) { $0.mapOnly = true }, b = try run(spilled) { $0.mapOnly = true }
        #expect(a.count == 6000 && a == b)
        #expect(try run(memory) { $0.groupLevel = 1 } == run(spilled) { $0.groupLevel = 1 })
        // No run file is left behind.
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: dir.database() + "/views")
        #expect(leftovers.sorted() == ["memory", "spilled"])
        expectSound(memory)
        expectSound(spilled)
    }

    /// The sorter alone, with enough pairs left in memory at the end that they are sorted in parts on several
    /// threads: with and without runs on disk, every pair comes out once, in byte order.
    @Test(arguments: [1 << 30, 3 << 19])  // all in memory; one run on disk and ~26k pairs left
    func finishMergesRunsAndPartsSortedInParallel(budget: Int) throws {
        let directory = FileManager.default.temporaryDirectory.path
        let sorter = ExternalSorter(directory: directory, budget: budget, system: PosixSystemCalls())
        var rng = SeededRandom(seed: 7)
        var expected: [[UInt8]: [UInt8]] = [:]
        for i in 0..<(4 * ExternalSorter.parallelSortMinimum) {
            let length = Int.random(in: 1...24, using: &rng)
            let key = (0..<length).map { _ in UInt8.random(in: 0...3, using: &rng) } + Array("\(i)".utf8)
            let value = Array("v\(i)".utf8)
            expected[key] = value
            try sorter.add(key: key, value: value)
        }
        var out: [([UInt8], [UInt8])] = []
        try sorter.finish { key, value in out.append((Array(key), Array(value))) }
        #expect(out.count == expected.count)
        #expect(zip(out, out.dropFirst()).allSatisfy { compareArrays($0.0, $1.0) < 0 }, "not in byte order")
        #expect(out.allSatisfy { expected[$0.0] == $0.1 })
    }

    /// Each kind of call on the runs failing — creating, unlinking, writing and reading one — is a typed error
    /// naming the sort run, and the sorter leaves no descriptor behind, nor a file but the one whose unlink
    /// failed (the error names it).
    @Test(arguments: [FaultInjectingSystemCalls.Call.open, .unlink, .pwrite, .pread])
    func failingRunCallIsTypedAndLeavesNothingOpen(call: FaultInjectingSystemCalls.Call) throws {
        let dir = TemporaryDatabaseDirectory("sofa-sort")
        let faults = FaultInjectingSystemCalls()
        faults.arm(.init(call: call, nth: 2))
        var failure: (any Error)?
        do {
            let sorter = ExternalSorter(directory: dir.path, budget: 4 << 10, system: faults)
            for i in 0..<2000 { try sorter.add(key: Array("key \(i)".utf8), value: Array("value \(i)".utf8)) }
            try sorter.finish { _, _ in }
        } catch {
            failure = error
        }
        let typed = failure as? SofaError
        let error = try #require(typed, "\(call): \(String(describing: failure))")
        #expect(error.code == .ioError && error.message.contains("sort run"), "\(call): \(error)")
        #expect(faults.failuresInjected == 1, "\(call)")
        #expect(ViewFaultTests.openDescriptors(under: dir.path) == 0, "\(call): descriptors leaked")
        let left = try FileManager.default.contentsOfDirectory(atPath: dir.path)
        #expect(left.count == (call == .unlink ? 1 : 0), "\(call): left \(left)")
    }

    /// A run file whose unlink never happened (the process died between creating and unlinking it, or the unlink
    /// failed) is removed by the next writable open, and only by a writable one; the views stay as they were.
    @Test func leftoverRunFileIsRemovedOnWritableOpen() throws {
        let dir = TemporaryDatabaseDirectory("sofa-sort")
        let path = dir.database()
        do {
            let db = try Database(path: path, options: testOptions())
            try db.defineView(named: "n", keyPaths: ["n"], reduce: .count)
            for i in 0..<10 { try db.put(["n": .number(Double(i))], id: "d\(i)") }
            try db.close()
        }
        let db = try openRemovingLeftover(path + "/views/" + ExternalSorter.runFilePrefix + "abc123", database: path)
        #expect(try db.viewNames == ["n"])
        let view = try #require(db.existingView(named: "n"))
        #expect(try view.createQuery().run().first?.value == .number(10))
        expectSound(db)
        try db.close()
    }

    /// R7/R8 for the sort runs: re-sorting an index under a new ICU collator version (a rebuild of both trees
    /// through the external sorter, forced to spill) with a failing sort-run write. The update throws a typed
    /// error; the previous index commit and every document stay intact and verify; no descriptor or run file
    /// is left; and once the fault is gone the same handle re-sorts the index.
    @Test(arguments: [EIO, ENOSPC])
    func failingRunWriteDuringAResortKeepsTheIndexAndRecovers(errno: Int32) throws {
        let dir = TemporaryDatabaseDirectory("sofa-views")
        let path = dir.database()
        var db = try Database(path: path, options: testOptions())
        try db.inBatch {
            for i in 0..<400 {
                try db.put(["k": .string("key \(i % 37)"), "n": .number(Double(i))], id: "doc\(i)")
            }
        }
        let map: MapFunction = { doc, emit in emit(doc["k"] ?? nil, doc["n"]) }
        var view = db.view(named: "byK")
        view.setMapReduce(version: "1", map: map, reduce: .sum)
        let expected = try run(view) { $0.mapOnly = true }
        #expect(expected.count == 400)
        // Mark the index as written under another collator version: the next open re-sorts it.
        let fakeVersion: [UInt8] = [0xFA, 0xCE, 0, 1]
        let index = try #require(try view.index())
        let built = try index.snapshot()
        var header = built.header
        header.collatorVersion = fakeVersion
        try index.commit(rows: built.rows, backIndex: built.backIndex, header: header)
        try db.close()

        let saved = ViewIndex.sortBudget.exchange(2 << 10, ordering: .relaxed)
        defer { ViewIndex.sortBudget.store(saved, ordering: .relaxed) }
        let faults = FaultInjectingSystemCalls()
        db = try Database(path: path, options: testOptions(), system: faults)
        view = db.view(named: "byK")
        view.setMapReduce(version: "1", map: map, reduce: .sum)
        // Until the sorters are drained into the new trees, every write is a sort-run write.
        faults.arm(.init(call: .pwrite, nth: 2, errno: errno))
        var failure: SofaError?
        do { try view.updateIndex() } catch let error as SofaError { failure = error }
        let error = try #require(failure, "the failed run write surfaced")
        #expect(error.code == (errno == ENOSPC ? .diskFull : .ioError), "\(error)")
        #expect(error.message.contains("sort"), "\(error)")
        #expect(error.path?.hasPrefix(path + "/views") == true, "\(error)")
        #expect(faults.failuresInjected == 1)
        faults.arm(nil)

        // The previous commit is what a reader sees: the rows under the old version tag.
        let reader = try Database(path: path, options: testOptions(readOnly: true))
        let stored = reader.view(named: "byK")
        #expect(try stored.index()?.header.collatorVersion == fakeVersion)
        #expect(try run(stored) { $0.mapOnly = true; $0.indexUpdateMode = .never } == expected)
        try reader.close()
        #expect(try db.createAllDocumentsQuery().run().count == 400)
        expectSound(db, "after the failed re-sort")

        // The same handle re-sorts once the fault is gone.
        try view.updateIndex()
        #expect(try view.index()?.header.collatorVersion == CollationKey.collatorVersion)
        #expect(try run(view) { $0.mapOnly = true } == expected)
        #expect(try run(view).first?.value?.doubleValue == Double((0..<400).reduce(0, +)))
        expectSound(view)
        expectSound(db)
        try db.close()
        #expect(ViewFaultTests.openDescriptors(under: path) == 0, "descriptors leaked")
        #expect(try FileManager.default.contentsOfDirectory(atPath: path + "/views") == ["byK"])
    }
}
