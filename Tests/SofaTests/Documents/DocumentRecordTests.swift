import Foundation
import Testing

@testable import Sofa
@testable import SofaStorage

/// The by-ID record (FORMAT.md §10.1.1) byte for byte: what the encoder writes, what both decoders (the
/// linear-history fast path and the general one) read back, and the flag values the format reserves.
@Suite struct DocumentRecordTests {
    static let hex = "0123456789abcdef0123456789abcdef"
    static let digest: [UInt8] = [0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF, 0x01, 0x23, 0x45, 0x67, 0x89, 0xAB,
                                  0xCD, 0xEF]

    /// One live revision with a binary digest and an inline body: the entry the fast path reads.
    @Test func oneRevisionWithAnInlineBody() throws {
        let body = Array(#"{"a":1}"#.utf8)
        let id = try #require(RevisionID("1-" + Self.hex))
        let record = DocumentRecord(sequence: 5, tree: RevisionTree(first: id, deleted: false, body: .inline(body)))
        // document flags, sequence, revision count; flags = leaf | binary digest | body kind 1 (bits 4–5),
        // generation, digest, body length, body.
        let expected: [UInt8] = [0x00, 0x05, 0x01, 0x16, 0x01] + Self.digest + [UInt8(body.count)] + body
        #expect(record.encoded() == expected)
        try expected.withUnsafeBytes { bytes in
            #expect(try DocumentRecord(decoding: bytes, path: "test") == record)
            var range: Range<Int>?
            let read = try DocumentRecord(decoding: bytes, path: "test", bodyOf: nil, at: &range)
            #expect(read.sequence == 5 && read.tree.winner.id == id && !read.tree.winner.deleted)
            #expect(range == (expected.count - body.count)..<expected.count)
        }
    }

    /// Fields whose varints take two or three bytes — a 200-character digest, an inline body of 300 bytes, a
    /// chunk offset of 70,000, a large sequence — round-trip, and `encodedSize` is the encoder's byte count, into
    /// an array and into raw memory alike.
    @Test func multiByteVarintsRoundTrip() throws {
        let text = String(repeating: "q", count: 200)
        let parent = RevisionTree.Revision(id: try #require(RevisionID("3-" + text)), parent: nil, deleted: false,
                                           isLeaf: true, body: .chunk(offset: 70_000))
        let leaf = RevisionTree.Revision(id: try #require(RevisionID("200-" + Self.hex)), parent: nil,
                                         deleted: false, isLeaf: true,
                                         body: .inline((0..<300).map { UInt8(truncatingIfNeeded: $0) }))
        let record = DocumentRecord(sequence: 1 << 40, tree: RevisionTree(revisions: [leaf, parent]))
        let bytes = record.encoded()
        #expect(bytes.count == record.encodedSize)
        var raw = [UInt8](repeating: 0xEE, count: record.encodedSize)
        raw.withUnsafeMutableBytes { record.encode(to: $0) }
        #expect(raw == bytes)
        let decoded = try bytes.withUnsafeBytes { try DocumentRecord(decoding: $0, path: "test") }
        #expect(decoded == record)
    }

    /// Two revisions: a leaf with a text digest, a parent and a body in a value chunk, and its parent with a
    /// binary digest and no body — every field the fast path leaves to the general decoder.
    @Test func revisionWithParentTextDigestAndChunkBody() throws {
        let parent = RevisionTree.Revision(id: try #require(RevisionID("1-" + Self.hex)), parent: nil, deleted: false,
                                           isLeaf: false, body: .empty)
        let leaf = RevisionTree.Revision(id: try #require(RevisionID("2-zz")), parent: 1, deleted: false, isLeaf: true,
                                         body: .chunk(offset: 300))
        let record = DocumentRecord(sequence: 9, tree: RevisionTree(revisions: [leaf, parent]))
        let expected: [UInt8] = [0x00, 0x09, 0x02,
                                 // leaf | has parent | body kind 2; generation 2; digest text "zz"; parent 1;
                                 // chunk offset 300 as a varint
                                 0x2A, 0x02, 0x02, 0x7A, 0x7A, 0x01, 0xAC, 0x02,
                                 // binary digest, body kind 0; generation 1; digest
                                 0x04, 0x01] + Self.digest
        #expect(record.encoded() == expected)
        let decoded = try expected.withUnsafeBytes { try DocumentRecord(decoding: $0, path: "test") }
        #expect(decoded == record)
    }

    /// Bits 6–7 of a revision's flags and body kind 3 are damage, for both decoders.
    @Test func reservedRevisionFlagsAreCorruption() throws {
        let good: [UInt8] = [0x00, 0x05, 0x01, 0x16, 0x01] + Self.digest + [0x02, 0x7B, 0x7D]
        for flags: UInt8 in [0x36, 0x56, 0x96] {
            var bad = good
            bad[3] = flags
            expectBothDecodersFail(bad, "revision flags \(flags)")
        }
    }

    /// The flag bits and limits FORMAT.md names are the ones the code writes and reads: the document flags and
    /// the binary-digest bit by their constants, the others (private to the record) by the bytes the encoder
    /// writes and the values both decoders refuse.
    @Test func flagBitsMatchTheFormatDocument() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("FORMAT.md"), encoding: .utf8)
        #expect(text.contains("| document flags | `u8`: bit 0 the winning revision is deleted; bit 1 conflicted; " +
                              "other bits 0 |"))
        #expect(text.contains("| flags | `u8`: bit 0 deleted; bit 1 leaf; bit 2 binary digest; bit 3 has parent; " +
                              "bits 4–5 body kind (0 none, 1 inline, 2 chunk; 3 is invalid); bits 6–7 zero |"))
        #expect(DocumentRecord.flagDeleted == 1 << 0 && DocumentRecord.flagConflicted == 1 << 1)
        #expect(DocumentRecord.revBinaryDigest == 1 << 2)
        #expect(text.contains("| generation | `varint`, ≥ 1 and < 10^19 (a revision ID's generation has at most 19 " +
                              "decimal digits; a reader treats a larger value as corruption) |"))

        // Revision flags as written: bit 1 leaf, bit 3 has parent, bits 4–5 body kind, bit 0 deleted.
        let parentID = try #require(RevisionID("1-" + Self.hex))
        let childID = try #require(RevisionID("2-" + Self.hex))
        func revisionFlags(_ revisions: [RevisionTree.Revision]) -> UInt8 {
            // Sequence 1 and a revision count below 128 are one byte each: the first revision's flags are byte 3.
            DocumentRecord(sequence: 1, tree: RevisionTree(revisions: revisions)).encoded()[3]
        }
        let binary: UInt8 = 1 << 2
        let leaf = RevisionTree.Revision(id: parentID, parent: nil, deleted: false, isLeaf: true, body: .empty)
        #expect(revisionFlags([leaf]) == 1 << 1 | binary, "leaf, body kind 0 (none)")
        var deleted = leaf
        deleted.deleted = true
        #expect(revisionFlags([deleted]) == 1 << 0 | 1 << 1 | binary, "deleted leaf")
        var inline = leaf
        inline.body = .inline([0x7B, 0x7D])
        #expect(revisionFlags([inline]) == 1 << 4 | 1 << 1 | binary, "body kind 1 (inline) at bit 4")
        let parent = RevisionTree.Revision(id: parentID, parent: nil, deleted: false, isLeaf: false, body: .empty)
        let child = RevisionTree.Revision(id: childID, parent: 1, deleted: false, isLeaf: true,
                                          body: .chunk(offset: 300))
        #expect(revisionFlags([child, parent]) == 2 << 4 | 1 << 3 | 1 << 1 | binary,
                "body kind 2 (chunk) at bit 4, has parent")

        // Read back: bits 6–7 and body kind 3 are damage, for both decoders.
        let good = DocumentRecord(sequence: 1, tree: RevisionTree(revisions: [inline])).encoded()
        for flags: UInt8 in [1 << 6, 1 << 7, 3 << 4 | 1 << 1 | binary] {
            var bad = good
            bad[3] = good[3] & 0x0F | flags
            expectBothDecodersFail(bad, "revision flags \(bad[3])")
        }

        // Generations are below 10^19: the largest round-trips through both decoders, the limit is damage.
        let largest = RevisionID(generation: 9_999_999_999_999_999_999, digest: parentID.digest)
        var oldest = leaf
        oldest.id = largest
        let record = DocumentRecord(sequence: 1, tree: RevisionTree(revisions: [oldest]))
        try record.encoded().withUnsafeBytes { (bytes: UnsafeRawBufferPointer) throws in
            #expect(try DocumentRecord(decoding: bytes, path: "test") == record)
            var range: Range<Int>?
            #expect(try DocumentRecord(decoding: bytes, path: "test", bodyOf: nil, at: &range).tree.winner.id
                    == largest)
        }
        oldest.id = RevisionID(generation: 10_000_000_000_000_000_000, digest: parentID.digest)
        expectBothDecodersFail(DocumentRecord(sequence: 1, tree: RevisionTree(revisions: [oldest])).encoded(),
                               "generation 10^19")
    }

    /// `encoded()` stages the small fields on the stack and appends them in pieces; on random trees (histories
    /// of up to 25 revisions, text digests, every body kind) it writes the bytes that appending each field in
    /// turn, as FORMAT.md §10.1.1 lists them, writes — and they decode to the same record.
    @Test func encodingWritesTheFieldsInFormatOrder() throws {
        func fieldByField(_ record: DocumentRecord) -> [UInt8] {
            var out: [UInt8] = [record.documentFlags]
            out.appendVarint(record.sequence)
            out.appendVarint(UInt64(record.tree.revisions.count))
            for r in record.tree.revisions {
                var flags: UInt8 = (r.deleted ? 0x01 : 0) | (r.isLeaf ? 0x02 : 0) | (r.id.isBinary ? 0x04 : 0)
                    | (r.parent != nil ? 0x08 : 0)
                switch r.body {
                case .empty: break
                case .inline: flags |= 1 << 4
                case .chunk: flags |= 2 << 4
                }
                out.append(flags)
                out.appendVarint(r.id.generation)
                switch r.id.digest {
                case .binary(let high, let low):
                    for word in [high, low] { withUnsafeBytes(of: word.bigEndian) { out.append(contentsOf: $0) } }
                case .text(let text):
                    out.appendVarint(UInt64(text.utf8.count))
                    out.append(contentsOf: text.utf8)
                }
                if let p = r.parent { out.appendVarint(UInt64(p)) }
                switch r.body {
                case .empty: break
                case .inline(let bytes):
                    out.appendVarint(UInt64(bytes.count))
                    out.append(contentsOf: bytes)
                case .chunk(let offset): out.appendVarint(offset)
                }
            }
            return out
        }
        for seed in SeededRandom.testSeeds {
            var random = SeededRandom(seed: seed)
            for _ in 0..<300 {
                let record = Self.randomRecord(&random)
                let bytes = record.encoded()
                #expect(bytes == fieldByField(record), "seed \(seed)")
                #expect(try bytes.withUnsafeBytes { try DocumentRecord(decoding: $0, path: "test") } == record)
            }
        }
    }

    /// A new document's record — one revision, binary digest, inline body — is encoded by a path of its own
    /// (``DocumentRecord/encode(into:)``): its bytes are the general encoder's (``DocumentRecord/encode(to:)``)
    /// for deleted and live revisions, bodies of 0–300 bytes (across the varint's 127/128 step), and sequences
    /// and generations of one to ten varint bytes, appended after bytes already in the buffer; and they decode
    /// to the record.
    @Test func aFirstRevisionEncodesAsTheGeneralEncoderDoes() throws {
        var random = SeededRandom(seed: 31)
        var sizes = Array(0...3) + [126, 127, 128, 129, 300]
        // 64 sizes or more, so that the shifts below take every value from 0 to 63.
        for _ in 0..<60 { sizes.append(Int.random(in: 0...300, using: &random)) }
        for (n, size) in sizes.enumerated() {
            let body = (0..<size).map { _ in UInt8.random(in: 0x20...0x7E, using: &random) }
            let shift = UInt64(n % 64)
            // Generations from 1 (shift 63) up, below 10^19, the format's limit (one to ten varint bytes).
            let generation = (UInt64.random(in: 0...UInt64.max, using: &random) >> shift) % 10_000_000_000_000_000_000
            let id = RevisionID(generation: max(1, generation),
                                digest: .binary(high: UInt64.random(in: 0...UInt64.max, using: &random),
                                                low: UInt64.random(in: 0...UInt64.max, using: &random)))
            let record = DocumentRecord(sequence: UInt64.random(in: 0...UInt64.max, using: &random) >> (63 - shift),
                                        tree: RevisionTree(first: id, deleted: n % 3 == 0, body: .inline(body)))
            var general = [UInt8](repeating: 0, count: record.encodedSize)
            general.withUnsafeMutableBytes { record.encode(to: $0) }
            var appended: [UInt8] = [0xAA, 0xBB]
            record.encode(into: &appended)
            #expect(Array(appended.dropFirst(2)) == general, "body of \(size) bytes")
            #expect(record.encoded() == general)
            #expect(try general.withUnsafeBytes { try DocumentRecord(decoding: $0, path: "test") } == record)
        }
    }

    /// The fast path of lean reads takes linear histories (every document never in conflict): on random trees,
    /// linear or not, it reads what the general decoder reads (and takes every intact linear one itself); on
    /// random single-byte changes of their entries, the lean read and the general decoder agree — both fail, or
    /// both give the same record.
    @Test func linearHistoriesReadFastAsTheGeneralDecoderReadsThem() throws {
        for seed in SeededRandom.testSeeds {
            var random = SeededRandom(seed: seed)
            for _ in 0..<300 {
                let record = Self.randomRecord(&random)
                let bytes = record.encoded()
                Self.expectLeanReadAgrees(bytes, context: "seed \(seed), intact")
                let linear = record.tree.revisions.filter(\.isLeaf).count == 1
                    && record.tree.revisions.allSatisfy { if case .binary = $0.id.digest { true } else { false } }
                if linear {
                    var range: Range<Int>?
                    let fast = bytes.withUnsafeBytes { DocumentRecord(linearHistory: $0, bodyOf: nil, at: &range) }
                    #expect(fast != nil, "seed \(seed): an intact linear history left to the general decoder")
                }
                for _ in 0..<8 {
                    var damaged = bytes
                    let i = Int.random(in: 0..<damaged.count, using: &random)
                    damaged[i] = UInt8.random(in: 0...255, using: &random)
                    Self.expectLeanReadAgrees(damaged, context: "seed \(seed), byte \(i) changed")
                }
            }
        }
    }

    /// A scan's flags check (one 8-byte load per varint when the summary fits in 42 bytes) answers what the
    /// summary decoder answers: the flags when the summary decodes with a binary winner digest, else nil — on
    /// every boundary of the varint lengths and the entry's length, intact records, records with 9- and 10-byte
    /// sequence varints (past the word-at-a-time path), ~40 truncations each, single-byte changes, and random
    /// bytes with half their high bits set.
    @Test func scanFlagsCheckAgreesWithTheSummaryDecoder() throws {
        func expectAgreement(_ bytes: [UInt8], _ context: @autoclosure () -> String) {
            bytes.withUnsafeBytes { raw in
                var expected: UInt8?
                if let summary = try? RecordSummary(decoding: raw, path: ""),
                   case .binary = summary.winner.digest {
                    expected = summary.flags
                }
                #expect(RecordSummary.checkedFlags(of: raw) == expected, "\(context())")
            }
        }
        // The boundaries, by hand: each varint 1, 8 (the longest one load finds), 9, 10 or 11 bytes (continuation
        // bytes 0x81, the last 0x01), the binary-digest bit set or not, cut one byte short of the summary, at its
        // end, and at 41, 42 and 43 bytes.
        func varint(_ length: Int) -> [UInt8] { Array(repeating: 0x81, count: length - 1) + [0x01] }
        for sequence in [1, 8, 9, 10, 11] {
            for count in [1, 8, 9, 10, 11] {
                for generation in [1, 8, 9, 10, 11] {
                    for revisionFlags: UInt8 in [0x16, 0x12] {
                        let summary = [0x02] + varint(sequence) + varint(count) + [revisionFlags] + varint(generation)
                            + Self.digest
                        for length in [summary.count - 1, summary.count, 41, 42, 43] {
                            let bytes = length <= summary.count
                                ? Array(summary[..<length])
                                : summary + Array(repeating: 0x80, count: length - summary.count)
                            expectAgreement(bytes, "varints \(sequence)/\(count)/\(generation), revision flags "
                                            + "\(revisionFlags), \(length) bytes")
                        }
                    }
                }
            }
        }
        let fastest = [0x02] + varint(8) + varint(8) + [0x16] + varint(8) + Self.digest
        #expect(fastest.count == 42)
        fastest.withUnsafeBytes { #expect(RecordSummary.checkedFlags(of: $0) == 0x02) }

        for seed in SeededRandom.testSeeds {
            var random = SeededRandom(seed: seed)
            for n in 0..<300 {
                var record = Self.randomRecord(&random)
                if n % 5 == 0 { record.sequence = UInt64.random(in: 1 << 56...UInt64.max, using: &random) }
                let bytes = record.encoded()
                expectAgreement(bytes, "seed \(seed), record \(n), intact")
                for end in stride(from: 0, to: bytes.count, by: max(1, bytes.count / 40)) {
                    expectAgreement(Array(bytes[..<end]), "seed \(seed), record \(n), first \(end) bytes")
                }
                for _ in 0..<8 {
                    var damaged = bytes
                    let i = Int.random(in: 0..<min(damaged.count, 48), using: &random)
                    damaged[i] = UInt8.random(in: 0...255, using: &random)
                    expectAgreement(damaged, "seed \(seed), record \(n), byte \(i) changed")
                }
                let noise = (0..<Int.random(in: 0...64, using: &random)).map { _ in
                    UInt8.random(in: 0...255, using: &random) | (Bool.random(using: &random) ? 0x80 : 0)
                }
                expectAgreement(noise, "seed \(seed), random \(noise)")
            }
        }
    }

    /// A record with a history of 1–25 revisions, mostly linear (binary digests; random deletions; the
    /// winner's body inline, in a chunk or none), sometimes with a second branch or a text digest.
    static func randomRecord(_ random: inout SeededRandom) -> DocumentRecord {
        func digest() -> RevisionID.Digest {
            .binary(high: UInt64.random(in: 0...UInt64.max, using: &random),
                    low: UInt64.random(in: 0...UInt64.max, using: &random))
        }
        let count = Int.random(in: 1...25, using: &random)
        let newest = UInt64(count) + UInt64.random(in: 0...5, using: &random)
        var revisions: [RevisionTree.Revision] = []
        for i in 0..<count {
            let body: StoredBody
            if i > 0 {
                body = .empty
            } else {
                switch Int.random(in: 0...2, using: &random) {
                case 0: body = .empty
                case 1: body = .inline(Array(#"{"n":\#(i)}"#.utf8))
                default: body = .chunk(offset: UInt64.random(in: 1...1 << 40, using: &random))
                }
            }
            revisions.append(RevisionTree.Revision(
                id: RevisionID(generation: newest - UInt64(i), digest: digest()),
                parent: i < count - 1 ? i + 1 : nil, deleted: Bool.random(using: &random), isLeaf: i == 0, body: body))
        }
        if count > 2 && Int.random(in: 0..<4, using: &random) == 0 {
            // A conflicting branch: a second leaf on the oldest revision.
            let parentIndex = count - 1
            revisions.append(RevisionTree.Revision(
                id: RevisionID(generation: revisions[parentIndex].id.generation + 1, digest: digest()),
                parent: parentIndex, deleted: Bool.random(using: &random), isLeaf: true,
                body: .inline(Array(#"{"branch":true}"#.utf8))))
        }
        if Int.random(in: 0..<10, using: &random) == 0, let text = RevisionID("\(newest)-text") {
            revisions[0].id = text
        }
        var tree = RevisionTree(revisions: revisions)
        tree.normalize()
        return DocumentRecord(sequence: UInt64.random(in: 1...1 << 30, using: &random), tree: tree)
    }

    /// The lean read (fast path, then the general decoder) and the general decoder of `bytes` agree: both throw,
    /// or both read the same tree, the lean one without inline bodies but with the winner's body's place.
    static func expectLeanReadAgrees(_ bytes: [UInt8], context: String) {
        bytes.withUnsafeBytes { raw in
            let full = try? DocumentRecord(decoding: raw, path: "test")
            var range: Range<Int>?
            let lean = try? DocumentRecord(decoding: raw, path: "test", bodyOf: nil, at: &range)
            guard let full, let lean else {
                #expect(full == nil && lean == nil, "\(context): one decoder accepted what the other refused")
                return
            }
            #expect(lean.sequence == full.sequence, "\(context)")
            #expect(lean.tree.revisions.count == full.tree.revisions.count, "\(context)")
            for (l, f) in zip(lean.tree.revisions, full.tree.revisions) {
                #expect(l.id == f.id && l.parent == f.parent && l.deleted == f.deleted && l.isLeaf == f.isLeaf,
                        "\(context)")
                switch (l.body, f.body) {
                case (.inline(let leanBody), .inline(let fullBody)):
                    #expect(leanBody.isEmpty, "\(context)")
                    if l.id == full.tree.winner.id {
                        #expect(range.map { Array(raw[$0]) } == fullBody, "\(context): the winner's body range")
                    }
                default: #expect(l.body == f.body, "\(context)")
                }
            }
        }
    }

    /// Both decoders (the general one and the linear-history fast path) report `bytes` as corruption.
    private func expectBothDecodersFail(_ bytes: [UInt8], _ context: String) {
        bytes.withUnsafeBytes { raw in
            expectSofaError(.corruption, "\(context), general decoder") {
                try DocumentRecord(decoding: raw, path: "test")
            }
            var range: Range<Int>?
            expectSofaError(.corruption, "\(context), lean read") {
                try DocumentRecord(decoding: raw, path: "test", bodyOf: nil, at: &range)
            }
        }
    }
}
