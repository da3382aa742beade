#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing

@testable import Sofa
@testable import SofaStorage

/// Failures while a view index is updated and while the database is compacted (RELIABILITY.md R7, R8): the
/// N-th `pread`/`pwrite`/`fsync`/`fdatasync`/`rename`/… of an index update fails, once and from then on, for
/// every N the update makes; `ENOSPC` at every write of an update and of a compaction. Each time: a typed
/// error, no trap, no descriptor leaked, no temporary file left, the previous index or file intact, and — after
/// space is back, or after reopening for a failure that leaves the outcome on disk unknown — the index equals a
/// fresh map of the documents and everything verifies.
@Suite struct ViewFaultTests {
    /// The codes a failed update or compaction may throw.
    static let storageErrors: [SofaError.Code] = [.ioError, .diskFull, .writesRefused]

    /// A map/reduce view (items: group → n, sum) and a declarative one (items: [tag, n], count).
    static func views(_ db: Database) throws -> [View] {
        let byGroup = db.view(named: "byGroup")
        byGroup.setMapReduce(version: "1", map: { doc, emit in
            if doc["type"] == "item", let group = doc["group"] { emit(group, doc["n"]) }
        }, reduce: .sum)
        let byTag = try db.defineView(named: "byTag", keyPaths: ["tag", "n"], reduce: .count, documentType: "item")
        return [byGroup, byTag]
    }

    /// Documents `first..<first+count` (every fifth a note, not indexed), with a few large bodies.
    static func write(_ db: Database, _ range: Range<Int>, generation: Int = 0) throws {
        try db.inBatch {
            for i in range {
                let id = "doc\(1000 + i)"
                var body: JSONObject = ["type": i % 5 == 0 ? "note" : "item", "group": .number(Double(i % 7)),
                                        "tag": .number(Double(i % 3)), "n": .number(Double(i * 10 + generation))]
                if i % 11 == 0 { body["pad"] = .string(String(repeating: "padding ", count: 300)) }
                try db.put(.object(body), id: id, rev: try db.document(id: id)?.revisionID)
            }
        }
    }

    /// The rows a naive map of the database's live documents gives for `view`, in index order.
    static func freshRows(_ db: Database, view: String) throws -> [String] {
        var rows: [(sort: [Double], id: String, text: String)] = []
        for row in try db.createAllDocumentsQuery().run() {
            let doc = try #require(row.document)
            guard doc["type"] == "item" else { continue }
            let (group, tag, n) = (doc["group"]!.doubleValue!, doc["tag"]!.doubleValue!, doc["n"]!.doubleValue!)
            if view == "byGroup" {
                rows.append(([group], doc.id, "\(JSON.number(group)) \(doc.id) \(JSON.number(n))"))
            } else {
                rows.append(([tag, n], doc.id, "\(JSON.array([.number(tag), .number(n)])) \(doc.id) -"))
            }
        }
        return rows.sorted { $0.sort != $1.sort ? $0.sort.lexicographicallyPrecedes($1.sort) : $0.id < $1.id }
            .map(\.text)
    }

    /// The view's rows as they are (no update), in the form ``freshRows(_:view:)`` gives.
    static func indexedRows(_ view: View) throws -> [String] {
        var query = view.createQuery()
        query.mapOnly = true
        query.indexUpdateMode = .never
        return try query.run().map { "\($0.key) \($0.documentID ?? "?") \($0.value.map { "\($0)" } ?? "-")" }
    }

