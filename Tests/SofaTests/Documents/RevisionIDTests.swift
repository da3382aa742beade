import CXXHash
import Testing

@testable import Sofa

/// XXH3-128 against xxHash's published value, and revision IDs: parsing, printing, ordering, derivation.
@Suite struct RevisionIDTests {
    /// The digest text of XXH3-128 over `bytes`.
    static func hex(_ bytes: [UInt8]) -> String {
        let hash = bytes.withUnsafeBytes { XXH3_128bits($0.baseAddress, $0.count) }
        return RevisionID(generation: 1, digest: .binary(high: hash.high64, low: hash.low64)).digestText
    }

    @Test func xxh3MatchesThePublishedValue() {
        // `xxh128sum` of empty input (xxHash 0.8): the canonical form is the high half, then the low half.
        #expect(Self.hex([]) == "99aa06d3014798d86001c324468d497f")
    }

    /// Every length class XXH3-128 treats apart (1–3, 4–8, 9–16, 17–128, 129–240, over 240 bytes), against the
    /// reference: `xxhash.xxh3_128(data).hexdigest()` of PyPI's python-xxhash (its own copy of xxHash 0.8.x),
    /// which prints the same canonical form, for bytes `(7i + 3) mod 256`.
    @Test func xxh3MatchesTheReferenceForEveryLengthClass() {
        let expected: [(Int, String)] = [
            (1, "22bbb76b211a39ba13e608bc156defed"), (3, "ce31763cbf8245a5a9088dda485b481c"),
            (4, "47197970590746b1788a609154b0fe20"), (8, "e3bc8a5f461715553cd024e3d63a1588"),
            (9, "c72c88247a9a56d7eafab1c7f123109f"), (16, "ce0b9647ab24f88460d75c5e47d40a24"),
            (17, "bfd327edcc2fbd12eeed7654312a26d7"), (128, "1b1962a096bac78bc580008b6c92ac53"),
            (129, "293e4968c4619023bd91ce7ace4d385b"), (240, "ad46c1021b076bc704e0b5f034bee80b"),
            (241, "ac6c3492c3d6b45d8beadd3a8874fe17"), (1000, "6bcc7eff62da44c26c4f14bd97bd9e82"),
        ]
        for (count, digest) in expected {
            let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
            #expect(Self.hex(bytes) == digest, "\(count) bytes")
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
        // The documented input (FORMAT.md §10.1.3): deleted byte, varint parent length, parent text, body.
        #expect(first.description == "1-0b688d9d28e7b60b3cfc249645463af8", "a pinned first revision")
        #expect(first.digestText == Self.hex([0, 0] + body))
        #expect(RevisionID.derived(parent: nil, deleted: true, body: body).digestText == Self.hex([1, 0] + body))
        #expect(RevisionID.derived(parent: nil, deleted: false, body: []).digestText == Self.hex([0, 0]))
        #expect(second.digestText == Self.hex([0, UInt8(first.description.utf8.count)] + Array(first.description.utf8)
                                                  + body))
        let deleted = RevisionID.derived(parent: second, deleted: true, body: [])
        #expect(deleted.generation == 3)
        let parentText = Array(second.description.utf8)
        #expect(deleted.digestText == Self.hex([1, UInt8(parentText.count)] + parentText))
    }
}
