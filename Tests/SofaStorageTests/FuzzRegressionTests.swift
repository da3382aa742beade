import Foundation
import Testing

@testable import SofaStorage

/// Bugs the fuzzers found (Fuzz/, `make fuzz`), one named test each. The crashing inputs themselves are kept
/// under `Tests/Fixtures/fuzz/` and replayed by `FuzzFixtureReplayTests`; these tests pin each cause down at the
/// level of the API, so the reason for the fix survives a change of file format that makes the input stale.
@Suite struct FuzzRegressionTests {
    /// A small committed tree with inner nodes, and its file.
    static func treeFile(_ dir: TemporaryDirectory) throws -> (file: StorageFile, commit: CommitHeader) {
        let file = try StorageFile(path: dir.file("f"), options: StorageOptions(durability: .none))
        let tree = try BTree(file: file, root: nil, configuration: BTreeConfiguration(nodeSize: 128),
                             limit: StorageFile.unlimited)
            .modified(by: (0..<50).map { .put(numericKey($0), int64Value(Int64($0))) })
        return (file, try file.commit(roots: [tree.root], metadata: []))
    }

    /// fuzz-file, crash-49870387cf7b7fb313ff7a2a5f0c60e2046815b8: an inner node (with a valid CRC) pointing to a
    /// child at an offset above `Int.max` trapped in `BTree.node(at:)` while building the error ("Not enough bits
    /// to represent the passed value": `Int(offset)`). Now every error offset built from a stored pointer is
    /// `Int(clamping:)`, and the pointer is reported as corruption.
    @Test func pointerAboveIntMaxIsCorruptionNotATrap() throws {
        let dir = TemporaryDirectory()
        let (file, commit) = try Self.treeFile(dir)
        for offset in [UInt64.max, UInt64(Int.max) + 1, commit.endOffset + 1] {
            let root = NodePointer(offset: offset, rowCount: 1, subtreeSize: 1, reduction: [])
            let tree = BTree(file: file, root: root, configuration: BTreeConfiguration(), limit: commit.endOffset)
            #expect { try tree.get(numericKey(1)) } throws: { error in
                guard let error = error as? SofaError else { return false }
                return error.code == .corruption && error.offset == Int(clamping: offset)
                    && error.message.contains("\(offset)")
            }
            let (_, problems) = tree.verify()
            #expect(problems.count == 1 && problems[0].code == .corruption, "\(problems)")
            #expect { try file.readChunk(at: offset, kind: nil, limit: commit.endOffset) } throws: {
                ($0 as? SofaError)?.code == .corruption
            }
        }
    }
}
