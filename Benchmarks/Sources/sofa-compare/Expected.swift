/// gen.py's reference answers (expected.json), and the checksums that reproduce them from engine output.
///
/// gen.py computes every answer from a sorted Python list, independently of any engine. An engine's
/// answer is rendered in the same text format (`rows=… sum=…`) and compared as a string.
struct Expected {
    /// The number of documents (rows) in the set.
    let n: Int
    /// The checksum text per workload, keyed "W2" … "W7".
    let answers: [String: String]

    /// Extracts `n` and the `"W2"` … `"W7"` strings from expected.json.
    ///
    /// The file is gen.py's own `json.dump` output with flat string and number members; a full JSON parser
    /// would pull Foundation (or Sofa's parser under test) into the runner for six fields.
    /// - Throws: ``CompareError`` when a member is missing.
    init(json: [UInt8]) throws {
        let text = String(decoding: json, as: UTF8.self)
        var answers: [String: String] = [:]
        for workload in ["W2", "W3", "W4", "W5", "W6", "W7"] {
            guard let value = Expected.member(workload, in: text), value.hasPrefix("\"") else {
                throw CompareError("expected.json has no string member \"\(workload)\"")
            }
            answers[workload] = String(value.dropFirst().prefix { $0 != "\"" })
        }
        guard let nText = Expected.member("n", in: text), let n = Int(nText.prefix { $0.isNumber }) else {
            throw CompareError("expected.json has no number member \"n\"")
        }
        self.n = n
        self.answers = answers
    }

    /// The raw text after `"name":` and optional spaces.
    private static func member(_ name: String, in text: String) -> Substring? {
        guard let range = text.firstRange(of: "\"\(name)\":") else { return nil }
        return text[range.upperBound...].drop { $0 == " " }
    }
}

/// The row checksum of W2 and W7: gen.py's `h_rows`, an FNV-style fold of `(crc32(docID) << 16) ^ value`.
struct RowHash {
    /// The number of rows folded in.
    private(set) var rows = 0
    /// The running hash.
    private(set) var value: UInt64 = 0

    private static let fnvPrime: UInt64 = 0x100000001B3

    /// Folds in one row given its full key (the doc ID is its last part) and value.
    @inline(__always)
    mutating func add(key: UnsafeRawBufferPointer, value rowValue: UInt32) {
        let crc = UInt64(CRC32.checksum(KeyEncoding.docID(of: key)))
        value = (value ^ ((crc << 16) ^ UInt64(rowValue))) &* RowHash.fnvPrime
        rows += 1
    }

    /// Rendered as in expected.json: `rows=N h=<16 hex digits>`.
    var text: String {
        let hex = String(value, radix: 16)
        return "rows=\(rows) h=" + String(repeating: "0", count: 16 - hex.count) + hex
    }
}

/// zlib's CRC-32 (polynomial 0xEDB88320), as Python's `zlib.crc32`; only W2/W7 checksums use it.
enum CRC32 {
    private static let table: [UInt32] = (0 ..< 256).map { n in
        var c = UInt32(n)
        for _ in 0 ..< 8 {
            c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1
        }
        return c
    }

    /// The CRC-32 of `bytes`.
    static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        table.withUnsafeBufferPointer { table in
            for byte in bytes {
                c = table[Int((c ^ UInt32(byte)) & 0xFF)] ^ (c >> 8)
            }
        }
        return c ^ 0xFFFF_FFFF
    }
}
