// ICU sort keys of printable-ASCII strings, made without calling ICU: byte for byte what `ucol_getSortKey` writes.
//
// Why this is exact. Under the root collator at tertiary strength (no reordering, no case level or case first,
// alternate non-ignorable, normalization off), every printable ASCII character has one collation element with a
// common secondary weight, and none takes part in a contraction. ICU then writes a string's sort key
// (`CollationKeys::writeSortKeyUpToQuaternary`) as
//
//     primary bytes of each character, in order        (no primary compression: see below)
//     01
//     the run of n common secondaries, compressed:     n - 1 = 33q + r  →  q × 25, then 05 + r
//     01
//     per character, its tertiary weight; a run of c common (05) weights before an uncommon one is one byte,
//     c - 1 = 97q + r → q × 65, then C5 - r; a run at the end of the level: q × 65, then 05 + r
//     00
//
// Primary compression (a lead byte left out when the previous primary had the same compressible lead byte) is
// the one part this does not reproduce: characters whose lead byte ICU compresses are left out of the table, so
// strings holding them go to ICU. None of the printable ASCII characters has one under ICU 72.
//
// Nothing here is assumed from a particular ICU version: the table is read from ICU at first use, one and two
// characters at a time, and a character whose keys do not have the shape above is left out. Before the table is
// used, a set of probe strings is encoded both ways; any difference switches the fast path off for the process.
// `ASCIISortKeyTests` compares the two over random strings and the benchmark's track data.

/// Sort keys of strings made of printable ASCII, written without ICU; anything else is left to ICU.
///
/// Safe from any thread: the table is built once and only read afterwards.
struct ASCIISortKey: Sendable {
    /// Per byte 0–127: the primary bytes (first byte lowest) in bits 0–31, their count in bits 32–39 (0: the
    /// byte is not in the table), the tertiary bytes in bits 40–55 and their count in bits 56–63 (0: common).
    private let entries: [UInt64]

    /// The table of this process's ICU, or `nil` when the fast path is off (ICU unavailable, or a probe string
    /// came out differently from ICU's own key).
    static let shared: ASCIISortKey? = {
        guard let table = ASCIISortKey(readingFrom: ICUCollator.icuSortKey), table.agreesWithICU() else { return nil }
        return table
    }()

    /// Secondary and tertiary common-weight compression constants (ICU's `collationkeys.cpp`).
    private enum Common {
        static let byte: UInt8 = 0x05
        static let secondaryMiddle: UInt8 = 0x25
        static let secondaryMaxCount = 0x21
        static let tertiaryMiddle: UInt8 = 0x65
        static let tertiaryHigh: UInt8 = 0xC5
        static let tertiaryMaxCount = 0x61
    }

    /// Builds the table from `icu`, a function giving ICU's sort key of UTF-8 bytes; `nil` if `icu` fails.
    init?(readingFrom icu: ([UInt8]) -> [UInt8]?) {
        var entries = [UInt64](repeating: 0, count: 128)
        for byte in UInt8(0x20)...UInt8(0x7E) {
            guard let one = icu([byte]), let two = icu([byte, byte]) else { return nil }
            entries[Int(byte)] = Self.entry(single: one, double: two) ?? 0
        }
        self.entries = entries
    }

    /// The table entry for a character whose sort key is `single` and whose doubled sort key is `double`, or
    /// `nil` if these keys do not have the shape the encoder reproduces.
    private static func entry(single: [UInt8], double: [UInt8]) -> UInt64? {
        let levels = single.split(separator: 0x01, omittingEmptySubsequences: false)
        guard levels.count == 3, single.last == 0x00 else { return nil }
        let primary = Array(levels[0]), secondary = Array(levels[1]), tertiary = Array(levels[2].dropLast())
        // An uncommon tertiary starting at or below the high compression byte could be read as a compressed run.
        guard (1...4).contains(primary.count), secondary == [Common.byte], (1...2).contains(tertiary.count),
              tertiary == [Common.byte] || tertiary[0] > Common.tertiaryHigh
        else { return nil }
        let commonTertiary = tertiary == [Common.byte]
        // Two of the character: no compressed lead byte, no contraction.
        let expected = primary + primary + [0x01, Common.byte + 1, 0x01]
            + (commonTertiary ? [Common.byte + 1] : tertiary + tertiary) + [0x00]
        guard double == expected else { return nil }
        var entry = UInt64(primary.count) << 32
        for (i, b) in primary.enumerated() { entry |= UInt64(b) << (8 * i) }
        if !commonTertiary {
            entry |= UInt64(tertiary.count) << 56
            for (i, b) in tertiary.enumerated() { entry |= UInt64(b) << (40 + 8 * i) }
        }
        return entry
    }

