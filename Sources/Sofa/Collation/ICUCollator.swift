import CSofaICU

/// ICU's root collator at its default (tertiary) strength: the string order of Sofa's collation.
///
/// Every call is safe from any thread (the C side keeps one collator clone per thread).
enum ICUCollator {
    /// The collator's version. Sort keys made by collators of different versions must not be mixed, so
    /// index files record it (DESIGN.md §2).
    static let version: [UInt8] = {
        var v: (UInt8, UInt8, UInt8, UInt8) = (0, 0, 0, 0)
        _ = withUnsafeMutableBytes(of: &v) { sofa_icu_collator_version($0.baseAddress!.assumingMemoryBound(to: UInt8.self)) }
        return [v.0, v.1, v.2, v.3]
    }()

    /// Compares two strings: negative, zero or positive.
    static func compare(_ a: String, _ b: String) -> Int {
        var a = a, b = b
        return a.withUTF8 { pa in
            b.withUTF8 { pb in
                Int(sofa_icu_compare(pa.baseAddress, Int32(pa.count), pb.baseAddress, Int32(pb.count)))
            }
        }
    }
}
