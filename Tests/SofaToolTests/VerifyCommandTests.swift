import Foundation
import Testing

@testable import Sofa
@testable import SofaStorage

/// `sofa verify`: clean databases exit 0; damaged bytes are found (exit 1, file and offset named) and never
/// crash the tool; a truncated file opens at its last good commit.
@Suite struct VerifyCommandTests {
    /// Overwrites `count` bytes of `path` at `offset` with their complement.
    static func flip(_ path: String, at offset: Int, count: Int = 1) throws {
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        try handle.seek(toOffset: UInt64(offset))
        let bytes = try handle.read(upToCount: count) ?? Data()
        try handle.seek(toOffset: UInt64(offset))
        try handle.write(contentsOf: Data(bytes.map { ~$0 }))
    }

    /// `rounds` times: restores `file` to `pristine`, flips one byte at a seeded random offset, and runs
    /// `sofa verify` on the database at `path`, which must exit 0 or 1 (a finding), never crash. Calls
    /// `finding` with each exit-1 result; returns how many rounds found something.
    static func verifyAfterRandomFlips(of file: String, pristine: Data, database path: String, rounds: Int,
                                       seed: UInt64,
                                       finding: (_ round: Int, _ result: Tool.Result) -> Void = { _, _ in })
        throws -> Int {
        var state = seed
        var found = 0
        for round in 0..<rounds {
            try pristine.write(to: URL(fileURLWithPath: file))
            state = state &* 6364136223846793005 &+ 1442695040888963407
            let at = Int((state >> 33) % UInt64(pristine.count))
            try flip(file, at: at)
            let result = try Tool.run(["verify", path])
            #expect(result.exited, "round \(round): flipped byte \(at) crashed verify: \(result.error)")
            #expect(result.status == 0 || result.status == 1, "round \(round), byte \(at): \(result.error)")
            if result.status == 1 {
                found += 1
                finding(round, result)
            }
        }
        return found
    }

    @Test func cleanDatabasePasses() throws {
        let dir = Tool.Directory()
        let path = try Tool.database(in: dir, Tool.documents(1500), batch: 500)
        let result = try Tool.run(["verify", path])
        #expect(result.status == 0)
        #expect(result.lines == ["docs: 1,500 documents, 0 deleted, last sequence 1500", "verify: no problems found"])
        let json = try Tool.run(["verify", path, "--json"]).jsonLines()
        #expect(json.count == 1)
        #expect(json.first?["problems"] as? Int == 0)
        #expect(json.first?["documents"] as? Int == 1500)
    }

    @Test func flippedNodeBytesAreFoundWithTheirOffset() throws {
        for tree in [[String](), ["--by-seq"]] {
            let dir = Tool.Directory()
            let path = try Tool.database(in: dir, Tool.documents(3000))
            let nodes = try Tool.run(["dump", path, "--tree", "--json"] + tree).jsonLines()
            let leaf = try #require(nodes.last { $0["kind"] as? String == "leaf" })
            let offset = try #require(leaf["offset"] as? Int)
            try Self.flip(path + "/docs", at: offset + 40, count: 4)

            let result = try Tool.run(["verify", path])
            #expect(result.exited && result.status == 1, "\(tree): \(result.output) \(result.error)")
            #expect(result.output.contains("at offset \(offset))"), "\(tree): \(result.output)")
            #expect(result.lines.last?.hasSuffix("found") == true)
            let json = try Tool.run(["verify", path, "--json"])
            #expect(json.status == 1)
            let problems = json.jsonLines().filter { $0["problem"] != nil }
            #expect(problems.contains { $0["offset"] as? Int == offset && $0["code"] as? String == "corruption" })
            #expect(problems.allSatisfy { ($0["file"] as? String)?.hasSuffix("/docs") == true })
        }
    }

    @Test func randomByteFlipsNeverCrash() throws {
        let dir = Tool.Directory()
        let path = try Tool.database(in: dir, Tool.documents(2000), batch: 2000)
        let docs = path + "/docs"
        let pristine = try Data(contentsOf: URL(fileURLWithPath: docs))
        let found = try Self.verifyAfterRandomFlips(of: docs, pristine: pristine, database: path, rounds: 16,
                                                    seed: 0x5EED_0F_50FA)
        #expect(found > 0, "no flip out of 16 was detected")
    }

    @Test func damagedFileHeaderIsAFindingNotACrash() throws {
        let dir = Tool.Directory()
        let path = try Tool.database(in: dir, Tool.documents(10))
        try Self.flip(path + "/docs", at: 20)
        let result = try Tool.run(["verify", path])
        #expect(result.exited && result.status == 1)
        #expect(result.output.contains("problem: "))
        #expect(result.output.contains("at offset 0)"))
    }