    /// This process's open descriptors of files under `path` (tests run in parallel: others' files don't count).
    static func openDescriptors(under path: String) -> Int {
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return fds.filter {
            ((try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0)) ?? "").hasPrefix(path)
        }.count
    }

    /// Files in the database directory and its views directory that are neither a database nor an index file.
    static func strayFiles(_ path: String) -> [String] {
        let top = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
        let views = (try? FileManager.default.contentsOfDirectory(atPath: path + "/views")) ?? []
        return top.filter { !["docs", "views"].contains($0) } + views.filter { !["byGroup", "byTag"].contains($0) }
    }

    /// A database at `path` with 80 documents; with `indexed`, both views built and 40 documents changed since.
    /// Returns each view's rows as indexed (none without `indexed`).
    @discardableResult
    static func makeBase(_ path: String, indexed: Bool) throws -> [[String]] {
        let db = try Database(path: path, options: testOptions())
        defer { try? db.close() }
        try write(db, 0..<80)
        guard indexed else { return [[], []] }
        let views = try views(db)
        for view in views { try view.updateIndex() }
        try write(db, 60..<100, generation: 1)
        let doc = try #require(try db.document(id: "doc1003"))
        try db.delete(id: doc.id, rev: doc.revisionID)
        return try views.map(indexedRows)
    }

    /// How many calls of `call` opening both views of a base database (creating their files on a first build)
    /// and updating them makes.
    static func callsOfAnUpdate(_ call: FaultInjectingSystemCalls.Call, indexed: Bool,
                                in dir: TemporaryDatabaseDirectory) throws -> Int {
        let path = dir.database("count-\(call)-\(indexed)")
        try makeBase(path, indexed: indexed)
        let faults = FaultInjectingSystemCalls()
        let db = try Database(path: path, options: DatabaseOptions(durability: .full), system: faults)
        let before = faults.count(call)
        for view in try views(db) { try view.updateIndex() }
        let calls = faults.count(call) - before
        try db.close()
        return calls
    }

    /// R7: every call of the listed kinds an update makes fails once, and from then on, in turn; on the first
    /// build (the index files are created) and on an incremental update.
    @Test(arguments: [false, true])
    func indexUpdateFailingAtEveryCallIsConsistentAfterReopen(indexed: Bool) throws {
        let dir = TemporaryDatabaseDirectory("sofa-viewfault")
        var points = 0, failed = 0
        var perCall: [String] = []
        for call in [FaultInjectingSystemCalls.Call.pread, .pwrite, .fsync, .fdatasync, .rename, .ftruncate, .open,
                     .mmap] {
            let calls = try Self.callsOfAnUpdate(call, indexed: indexed, in: dir)
            perCall.append("\(call) \(calls)")
            guard calls > 0 else { continue }
            for nth in 1...calls {
                for persistent in [false, true] {
                    let context = "\(indexed ? "incremental update" : "first build"), \(call) #\(nth) of \(calls)" +
                                  (persistent ? " and after" : " once")
                    let path = dir.database("p\(points)")
                    points += 1
                    let before = try Self.makeBase(path, indexed: indexed)
                    let faults = FaultInjectingSystemCalls()
                    let db = try Database(path: path, options: DatabaseOptions(durability: .full), system: faults)
                    var views: [View] = []
                    var threw = false
                    do {
                        faults.arm(.init(call: call, nth: nth, persistent: persistent))
                        views = try Self.views(db)
                        for view in views { try view.updateIndex() }
                    } catch let error as SofaError {
                        threw = true
                        #expect(Self.storageErrors.contains(error.code), "\(context): \(error)")
                    }
                    if threw {
                        failed += 1
                        // Readers still see a whole commit of each index: the previous one or the new one.
                        faults.arm(nil)
                        for (view, old) in zip(views, before) {
                            let now = try? Self.indexedRows(view)
                            let fresh = try Self.freshRows(db, view: view.name)
                            #expect(now == nil || now == old || now == fresh,
                                    "\(context): \(view.name) shows a partial update")
                        }
                    }
                    faults.arm(nil)
                    try? db.close()
                    #expect(Self.openDescriptors(under: path) == 0, "\(context): descriptors leaked")

                    let reopened = try Database(path: path, options: testOptions())
                    #expect(Self.strayFiles(path).isEmpty, "\(context): left \(Self.strayFiles(path))")
                    for view in try Self.views(reopened) {
                        try view.updateIndex()
                        #expect(try Self.indexedRows(view) == (try Self.freshRows(reopened, view: view.name)),
                                "\(context): \(view.name) after reopening")
                        expectSound(view, context)
                    }
                    expectSound(reopened, context)
                    try reopened.close()
                }
            }
        }
        print("ViewFaultTests \(indexed ? "incremental update" : "first build"): \(points) fault points, " +
              "\(failed) updates failed, all consistent after reopening (calls per update: " +
              "\(perCall.joined(separator: ", ")); each failed once and persistently)")
        #expect(failed > 0 && points > 10, "\(points) points, \(failed) failed: the loop reached the update's calls")
    }

    /// R8: `ENOSPC` at each write of an update: `.diskFull`, the previous index intact and still served, no
    /// temporary file, and the same handle updates once space is back.
    @Test(arguments: [false, true])
    func diskFullDuringAnIndexUpdateKeepsThePreviousIndexAndRecovers(indexed: Bool) throws {
        let dir = TemporaryDatabaseDirectory("sofa-viewfull")
        let writes = try Self.callsOfAnUpdate(.pwrite, indexed: indexed, in: dir)
        var full = 0
        for nth in 1...writes {
            let context = "\(indexed ? "incremental update" : "first build"), ENOSPC at write #\(nth) of \(writes)"
            let path = dir.database("w\(nth)")
            let before = try Self.makeBase(path, indexed: indexed)
            let faults = FaultInjectingSystemCalls()
            let db = try Database(path: path, options: DatabaseOptions(durability: .full), system: faults)
            var views: [View] = []
            var updated = 0
            do {
                faults.arm(.init(call: .pwrite, nth: nth, persistent: true, errno: ENOSPC))
                views = try Self.views(db)
                for view in views {
                    try view.updateIndex()
                    updated += 1
                }
                // The last write of a small durable commit zeroes the file's tail after the commit is durable
                // (FORMAT.md §6): best effort, so disk full there fails nothing. Every other write must fail.
                if nth == writes { full += 1 } else { Issue.record("\(context): no error") }
            } catch let error as SofaError {
                full += 1
                #expect(error.code == .diskFull, "\(context): \(error)")
                #expect(error.message.contains("disk full"), "\(context): the message says why: \(error.message)")
            }
            #expect(Self.strayFiles(path).isEmpty, "\(context): left \(Self.strayFiles(path))")
            faults.arm(nil)
            for (i, (view, old)) in zip(views, before).enumerated() {
                // An update that returned is all there; the one that failed left the previous index.
                let want = i < updated ? try Self.freshRows(db, view: view.name) : old
                #expect(try Self.indexedRows(view) == want, "\(context): \(view.name)")
            }
            // Space is back: the same database updates its indexes (a view whose file could not be created
            // is created now).
            faults.arm(nil)
            for view in try Self.views(db) {
                try view.updateIndex()
                #expect(try Self.indexedRows(view) == (try Self.freshRows(db, view: view.name)), "\(context)")
                expectSound(view, context)
            }
            try Self.write(db, 100..<110)
            expectSound(db, context)
            try db.close()
        }
        print("ViewFaultTests \(indexed ? "incremental update" : "first build"): ENOSPC at each of \(writes) writes")
        #expect(full == writes)
    }

    /// R8: `ENOSPC` at each write of a compaction: `.diskFull`, `docs` unchanged or completely compacted (when the
    /// write that failed was a view's), no `docs.compact` left, and
    /// the same handle writes, updates its views and compacts once space is back.
    @Test func diskFullDuringCompactionKeepsTheOriginalAndRecovers() throws {
        let dir = TemporaryDatabaseDirectory("sofa-compactfull")
        func base(_ name: String) throws -> String {
            let path = dir.database(name)
            try Self.makeBase(path, indexed: true)
            return path
        }
        let countPath = try base("count")
        let counter = FaultInjectingSystemCalls()
        let counting = try Database(path: countPath, options: DatabaseOptions(durability: .full), system: counter)
        let start = counter.count(.pwrite)
        try counting.compact()
        let writes = counter.count(.pwrite) - start
        try counting.close()
        try #require(writes > 0)
        print("ViewFaultTests compaction: ENOSPC at each of \(writes) writes")

        for nth in 1...writes {
            let context = "ENOSPC at compaction write #\(nth) of \(writes)"
            let path = try base("c\(nth)")
            let faults = FaultInjectingSystemCalls()
            let db = try Database(path: path, options: DatabaseOptions(durability: .full), system: faults)
            let before = try DocumentFaultTests.contents(db)
            let size = try FileManager.default.attributesOfItem(atPath: path + "/docs")[.size] as? Int
            faults.arm(.init(call: .pwrite, nth: nth, persistent: true, errno: ENOSPC))
            if nth < writes {
                expectSofaError(.diskFull, context) { try db.compact() }
            } else {
                // The last write zeroes the new view file's tail after its commit (FORMAT.md §6): best effort.
                _ = try? db.compact()
            }
            #expect(Self.strayFiles(path).isEmpty, "\(context): left \(Self.strayFiles(path))")
            // Database.compact() rewrites docs, then each view: a failure in a view's compaction finds docs
            // already swapped for its complete compacted copy (commit 2, FORMAT.md §10.1.6); otherwise docs is
            // untouched. Either way no document changed (checked next).
            let sizeAfter = try FileManager.default.attributesOfItem(atPath: path + "/docs")[.size] as? Int
            #expect(sizeAfter == size || db.documents.storage.latestCommit.commitNumber == 2,
                    "\(context): docs was touched but not compacted")
            #expect(try DocumentFaultTests.contents(db) == before, "\(context)")
            faults.arm(nil)
            try Self.write(db, 100..<110)
            let result = try db.compact()
            #expect(result.lastSequence == db.lastSequence, "\(context)")
            for view in try Self.views(db) {
                try view.updateIndex()
                #expect(try Self.indexedRows(view) == (try Self.freshRows(db, view: view.name)), "\(context)")
            }
            expectSound(db, context)
            try db.close()
            let reopened = try Database(path: path, options: testOptions())
            #expect(reopened.documentCount == before.count - 1 + 10, "\(context)")  // one of them is deleted
            expectSound(reopened, context)
            try reopened.close()
        }
    }

    /// `views/` made by a call whose directory sync failed is synced by the next call instead of being taken
    /// as durable because it exists; the failed call is a typed error and the documents stay.
    @Test func viewsDirectoryWhoseSyncFailedIsSyncedByTheNextOpen() throws {
        let dir = TemporaryDatabaseDirectory("sofa-viewdir")
        let faults = FaultInjectingSystemCalls()
        let db = try Database(path: dir.database(), options: testOptions(), system: faults)
        try db.put(["n": 1], id: "a")
        let view = db.view(named: "n")
        view.setMap(version: "1") { doc, emit in emit(doc["n"] ?? .null, nil) }
        faults.arm(.init(call: .fsync, nth: 1))  // the database directory's sync after mkdir
        #expect(throws: SofaError.self) { try view.updateIndex() }
        #expect(faults.failuresInjected == 1)
        #expect(FileManager.default.fileExists(atPath: dir.database() + "/views"))
        let syncedAfterFailure = db.viewsDirectorySynced.load(ordering: .relaxed)
        #expect(!syncedAfterFailure)
        faults.arm(nil)

        let fsyncsBefore = faults.count(.fsync)
        try view.updateIndex()
        let syncedAfterRetry = db.viewsDirectorySynced.load(ordering: .relaxed)
        #expect(syncedAfterRetry)
        #expect(faults.count(.fsync) > fsyncsBefore)
        #expect(try view.createQuery().run().count == 1)
        expectSound(db)
        try db.close()
    }

    /// The writeback hint of an incremental update (`startWriteback`, before the group recompute) is given
    /// once for a durable update whose new nodes exceed a one-sync commit, and never for a small one or
    /// without durability; the index is right either way (the hint carries no durability of its own).
    @Test(arguments: [true, false])
    func updateHintsWritebackOnlyWhenDurableAndLarge(durable: Bool) throws {
        let dir = TemporaryDatabaseDirectory("sofa-writeback")
        let faults = FaultInjectingSystemCalls()
        let options = DatabaseOptions(durability: durable ? .full : .none)
        let db = try Database(path: dir.database(), options: options, system: faults)
        try db.inBatch {
            for i in 0..<20_000 {
                try db.put(["n": .number(Double(i)), "pad": .string(String(repeating: "x", count: 40))], id: "d\(i)")
            }
        }
        let view = db.view(named: "n")
        view.setMapReduce(version: "1", map: { doc, emit in emit(doc["n"] ?? .null, doc["pad"]) }, reduce: .count)
        try view.updateIndex()

        // Small: one document changed.
        var before = faults.writebacksStarted
        let first = try #require(try db.document(id: "d0"))
        try db.put(["n": -1, "pad": "y"], id: "d0", rev: first.revisionID)
        try view.updateIndex()
        #expect(faults.writebacksStarted == before, "a small update gives no hint")

        // Large: a fifth of the documents changed, far more than 64 KiB of new rows.
        before = faults.writebacksStarted
        try db.inBatch {
            for i in stride(from: 1, to: 20_000, by: 5) {
                let rev = try db.document(id: "d\(i)")?.revisionID
                try db.put(["n": .number(Double(-i)), "pad": .string(String(repeating: "z", count: 40))], id: "d\(i)",
                           rev: rev)
            }
        }
        try view.updateIndex()
        #expect(faults.writebacksStarted == before + (durable ? 1 : 0))
        #expect(try view.createQuery().run().first?.value == .number(20_000))
        expectSound(db)
        try db.close()
    }
}