    /// Whether every probe string encodes as ICU encodes it: every ordered pair of table characters (a contraction
    /// or prefix rule between two of them would show there), each character between letters of both cases, and
    /// runs long enough to need the middle bytes of both compressions.
    private func agreesWithICU() -> Bool {
        let characters = (UInt8(0x20)...UInt8(0x7E)).filter { entries[Int($0)] != 0 }
        var probes: [[UInt8]] = [[], characters, characters.reversed(), Array(repeating: 0x61, count: 200),
                                 Array(repeating: 0x41, count: 200) + Array(repeating: 0x61, count: 150) + [0x41]]
        for c in characters { probes.append([0x61, c, 0x41, c, c, 0x7A]) }
        for first in characters {
            for second in characters { probes.append([first, second]) }
        }
        for probe in probes {
            var fast: [UInt8] = []
            let made = probe.withUnsafeBufferPointer { append(utf8: $0, to: &fast) }
            guard made, fast == ICUCollator.icuSortKey(probe) else { return false }
        }
        return true
    }

    /// Appends the sort key of `utf8` (with its final 0x00) to `buffer` and returns `true`, or returns `false`
    /// and leaves `buffer` as it was if a byte is not in the table (then ICU must make the key).
    @inline(__always)
    func append(utf8: UnsafeBufferPointer<UInt8>, to buffer: inout [UInt8]) -> Bool {
        // The same length limit as ICU's path, so whether a string gets a key never depends on its characters.
        guard utf8.count <= ICUCollator.maximumStringLength else { return false }
        return entries.withUnsafeBufferPointer { entries in append(utf8: utf8, to: &buffer, table: entries) }
    }

    @inline(__always)
    private func append(utf8: UnsafeBufferPointer<UInt8>, to buffer: inout [UInt8],
                        table entries: UnsafeBufferPointer<UInt64>) -> Bool {
        var primaryLength = 0
        for byte in utf8 {
            guard byte < 0x80 else { return false }
            let length = Int(truncatingIfNeeded: entries[Int(byte)] >> 32) & 0xFF
            guard length != 0 else { return false }
            primaryLength += length
        }
        let n = utf8.count
        let secondaryLength = n == 0 ? 0 : (n - 1) / Common.secondaryMaxCount + 1
        // Tertiary: at most two bytes per character and one count byte before each; 4 bytes of slack for
        // the whole-word stores below.
        let capacity = primaryLength + secondaryLength + 3 * n + 3 + 4
        buffer.append(addingCapacity: capacity) { span in
            span.withUnsafeMutableBufferPointer { out, initialized in
                // `out` has `capacity` bytes: every store below stays within the bound computed above.
                let base = UnsafeMutableRawPointer(out.baseAddress!)
                var p = 0
                var t = primaryLength + 1 + secondaryLength + 1
                var commons = 0
                for byte in utf8 {
                    let entry = entries[Int(byte)]
                    // Four bytes, of which the next primary (or the separator) overwrites the unused ones: the
                    // last store ends at most at primaryLength + 2, before the first tertiary byte.
                    base.storeBytes(of: UInt32(truncatingIfNeeded: entry).littleEndian, toByteOffset: p,
                                    as: UInt32.self)
                    p += Int(truncatingIfNeeded: entry >> 32) & 0xFF
                    let tertiaryLength = Int(truncatingIfNeeded: entry >> 56)
                    if tertiaryLength == 0 {
                        commons += 1
                        continue
                    }
                    if commons != 0 {
                        writeCommonRun(base, &t, commons) { Common.tertiaryHigh - UInt8($0) }
                        commons = 0
                    }
                    base.storeBytes(of: UInt16(truncatingIfNeeded: entry >> 40).littleEndian, toByteOffset: t,
                                    as: UInt16.self)
                    t += tertiaryLength
                }
                if commons != 0 { writeCommonRun(base, &t, commons) { Common.byte + UInt8($0) } }
                base.storeBytes(of: 0x00 as UInt8, toByteOffset: t, as: UInt8.self)
                // The secondary level between the two separators: every weight is common.
                base.storeBytes(of: 0x01 as UInt8, toByteOffset: p, as: UInt8.self)
                p += 1
                if n != 0 {
                    for _ in 1..<secondaryLength {
                        base.storeBytes(of: Common.secondaryMiddle, toByteOffset: p, as: UInt8.self)
                        p += 1
                    }
                    let rest = (n - 1) % Common.secondaryMaxCount
                    base.storeBytes(of: Common.byte + UInt8(rest), toByteOffset: p, as: UInt8.self)
                    p += 1
                }
                base.storeBytes(of: 0x01 as UInt8, toByteOffset: p, as: UInt8.self)
                initialized = t + 1
            }
        }
        return true
    }

    /// Writes a run of `count` common tertiary weights at `t`: a middle byte per full 97, then `last(rest)`
    /// (counting down from the high byte before an uncommon weight, up from the common byte at the level's end).
    @inline(__always)
    private func writeCommonRun(_ base: UnsafeMutableRawPointer, _ t: inout Int, _ count: Int,
                                last: (Int) -> UInt8) {
        var rest = count - 1
        while rest >= Common.tertiaryMaxCount {
            base.storeBytes(of: Common.tertiaryMiddle, toByteOffset: t, as: UInt8.self)
            t += 1
            rest -= Common.tertiaryMaxCount
        }
        base.storeBytes(of: last(rest), toByteOffset: t, as: UInt8.self)
        t += 1
    }
}
