import Testing

@testable import Sofa

/// MD5 against RFC 1321's test suite, and revision IDs: parsing, printing, ordering, derivation.
@Suite struct RevisionIDTests {
    static func hex(_ text: String) -> String {
        var md5 = MD5()
        md5.update(Array(text.utf8))
        let (high, low) = md5.finish()
        return RevisionID(generation: 1, digest: .md5(high: high, low: low)).digestText
    }

    @Test func md5MatchesRFC1321() {
        #expect(Self.hex("") == "d41d8cd98f00b204e9800998ecf8427e")
        #expect(Self.hex("a") == "0cc175b9c0f1b6a831c399e269772661")
        #expect(Self.hex("abc") == "900150983cd24fb0d6963f7d28e17f72")
        #expect(Self.hex("message digest") == "f96b697d7cb7938d525a2f31aaf161d0")
        #expect(Self.hex("abcdefghijklmnopqrstuvwxyz") == "c3fcd3d76192e4007dfb496cca67e13b")
        #expect(Self.hex("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
                == "d174ab98d277d9f5a5611c2c9f419d9f")
        #expect(Self.hex(String(repeating: "1234567890", count: 8)) == "57edf4a22be3c955ac49da2e2107b67a")
    }

    @Test func md5StreamingEqualsOneShot() {
        var random = SeededRandom(seed: 7)
        for length in [0, 1, 55, 56, 63, 64, 65, 127, 128, 1000] {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &random) }
            var whole = MD5()
            whole.update(bytes)
            var pieces = MD5()
            var i = 0
            while i < bytes.count {
                let n = min(Int.random(in: 1...70, using: &random), bytes.count - i)
                pieces.update(Array(bytes[i..<(i + n)]))
                i += n
            }
            let a = whole.finish(), b = pieces.finish()
            #expect(a.high == b.high && a.low == b.low, "length \(length)")
        }
    }

    @Test func parsesAndPrints() throws {
        let md5 = try #require(RevisionID("3-0123456789abcdef0123456789abcdef"))
        #expect(md5.generation == 3 && md5.isBinary)
        #expect(md5.description == "3-0123456789abcdef0123456789abcdef")
        let text = try #require(RevisionID("12-Foreign-digest"))
        #expect(text.generation == 12 && !text.isBinary && text.description == "12-Foreign-digest")
        for bad in ["", "1", "1-", "-abc", "0-abc", "01-abc", "x-abc", "1x-abc", "99999999999999999999-a",
                    "1-" + String(repeating: "a", count: 300)] {
            #expect(RevisionID(bad) == nil, "\(bad) should not parse")
        }
    }

    @Test func ordersByGenerationThenDigestText() throws {
        let ids = ["1-ffff", "2-0000", "2-00000000000000000000000000000001", "2-a", "10-0"].map { RevisionID($0)! }
        #expect(ids.sorted().map(\.description) == ["1-ffff", "2-0000", "2-00000000000000000000000000000001", "2-a",
                                                   "10-0"])
        let a = try #require(RevisionID("4-9a000000000000000000000000000000"))
        let b = try #require(RevisionID("4-9b"))
        #expect(a < b, "a binary digest compares with a text digest by its hex text")
    }

    @Test func derivedIDsDependOnParentDeletionAndBody() {
        let body = Array(#"{"a":1}"#.utf8)
        let first = RevisionID.derived(parent: nil, deleted: false, body: body)
        #expect(first.generation == 1)
        #expect(first == RevisionID.derived(parent: nil, deleted: false, body: body), "deterministic")
        #expect(first != RevisionID.derived(parent: nil, deleted: true, body: body))
        #expect(first != RevisionID.derived(parent: nil, deleted: false, body: Array(#"{"a":2}"#.utf8)))
        let second = RevisionID.derived(parent: first, deleted: false, body: body)
        #expect(second.generation == 2 && second != first)
        // The documented input: deleted byte, varint parent length, parent text, body.
        var md5 = MD5()
        md5.update([0, UInt8(first.description.utf8.count)] + Array(first.description.utf8) + body)
        let (high, low) = md5.finish()
        #expect(second.digest == .md5(high: high, low: low))
    }
}
