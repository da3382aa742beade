import Foundation
import XCTest

@testable import SofaStorage

/// FORMAT.md must say what the code writes: the constants of `FileFormat` and the bytes of a real file are
/// checked against the tables in FORMAT.md (an XCTest case, next to the Swift Testing suites).
final class FormatDocumentTests: XCTestCase {
    /// FORMAT.md at the repository root, found from this source file's path.
    func formatDocument() throws -> String {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return try String(contentsOf: root.appendingPathComponent("FORMAT.md"), encoding: .utf8)
    }

    func testConstantsMatchTheDocument() throws {
        let text = try formatDocument()
        XCTAssertTrue(text.contains("# Sofa file format, version \(FileFormat.version)"))
        XCTAssertTrue(text.contains("magic `53 4F 46 41` (\"SOFA\")"))
        XCTAssertTrue(text.contains("magic `53 46 43 54` (\"SFCT\")"))
        XCTAssertTrue(text.contains("Every chunk is a \(FileFormat.chunkPrefixSize)-byte prefix"))
        XCTAssertTrue(text.contains("come \(FileFormat.trailerSize) bytes"))
        XCTAssertTrue(text.contains("`storedLength` ≤ 2^30") && FileFormat.maximumChunkSize == 1 << 30)
        XCTAssertTrue(text.contains("format version, `\(FileFormat.version)`"))
        XCTAssertTrue(text.contains(
            "is at most \(StorageFile.oneSyncLimit >> 10) KiB, in a version 2 file, is a **one-sync commit**"))
        XCTAssertTrue(text.contains("at least \(StorageFile.minimumZeroTail >> 10) KiB and at most " +
                                    "\(StorageFile.preallocationStep >> 10) KiB (the **preallocation step**)"))
        XCTAssertTrue(text.contains("(in blocks of \(Recovery.zeroTailBlock >> 10) KiB, at most " +
                                    "\((StorageFile.preallocationStep + Recovery.zeroTailBlock) >> 10) KiB"))
        for kind in ChunkKind.allCases {
            XCTAssertTrue(text.contains("\(kind.rawValue) \(FormatDocumentTests.documentedName(kind))"), "\(kind)")
        }
    }

    static func documentedName(_ kind: ChunkKind) -> String {
        switch kind {
        case .fileHeader: "file header"
        case .commitHeader: "commit header"
        case .leaf: "leaf node"
        case .inner: "inner node"
        case .value: "value"
        }
    }

    /// The first bytes of a new file, decoded by hand as FORMAT.md §3–§6 describe them.
    func testNewFileBytesFollowTheDocument() throws {
        let dir = NSTemporaryDirectory() + "sofa-format-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try StorageFile(path: dir + "/f", options: StorageOptions(fileKind: 7)).close()
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: dir + "/f")))
        func u32(_ at: Int) -> UInt32 { bytes[at..<(at + 4)].reversed().reduce(0) { $0 << 8 | UInt32($1) } }
        func u64(_ at: Int) -> UInt64 { bytes[at..<(at + 8)].reversed().reduce(0) { $0 << 8 | UInt64($1) } }
        // File header chunk: 16-byte prefix + 24-byte payload, kind 1, uncompressed.
        XCTAssertEqual(u32(4), 24)
        XCTAssertEqual(u32(8), 24)
        XCTAssertEqual(bytes[12], 1)
        XCTAssertEqual(bytes[13], 0)
        XCTAssertEqual(Array(bytes[16..<20]), Array("SOFA".utf8))
        XCTAssertEqual(u32(20), FileFormat.version)
        XCTAssertEqual(u32(24), 7)
        XCTAssertEqual(u32(0), bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[4..<40])) })
        // Commit 1: header chunk at 40, then the trailer naming it, ending the file.
        XCTAssertEqual(bytes[40 + 12], 2)
        XCTAssertEqual(u64(40 + 16), 1, "commit number")
        XCTAssertEqual(u64(40 + 24), 0, "previous header offset")
        // Payload: three u64s, root count 0, metadata length 0, data check 0 (version 2): 27 bytes.
        XCTAssertEqual(u32(40 + 4), 27)
        XCTAssertEqual(Array(bytes[(40 + 16 + 24)..<(40 + 16 + 27)]), [0, 0, 0], "roots, metadata, data check")
        XCTAssertEqual(bytes.count, 40 + 16 + 27 + 16, "a new file ends at its first commit's trailer")
        let trailer = bytes.count - 16
        XCTAssertEqual(u64(trailer), 40)
        XCTAssertEqual(Array(bytes[(trailer + 8)..<(trailer + 12)]), Array("SFCT".utf8))
        XCTAssertEqual(u32(trailer + 12),
                       bytes.withUnsafeBytes {
                           CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[trailer..<(trailer + 12)]))
                       })
    }
}
