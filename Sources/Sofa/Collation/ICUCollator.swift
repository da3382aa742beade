import CSofaICU

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// ICU's root collator at its default (tertiary) strength: the string order of Sofa's collation (DESIGN.md §2).
///
/// Every call is safe from any thread: the C side (`Sources/CSofaICU`) clones the root collator once per thread,
/// because a `UCollator` must not be used by two threads at once. Swift never sees an ICU type or header here
/// (TOOLCHAIN.md: Foundation carries its own ICU, and the two sets of headers cannot meet in one module).
///
/// Facts of this order that the rest of Sofa relies on, all checked by `ICUCollationTests`:
/// - symbols before digits before letters, lowercase before uppercase only as a tie-break:
///   `"~" < "1" < "a" < "A" < "aa" < "b" < "B"`;
/// - accents are a secondary difference: `"resume" < "résumé" < "Résumé" < "resumes"`;
/// - completely ignorable code points (U+0000 and most other control characters) have no weight at all, so
///   `"a\u{0}b"` collates equal to `"ab"`, and the two have identical sort keys;
/// - a sort key never contains `0x00` except its last byte, and `0x01` only as its two level separators.
enum ICUCollator {
    /// The collator's version (`ucol_getVersion`, 4 bytes). Sort keys made by collators of different versions
    /// must not be mixed, so index files record it (DESIGN.md §2).
    static let version: [UInt8] = {
        var v: (UInt8, UInt8, UInt8, UInt8) = (0, 0, 0, 0)
        _ = withUnsafeMutableBytes(of: &v) { raw in
            sofa_icu_collator_version(raw.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        return [v.0, v.1, v.2, v.3]
    }()

    /// The ICU library's version (`u_getVersion`, 4 bytes): for diagnostics; ``version`` is what keys depend on.
    static let libraryVersion: [UInt8] = {
        var v: (UInt8, UInt8, UInt8, UInt8) = (0, 0, 0, 0)
        withUnsafeMutableBytes(of: &v) { raw in
            sofa_icu_library_version(raw.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        return [v.0, v.1, v.2, v.3]
    }()

    /// Compares two strings with `ucol_strcollUTF8`: -1, 0 or 1, in the same order as their sort keys.
    ///
    /// Returns 0 if ICU fails (it cannot open its collator); ``appendSortKey(of:to:)`` reports that failure.
    static func compare(_ a: String, _ b: String) -> Int {
        var a = a, b = b
        return a.withUTF8 { pa in
            b.withUTF8 { pb in
                // Identical bytes always collate equal. Neighbouring index rows mostly share their leading key
                // items, so this skips ICU for most strings compared while walking sorted keys.
                if pa.count == pb.count, pa.count == 0 || memcmp(pa.baseAddress!, pb.baseAddress!, pa.count) == 0 {
                    return 0
                }
                return Int(sofa_icu_compare(pa.baseAddress, Int32(pa.count), pb.baseAddress, Int32(pb.count)))
            }
        }
    }

    /// The sort key of `string` as a new array, including its terminating `0x00`; `nil` if ICU fails.
    static func sortKey(_ string: String) -> [UInt8]? {
        var key: [UInt8] = []
        return appendSortKey(of: string, to: &key) ? key : nil
    }

    /// Appends the sort key of `string`, including its terminating `0x00`, to `buffer`.
    ///
    /// ICU writes straight into the array's spare capacity, so a caller that reuses one buffer makes no
    /// allocation at all. Returns `false`, leaving `buffer` as it was, if ICU fails (it could not open its
    /// collator or allocate) or the string is too long for ICU's 32-bit lengths.
    @inline(__always)
    static func appendSortKey(of string: String, to buffer: inout [UInt8]) -> Bool {
        var string = string
        return string.withUTF8 { utf8 in appendSortKey(utf8: utf8, to: &buffer) }
    }

    /// ``appendSortKey(of:to:)`` for UTF-8 bytes (which must be valid UTF-8, as a Swift string's are).
    ///
    /// Strings of printable ASCII take ``ASCIISortKey``'s path, which writes ICU's bytes without calling ICU.
    @inline(__always)
    static func appendSortKey(utf8: UnsafeBufferPointer<UInt8>, to buffer: inout [UInt8]) -> Bool {
        if let ascii = ASCIISortKey.shared, ascii.append(utf8: utf8, to: &buffer) { return true }
        return appendICUSortKey(utf8: utf8, to: &buffer)
    }

    /// ICU's own sort key of `utf8` as a new array (never the ASCII path): what ``ASCIISortKey`` is built from and
    /// checked against. `nil` if ICU fails.
    static func icuSortKey(_ utf8: [UInt8]) -> [UInt8]? {
        var key: [UInt8] = []
        let made = utf8.withUnsafeBufferPointer { appendICUSortKey(utf8: $0, to: &key) }
        return made ? key : nil
    }

    /// The longest string, in UTF-8 bytes, that gets a sort key: a quarter of `Int32.max` leaves room for ICU's
    /// UTF-16 copy and for keys longer than their text.
    static let maximumStringLength = Int(Int32.max / 4)

    /// ``appendSortKey(utf8:to:)`` by ICU, whatever the string.
    static func appendICUSortKey(utf8: UnsafeBufferPointer<UInt8>, to buffer: inout [UInt8]) -> Bool {
        guard utf8.count <= maximumStringLength else { return false }
        // Measured on ICU 72: lowercase ASCII needs length + 5 bytes, all-caps 2 × length + 4, CJK about
        // 2 × length / 3 + 5. Rare expansions (U+FDFA: 3 bytes of text, 47 of key) take a second call.
        var capacity = 2 * utf8.count + 16
        while true {
            var needed: Int32 = 0
            buffer.append(addingCapacity: capacity) { span in
                span.withUnsafeMutableBufferPointer { out, initialized in
                    needed = sofa_icu_sort_key(utf8.baseAddress, Int32(utf8.count), out.baseAddress, Int32(out.count))
                    // ICU reports the full length even when it did not fit; keep nothing from such a call.
                    if needed > 0 && Int(needed) <= out.count { initialized = Int(needed) }
                }
            }
            if needed <= 0 { return false }
            if Int(needed) <= capacity { return true }
            capacity = Int(needed)
        }
    }
}
