import Foundation
import Testing

@testable import Sofa
@testable import SofaStorage

/// FORMAT.md must say what the code writes, for the database files (§10): the storage layer's half of these
/// checks is the `FormatDocumentTests` case in SofaStorageTests, which cannot see the `Sofa` module.
@Suite struct FormatDocumentTests {
    /// FORMAT.md at the repository root, found from this source file's path.
    static func formatDocument() throws -> String {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return try String(contentsOf: root.appendingPathComponent("FORMAT.md"), encoding: .utf8)
    }

    /// The document trees' node sizes (§10.1.1, §10.1.2) and the largest flush written uncompressed.
    @Test func documentTreeSizesMatchTheDocument() throws {
        let format = try Self.formatDocument()
        let dir = TemporaryDatabaseDirectory()
        let db = try Database(path: dir.database(), options: testOptions())
        #expect(format.contains("written by a flush of at most \(WriteBatch.rawFlushLimit) documents"))
        let byID = db.documents.byIDConfiguration, bySequence = db.documents.bySequenceConfiguration
        #expect(format.contains("leaves filled to \(byID.nodeSize) bytes uncompressed, inner nodes to " +
                                "\(byID.innerNodeSize)"))
        #expect(format.contains("leaves \(bySequence.nodeSize) bytes uncompressed, inner nodes " +
                                "\(bySequence.innerNodeSize)"))
        expectSound(db)
        try db.close()
    }
}