    @Test func truncatedFileOpensAtTheLastGoodCommit() throws {
        let dir = Tool.Directory()
        let path = try Tool.database(in: dir, Tool.documents(300), batch: 100)
        let docs = path + "/docs"
        let size = Tool.fileSize(docs)
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: docs))
        try handle.truncate(atOffset: UInt64(size - 10))  // tears the newest commit's trailer
        try handle.close()
        let result = try Tool.run(["verify", path])
        #expect(result.status == 0, "\(result.output) \(result.error)")
        #expect(result.lines.first == "docs: 200 documents, 0 deleted, last sequence 200")
        let info = try Tool.run(["info", path, "--json"]).jsonLines()
        #expect(info.first?["documents"] as? Int == 200)
        #expect(Tool.fileSize(docs) == size - 10, "read-only commands do not change the file")
    }

    @Test func flippedViewFileBytesAreFoundWithTheirOffset() throws {
        let dir = Tool.Directory()
        let path = try Tool.database(in: dir, Tool.documents(3000))
        try Tool.createView(path, ["byName", "--key", "name", "--value", "n", "--reduce", "_stats"])
        let file = path + "/views/byName"
        let nodes = try Tool.run(["dump", path, "--view", "byName", "--tree", "--json"]).jsonLines()
        let leaf = try #require(nodes.last { $0["kind"] as? String == "leaf" })
        let offset = try #require(leaf["offset"] as? Int)
        try Self.flip(file, at: offset + 40, count: 4)

        let result = try Tool.run(["verify", path])
        #expect(result.exited && result.status == 1, "\(result.output) \(result.error)")
        #expect(result.output.contains("(\(file) at offset \(offset))"), "\(result.output)")
        let json = try Tool.run(["verify", path, "--json"])
        #expect(json.status == 1)
        let problems = json.jsonLines().filter { $0["problem"] != nil }
        #expect(problems.contains { $0["offset"] as? Int == offset && $0["file"] as? String == file })

        // Random single-byte flips anywhere in the view file: a finding or nothing, never a crash.
        try Self.flip(file, at: offset + 40, count: 4)  // back as it was
        try Tool.expectVerifies(path)
        let pristine = try Data(contentsOf: URL(fileURLWithPath: file))
        let found = try Self.verifyAfterRandomFlips(of: file, pristine: pristine, database: path, rounds: 12,
                                                    seed: 0x0F1E_5EED) { round, result in
            #expect(result.output.contains(file), "round \(round): \(result.output)")
        }
        #expect(found > 0, "no flip out of 12 was detected")
    }

    @Test func tamperedViewRowIsFound() throws {
        let dir = Tool.Directory()
        let path = try Tool.database(in: dir, Tool.tracks)
        try Tool.createView(path, ["byArtist", "--key", "artist", "--value", "duration", "--reduce", "_sum"])
        // Through the index's own write path, so checksums and back-index ⇄ rows still agree: only a fresh map of
        // the documents can tell that track4's row now carries a wrong duration.
        do {
            let db = try Database(path: path)
            let view = try #require(db.existingView(named: "byArtist"))
            let index = try #require(try view.index())
            let snapshot = try index.snapshot()
            let entry = try #require(try snapshot.backIndex.get(Array("track4".utf8)))
            let rowKey = RowKey.make(key: try entry.withUnsafeBytes(BackIndexEntry.decode)[0],
                                     id: Array("track4".utf8), index: 0)
            let row = try #require(try snapshot.rows.get(rowKey)).withUnsafeBytes { try RowValue($0) }
            let rows = try BTree(file: index.storage, root: snapshot.rows.root, configuration: index.rowsConfiguration,
                                 limit: StorageFile.unlimited)
                .modified(by: [.put(rowKey, RowValue.encode(keyLength: row.keyLength, sequence: row.sequence,
                                                            key: row.key, value: 1))])
            try index.commit(rows: rows, backIndex: snapshot.backIndex, header: snapshot.header)
            try db.close()
        }
        let result = try Tool.run(["verify", path])
        #expect(result.status == 1, "\(result.output) \(result.error)")
        #expect(result.output.contains("problem: corruption: row 0 of \"track4\" differs from what the map emits"),
                "\(result.output)")
        #expect(result.output.contains("(\(path)/views/byArtist at offset "))
        let json = try Tool.run(["verify", path, "--json"]).jsonLines()
        #expect(json.first?["file"] as? String == path + "/views/byArtist")
        #expect(json.first?["offset"] is Int)
        #expect(json.last?["problems"] as? Int == 1 && json.last?["views"] as? Int == 1)
    }

    @Test func missingDatabaseAndBadUsage() throws {
        let dir = Tool.Directory()
        let missing = try Tool.run(["verify", dir.path + "/none.sofa"])
        #expect(missing.status == 1)
        #expect(missing.error.hasPrefix("sofa: notFound"))
        #expect(try Tool.run(["verify"]).status == 2)
    }
}
