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
    /// Bytes of an incomplete 64-byte block, `buffered` of them in use: inline storage (eight words), so a
    /// digest allocates nothing.
    private var block: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
    private var buffered = 0
    private var length: UInt64 = 0

    init() {}

    /// Hashes more input.
    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard var input = bytes.baseAddress else { return }
        var count = bytes.count
        length &+= UInt64(count)
        if buffered > 0 {
            let take = min(64 - buffered, count)
            let at = buffered
            withUnsafeMutableBytes(of: &block) { $0.baseAddress!.advanced(by: at).copyMemory(from: input, byteCount: take) }
            buffered += take
            input += take
            count -= take
            guard buffered == 64 else { return }
            compressBlock()
            buffered = 0
        }
        while count >= 64 {
            compress(input)
            input += 64
            count -= 64
        }
        if count > 0 {
            let rest = count
            withUnsafeMutableBytes(of: &block) { $0.baseAddress!.copyMemory(from: input, byteCount: rest) }
        }
        buffered = count
    }

    /// Hashes more input.
    mutating func update(_ bytes: [UInt8]) { bytes.withUnsafeBytes { update($0) } }

    /// Pads, finishes and returns the 16-byte digest as two big-endian halves (so comparing the pairs compares
    /// the digests' hex text).
    mutating func finish() -> (high: UInt64, low: UInt64) {
        let bits = length &* 8
        let used = buffered
        withUnsafeMutableBytes(of: &block) { block in
            block[used] = 0x80
            for i in (used + 1)..<64 { block[i] = 0 }
        }
        if used >= 56 {
            compressBlock()
            block = (0, 0, 0, 0, 0, 0, 0, 0)
        }
        block.7 = bits.littleEndian
        compressBlock()
        // Each word's bytes are stored little-endian; read as big-endian text order they are byte-swapped.
        let high = UInt64(a.byteSwapped) << 32 | UInt64(b.byteSwapped)
        return (high, UInt64(c.byteSwapped) << 32 | UInt64(d.byteSwapped))
    }

    /// Compresses the buffered block.
    private mutating func compressBlock() {
        var copy = block
        withUnsafeBytes(of: &copy) { compress($0.baseAddress!) }
    }

    // The four round functions with their step (RFC 1321 §3.4): a = b + ((a + F(b,c,d) + x + t) <<< s).
    @inline(__always) private func f(_ a: inout UInt32, _ b: UInt32, _ c: UInt32, _ d: UInt32, _ x: UInt32, _ s: UInt32, _ t: UInt32) {
        a = b &+ rotate(a &+ ((b & c) | (~b & d)) &+ x &+ t, s)
    }
    @inline(__always) private func g(_ a: inout UInt32, _ b: UInt32, _ c: UInt32, _ d: UInt32, _ x: UInt32, _ s: UInt32, _ t: UInt32) {
        a = b &+ rotate(a &+ ((d & b) | (~d & c)) &+ x &+ t, s)
    }
    @inline(__always) private func h(_ a: inout UInt32, _ b: UInt32, _ c: UInt32, _ d: UInt32, _ x: UInt32, _ s: UInt32, _ t: UInt32) {
        a = b &+ rotate(a &+ (b ^ c ^ d) &+ x &+ t, s)
    }
    @inline(__always) private func i(_ a: inout UInt32, _ b: UInt32, _ c: UInt32, _ d: UInt32, _ x: UInt32, _ s: UInt32, _ t: UInt32) {
        a = b &+ rotate(a &+ (c ^ (b | ~d)) &+ x &+ t, s)
    }
    @inline(__always) private func rotate(_ v: UInt32, _ s: UInt32) -> UInt32 { (v << s) | (v >> (32 - s)) }

    /// One 64-byte block at `chunk` (RFC 1321 §3.4): the 64 steps written out with their shift amounts and
    /// sine constants (floor(abs(sin(i + 1)) × 2^32)), so nothing is looked up in a table or bounds-checked.
    private mutating func compress(_ chunk: UnsafeRawPointer) {
        @inline(__always) func word(_ g: Int) -> UInt32 {
            UInt32(littleEndian: chunk.loadUnaligned(fromByteOffset: 4 * g, as: UInt32.self))
        }
        let (x0, x1, x2, x3, x4, x5, x6, x7) = (word(0), word(1), word(2), word(3), word(4), word(5), word(6), word(7))
        let (x8, x9, x10, x11, x12, x13, x14, x15) =
            (word(8), word(9), word(10), word(11), word(12), word(13), word(14), word(15))
        var (a, b, c, d) = (self.a, self.b, self.c, self.d)
        f(&a, b, c, d, x0, 7, 0xD76A_A478)
        f(&d, a, b, c, x1, 12, 0xE8C7_B756)
        f(&c, d, a, b, x2, 17, 0x2420_70DB)
        f(&b, c, d, a, x3, 22, 0xC1BD_CEEE)
        f(&a, b, c, d, x4, 7, 0xF57C_0FAF)
        f(&d, a, b, c, x5, 12, 0x4787_C62A)
        f(&c, d, a, b, x6, 17, 0xA830_4613)
        f(&b, c, d, a, x7, 22, 0xFD46_9501)
        f(&a, b, c, d, x8, 7, 0x6980_98D8)
        f(&d, a, b, c, x9, 12, 0x8B44_F7AF)
        f(&c, d, a, b, x10, 17, 0xFFFF_5BB1)
        f(&b, c, d, a, x11, 22, 0x895C_D7BE)
        f(&a, b, c, d, x12, 7, 0x6B90_1122)
        f(&d, a, b, c, x13, 12, 0xFD98_7193)
        f(&c, d, a, b, x14, 17, 0xA679_438E)
        f(&b, c, d, a, x15, 22, 0x49B4_0821)
        g(&a, b, c, d, x1, 5, 0xF61E_2562)
        g(&d, a, b, c, x6, 9, 0xC040_B340)
        g(&c, d, a, b, x11, 14, 0x265E_5A51)
        g(&b, c, d, a, x0, 20, 0xE9B6_C7AA)
        g(&a, b, c, d, x5, 5, 0xD62F_105D)
        g(&d, a, b, c, x10, 9, 0x0244_1453)
        g(&c, d, a, b, x15, 14, 0xD8A1_E681)
        g(&b, c, d, a, x4, 20, 0xE7D3_FBC8)
        g(&a, b, c, d, x9, 5, 0x21E1_CDE6)
        g(&d, a, b, c, x14, 9, 0xC337_07D6)
        g(&c, d, a, b, x3, 14, 0xF4D5_0D87)
        g(&b, c, d, a, x8, 20, 0x455A_14ED)
        g(&a, b, c, d, x13, 5, 0xA9E3_E905)
        g(&d, a, b, c, x2, 9, 0xFCEF_A3F8)
        g(&c, d, a, b, x7, 14, 0x676F_02D9)
        g(&b, c, d, a, x12, 20, 0x8D2A_4C8A)
        h(&a, b, c, d, x5, 4, 0xFFFA_3942)
        h(&d, a, b, c, x8, 11, 0x8771_F681)
        h(&c, d, a, b, x11, 16, 0x6D9D_6122)
        h(&b, c, d, a, x14, 23, 0xFDE5_380C)
        h(&a, b, c, d, x1, 4, 0xA4BE_EA44)
        h(&d, a, b, c, x4, 11, 0x4BDE_CFA9)
        h(&c, d, a, b, x7, 16, 0xF6BB_4B60)
        h(&b, c, d, a, x10, 23, 0xBEBF_BC70)
        h(&a, b, c, d, x13, 4, 0x289B_7EC6)
        h(&d, a, b, c, x0, 11, 0xEAA1_27FA)
        h(&c, d, a, b, x3, 16, 0xD4EF_3085)
        h(&b, c, d, a, x6, 23, 0x0488_1D05)
        h(&a, b, c, d, x9, 4, 0xD9D4_D039)
        h(&d, a, b, c, x12, 11, 0xE6DB_99E5)
        h(&c, d, a, b, x15, 16, 0x1FA2_7CF8)
        h(&b, c, d, a, x2, 23, 0xC4AC_5665)
        i(&a, b, c, d, x0, 6, 0xF429_2244)
        i(&d, a, b, c, x7, 10, 0x432A_FF97)
        i(&c, d, a, b, x14, 15, 0xAB94_23A7)
        i(&b, c, d, a, x5, 21, 0xFC93_A039)
        i(&a, b, c, d, x12, 6, 0x655B_59C3)
        i(&d, a, b, c, x3, 10, 0x8F0C_CC92)
        i(&c, d, a, b, x10, 15, 0xFFEF_F47D)
        i(&b, c, d, a, x1, 21, 0x8584_5DD1)
        i(&a, b, c, d, x8, 6, 0x6FA8_7E4F)
        i(&d, a, b, c, x15, 10, 0xFE2C_E6E0)
        i(&c, d, a, b, x6, 15, 0xA301_4314)
        i(&b, c, d, a, x13, 21, 0x4E08_11A1)
        i(&a, b, c, d, x4, 6, 0xF753_7E82)
        i(&d, a, b, c, x11, 10, 0xBD3A_F235)
        i(&c, d, a, b, x2, 15, 0x2AD7_D2BB)
        i(&b, c, d, a, x9, 21, 0xEB86_D391)
        self.a &+= a
        self.b &+= b
        self.c &+= c
        self.d &+= d
    }
}
