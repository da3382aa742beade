import Foundation
import Testing

@_spi(Fuzzing) @testable import Sofa
@_spi(Fuzzing) @testable import SofaStorage

/// R6 in the default suite: every input kept under `Tests/Fixtures/fuzz/<target>/` — the seed corpus and every
/// crasher the fuzzers found (`crash-*`, kept after the fix) — is fed to the same entry point the libFuzzer
/// target of that name calls (`Fuzz/`). Each must return or throw a ``SofaError``; a trap fails the suite.
///
/// `SOFA_WRITE_FUZZ_SEEDS=1 swift test --filter FuzzFixtureReplayTests` rewrites the `seed-*` inputs from the
/// current encoders (after a format change).
@Suite struct FuzzFixtureReplayTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fixtures/fuzz").path

    /// The inputs of one target, sorted by name.
    static func inputs(_ target: String) -> [(name: String, bytes: [UInt8])] {
        let dir = fixtures + "/" + target
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
        return names.sorted().compactMap { name in
            FileManager.default.contents(atPath: dir + "/" + name).map { (name, [UInt8]($0)) }
        }
    }

    /// Feeds every input of `target` to `entry`; records anything but a value or a `SofaError`.
    /// Returns how many inputs were accepted and how many rejected.
    @discardableResult
    static func replay(_ target: String, _ entry: ([UInt8]) throws -> Int) -> (accepted: Int, rejected: Int) {
        let inputs = inputs(target)
        #expect(inputs.count >= 3, "the \(target) corpus is missing from \(fixtures)")
        var accepted = 0, rejected = 0
        for input in inputs {
            do {
                _ = try entry(input.bytes)
                accepted += 1
            } catch is SofaError {
                rejected += 1
            } catch {
                Issue.record("\(target)/\(input.name): non-Sofa error \(error)")
            }
        }
        return (accepted, rejected)
    }

    @Test func fileInputsOpenOrFailWithATypedError() throws {
        let dir = TemporaryDatabaseDirectory("sofa-fuzz")
        let result = Self.replay("file") { try SofaFuzzing.openFile($0, directory: dir.path) }
        #expect(result.accepted >= 2, "the valid seed files should open")
        // Every input is cleaned up after itself.
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == [])
    }

    @Test func chunkInputsDecodeOrFailWithATypedError() {
        let result = Self.replay("chunk") { try StorageFuzzing.decodeChunk($0) }
        #expect(result.accepted >= 2)
    }

    @Test func jsonInputsParseOrFailWithATypedError() {
        let result = Self.replay("json") { try SofaFuzzing.parseJSON($0) }
        #expect(result.accepted >= 3)
    }

    @Test func collationInputsValidateOrFailWithATypedError() {
        let result = Self.replay("collation") { try SofaFuzzing.decodeCollationKey($0) }
        #expect(result.accepted >= 3)
    }

    /// Writes the seed corpus when `SOFA_WRITE_FUZZ_SEEDS` is set; otherwise checks the committed seeds are there.
    @Test func seedCorpus() throws {
        guard ProcessInfo.processInfo.environment["SOFA_WRITE_FUZZ_SEEDS"] != nil else {
            for target in ["file", "chunk", "json", "collation"] {
                #expect(Self.inputs(target).contains { $0.name.hasPrefix("seed-") }, "no seeds for \(target)")
            }
            return
        }
        let dir = TemporaryDatabaseDirectory("sofa-seeds")
        let tree = try Self.writeTreeFile(dir.path + "/tree")
        let docs = try Self.writeDatabase(dir.database())
        try Self.save(tree, as: "file/seed-tree.sofa")
        try Self.save(docs, as: "file/seed-database-docs.sofa")
        // A torn tail (recovery falls back to the first commit) and a file with no commit at all.
        try Self.save(Array(tree[..<(tree.count * 3 / 4)]), as: "file/seed-tree-torn.sofa")
        try Self.save(Array(tree[..<40]), as: "file/seed-tree-header-only.sofa")
        var n = 0
        for file in [tree, docs] {
            for (chunk, payload) in try Self.chunks(of: file) where n < 24 {
                try Self.save([1] + chunk, as: "chunk/seed-chunk-\(n)")
                try Self.save([0] + payload, as: "chunk/seed-payload-\(n)")
                n += 1
            }
        }
        let keys: [JSON] = [nil, false, true, 0, -1.5, 1e300, "", "Qux", "ünïcödé ⚡️", ["Rock", "Queen", 1971],
                            [[], [[]], ["a": 1]], ["type": "track", "n": [1, 2]]]
        for (i, key) in keys.enumerated() {
            // A row key is the collation key followed by a doc ID, so walkers see trailing bytes too.
            try Self.save(try CollationKey(key).bytes, as: "collation/seed-key-\(i)")
            try Self.save(try CollationKey(key).bytes + Array("doc-\(i)".utf8), as: "collation/seed-row-\(i)")
        }
    }

    static func save(_ bytes: [UInt8], as name: String) throws {
        try Data(bytes).write(to: URL(fileURLWithPath: fixtures + "/" + name))
    }

    /// A small storage file: one tree of 40 rows with sum reductions over three levels, and a second commit.
    static func writeTreeFile(_ path: String) throws -> [UInt8] {
        let file = try StorageFile(path: path, options: StorageOptions(durability: .none))
        let configuration = BTreeConfiguration(nodeSize: 128, reducer: Int64SumReducer())
        var tree = BTree(file: file, root: nil, configuration: configuration, limit: StorageFile.unlimited)
        tree = try tree.modified(by: (0..<40).map { BTreeAction.put([UInt8(0x61 + $0 / 8), UInt8($0)],
                                                                     Int64SumReducer.encode(Int64($0))) })
        try file.commit(roots: [tree.root], metadata: [1])
        tree = try tree.modified(by: [.remove([0x61, 3]), .put([0x7a], Int64SumReducer.encode(7))])
        try file.commit(roots: [tree.root, nil], metadata: [2])
        try file.close()
        return [UInt8](FileManager.default.contents(atPath: path)!)
    }

    /// A small database's document file: puts, an update, a deletion and a conflict.
    static func writeDatabase(_ path: String) throws -> [UInt8] {
        let db = try Database(path: path, options: testOptions())
        let a = try db.put(["type": "track", "title": "Qux", "year": 1971], id: "a")
        _ = try db.put(["type": "track", "title": "Qux", "year": 1972], id: "a", rev: a.revisionID)
        let b = try db.put(["n": 1], id: "b")
        _ = try db.delete(id: "b", rev: b.revisionID)
        _ = try db.put(["big": .string(String(repeating: "sofa ", count: 300))], id: "c")
        _ = try db.forceInsert(["side": true], id: "a", revisionHistory: ["2-ffff", a.revisionID])
        try db.close()
        return [UInt8](FileManager.default.contents(atPath: path + "/docs")!)
    }

    /// Each chunk of a file and its payload (decompressed), in file order.
    static func chunks(of file: [UInt8]) throws -> [(chunk: [UInt8], payload: [UInt8])] {
        var out: [(chunk: [UInt8], payload: [UInt8])] = []
        var offset = 0
        while offset + FileFormat.chunkPrefixSize <= file.count {
            let next: (chunk: [UInt8], payload: [UInt8], end: Int)? = try file.withUnsafeBytes { all in
                let bytes = UnsafeRawBufferPointer(rebasing: all[offset...])
                guard let prefix = try? Chunk.check(bytes, offset: UInt64(offset), path: "", expecting: nil) else {
                    return nil
                }
                let stored = UnsafeRawBufferPointer(rebasing: bytes[FileFormat.chunkPrefixSize..<prefix.totalLength])
                let payload = prefix.isCompressed
                    ? try Chunk.decompress(stored, rawLength: prefix.rawLength, offset: 0, kind: prefix.kind,
                                           path: "").bytes
                    : Array(stored)
                return (Array(bytes[0..<prefix.totalLength]), payload, offset + prefix.totalLength)
            }
            // Trailers sit between commits; skip a byte at a time until the next chunk checks.
            guard let next else { offset += 1; continue }
            out.append((next.chunk, next.payload))
            offset = next.end
        }
        return out
    }
}
