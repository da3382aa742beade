/// MD5 (RFC 1321), used only to derive revision-ID digests, as CouchDB does.
///
/// MD5 is broken for security but not for this job: a revision digest must be the same on every replica that
/// makes the same edit and differ, with overwhelming probability, between different edits — nobody gains by
/// forging one. Choosing CouchDB's function keeps digests 32 lowercase hex characters, the form replicators
/// expect. Streaming, so the parts of a digest's input are hashed without being concatenated first.
struct MD5 {
    private var a: UInt32 = 0x6745_2301
    private var b: UInt32 = 0xEFCD_AB89
    private var c: UInt32 = 0x98BA_DCFE
    private var d: UInt32 = 0x1032_5476
    /// Bytes of an incomplete 64-byte block; `buffered` of them are in use.
    private var block = [UInt8](repeating: 0, count: 64)
    private var buffered = 0
    private var length: UInt64 = 0

    init() {}

    /// Per-step left-rotation amounts (RFC 1321 §3.4).
    private static let shifts: [UInt32] = [
        7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
        5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20,
        4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
        6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
    ]

    /// floor(abs(sin(i + 1)) × 2^32), i = 0 ..< 64 (RFC 1321 §3.4).
    private static let constants: [UInt32] = [
        0xD76A_A478, 0xE8C7_B756, 0x2420_70DB, 0xC1BD_CEEE, 0xF57C_0FAF, 0x4787_C62A, 0xA830_4613, 0xFD46_9501,
        0x6980_98D8, 0x8B44_F7AF, 0xFFFF_5BB1, 0x895C_D7BE, 0x6B90_1122, 0xFD98_7193, 0xA679_438E, 0x49B4_0821,
        0xF61E_2562, 0xC040_B340, 0x265E_5A51, 0xE9B6_C7AA, 0xD62F_105D, 0x0244_1453, 0xD8A1_E681, 0xE7D3_FBC8,
        0x21E1_CDE6, 0xC337_07D6, 0xF4D5_0D87, 0x455A_14ED, 0xA9E3_E905, 0xFCEF_A3F8, 0x676F_02D9, 0x8D2A_4C8A,
        0xFFFA_3942, 0x8771_F681, 0x6D9D_6122, 0xFDE5_380C, 0xA4BE_EA44, 0x4BDE_CFA9, 0xF6BB_4B60, 0xBEBF_BC70,
        0x289B_7EC6, 0xEAA1_27FA, 0xD4EF_3085, 0x0488_1D05, 0xD9D4_D039, 0xE6DB_99E5, 0x1FA2_7CF8, 0xC4AC_5665,
        0xF429_2244, 0x432A_FF97, 0xAB94_23A7, 0xFC93_A039, 0x655B_59C3, 0x8F0C_CC92, 0xFFEF_F47D, 0x8584_5DD1,
        0x6FA8_7E4F, 0xFE2C_E6E0, 0xA301_4314, 0x4E08_11A1, 0xF753_7E82, 0xBD3A_F235, 0x2AD7_D2BB, 0xEB86_D391,
    ]

    /// Hashes more input.
    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        length &+= UInt64(bytes.count)
        var input = bytes[...]
        if buffered > 0 {
            let take = min(64 - buffered, input.count)
            for i in 0..<take { block[buffered + i] = input[input.startIndex + i] }
            buffered += take
            input = input.dropFirst(take)
            guard buffered == 64 else { return }
            block.withUnsafeBytes { compress($0) }
            buffered = 0
        }
        while input.count >= 64 {
            compress(UnsafeRawBufferPointer(rebasing: input.prefix(64)))
            input = input.dropFirst(64)
        }
        for (i, byte) in input.enumerated() { block[i] = byte }
        buffered = input.count
    }

    /// Hashes more input.
    mutating func update(_ bytes: [UInt8]) { bytes.withUnsafeBytes { update($0) } }

    /// Pads, finishes and returns the 16-byte digest as two big-endian halves (so comparing the pairs compares
    /// the digests' hex text).
    mutating func finish() -> (high: UInt64, low: UInt64) {
        let bits = length &* 8
        block[buffered] = 0x80
        for i in (buffered + 1)..<64 { block[i] = 0 }
        if buffered >= 56 {
            block.withUnsafeBytes { compress($0) }
            for i in 0..<56 { block[i] = 0 }
        }
        for i in 0..<8 { block[56 + i] = UInt8(truncatingIfNeeded: bits >> (8 * UInt64(i))) }
        block.withUnsafeBytes { compress($0) }
        // Each word's bytes are stored little-endian; read as big-endian text order they are byte-swapped.
        let high = UInt64(a.byteSwapped) << 32 | UInt64(b.byteSwapped)
        return (high, UInt64(c.byteSwapped) << 32 | UInt64(d.byteSwapped))
    }

    /// One 64-byte block (RFC 1321 §3.4), as four loops of 16 steps (one per round function) so each loop body
    /// is branch-free; words are loaded straight from the block, with no per-block allocation.
    private mutating func compress(_ chunk: UnsafeRawBufferPointer) {
        var (aa, bb, cc, dd) = (a, b, c, d)
        @inline(__always) func word(_ g: Int) -> UInt32 {
            UInt32(littleEndian: chunk.loadUnaligned(fromByteOffset: 4 * g, as: UInt32.self))
        }
        @inline(__always) func step(_ f: UInt32, _ i: Int, _ g: Int) {
            let sum = f &+ aa &+ MD5.constants[i] &+ word(g)
            let s = MD5.shifts[i]
            (aa, dd, cc) = (dd, cc, bb)
            bb = bb &+ ((sum << s) | (sum >> (32 - s)))
        }
        for i in 0..<16 { step((bb & cc) | (~bb & dd), i, i) }
        for i in 16..<32 { step((dd & bb) | (~dd & cc), i, (5 * i + 1) & 15) }
        for i in 32..<48 { step(bb ^ cc ^ dd, i, (3 * i + 5) & 15) }
        for i in 48..<64 { step(cc ^ (bb | ~dd), i, (7 * i) & 15) }
        a &+= aa
        b &+= bb
        c &+= cc
        d &+= dd
    }
}
