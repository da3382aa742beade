import Testing

@testable import Sofa

/// `String(storedUTF8:)`, which builds the IDs of scanned rows: the same string `String(decoding:as:)` gives,
/// invalid sequences repaired alike.
@Suite struct StoredUTF8Tests {
    @Test func matchesDecodingForValidAndInvalidUTF8() {
        let samples: [[UInt8]] = [
            [], Array("track-00000001".utf8), Array("a longer ID than a small string holds".utf8),
            Array("é ☃ 𝄞".utf8), [0x61, 0xFF, 0x62], [0xE2, 0x98], [0xC0, 0x80, 0x41], [0xED, 0xA0, 0x80],
        ]
        for bytes in samples {
            bytes.withUnsafeBytes { raw in
                #expect(String(storedUTF8: raw) == String(decoding: raw, as: UTF8.self), "\(bytes)")
                #expect(Array(String(storedUTF8: raw).utf8) == Array(String(decoding: raw, as: UTF8.self).utf8))
            }
        }
    }
}
