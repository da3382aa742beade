import Testing

@testable import Sofa

/// ICU's root order as Sofa relies on it (DESIGN.md §2). The expected orders were read off ICU 72's root
/// collator (`ucol_strcollUTF8` on a sorted list) and match the Unicode Collation Algorithm's DUCET.
@Suite struct ICUCollationTests {
    /// Asserts that `ordered` is strictly increasing by `ICUCollator.compare` and by sort-key bytes, for every
    /// pair, not just neighbours.
    private func expectStrictOrder(_ ordered: [String], sourceLocation: SourceLocation = #_sourceLocation) {
        let keys = ordered.map { ICUCollator.sortKey($0)! }
        for i in ordered.indices {
            for j in ordered.indices {
                let expected = i < j ? -1 : (i == j ? 0 : 1)
                #expect(ICUCollator.compare(ordered[i], ordered[j]) == expected,
                        "compare(\(ordered[i]), \(ordered[j]))", sourceLocation: sourceLocation)
                #expect(byteOrder(keys[i], keys[j]) == expected,
                        "sort keys of \(ordered[i]) and \(ordered[j])", sourceLocation: sourceLocation)
            }
        }
    }

    @Test func designOrder() {
        expectStrictOrder(["~", "1", "a", "A", "aa", "b", "B"])
    }

    @Test func symbolsThenCurrencyThenDigitsThenLetters() {
        expectStrictOrder([
            "", " ", "_", "-", ",", ";", ":", "!", "?", ".", "'", "\"", "(", ")", "[", "]", "{", "}", "@", "*",
            "/", "\\", "&", "#", "%", "`", "^", "+", "<", "=", ">", "|", "~", "$", "£", "€",
            "0", "0.5", "1", "10", "2", "9", "a",
        ])
    }

    @Test func accentsAreSecondaryAndCaseTertiary() {
        expectStrictOrder(["a", "A", "á", "Á", "à", "ä", "aa", "ae", "æ", "af", "b", "B"])
        expectStrictOrder(["e", "é", "è", "ê", "f"])
        expectStrictOrder(["resume", "Resume", "RESUME", "résumé", "Résumé", "resumes"])
        expectStrictOrder(["ss", "ß", "st"])
        expectStrictOrder(["i", "I", "İ", "ı", "j"])
        expectStrictOrder(["o", "ø", "p"])
    }

    @Test func scriptsAfterLatin() {
        expectStrictOrder(["z", "Z", "α", "ω", "Ω", "я", "한", "あ", "ア", "一", "中", "二", "文", "日", "本"])
    }

    @Test func canonicallyEquivalentAndIgnorableStringsAreEqual() {
        let equal: [(String, String)] = [
            ("é", "e\u{301}"),
            ("a\u{0}b", "ab"),
            ("\u{0}", ""),
            ("\u{1EC7}", "e\u{323}\u{302}"),
            ("\u{1EB9}\u{302}", "e\u{323}\u{302}"),
        ]
        for (a, b) in equal {
            #expect(ICUCollator.compare(a, b) == 0, "\(describe(.string(a))) vs \(describe(.string(b)))")
            #expect(ICUCollator.sortKey(a) == ICUCollator.sortKey(b), "\(describe(.string(a)))")
        }
    }

    /// The root collator's normalization mode is off by default (as in CouchDB), so ICU only promises canonical
    /// equivalence for text in FCD form. Combining marks out of canonical order are not: Swift calls these two
    /// strings equal, collation does not. Both forms of the collation still agree on their order.
    @Test func nonFCDTextIsNotNormalized() throws {
        let (a, b) = ("a\u{301}\u{316}", "a\u{316}\u{301}")
        #expect(a == b)
        #expect(ICUCollator.compare(a, b) == -1)
        #expect(byteOrder(try #require(ICUCollator.sortKey(a)), try #require(ICUCollator.sortKey(b))) == -1)
    }

    @Test func sortKeysHaveOneTerminatorAndTwoSeparators() throws {
        var random = CollationRandom(stream: 1)
        for _ in 0..<2000 {
            let text = random.string()
            let key = try #require(ICUCollator.sortKey(text), "\(seedNote)")
            #expect(key.last == 0 && key.dropLast().allSatisfy { $0 != 0 }, "\(describe(.string(text)))")
            #expect(key.filter { $0 == 1 }.count == 2, "\(describe(.string(text))) \(seedNote)")
        }
        #expect(ICUCollator.sortKey("") == [0x01, 0x01, 0x00])
    }

    /// The structure `CollationKey(validating:)` relies on, for every Unicode scalar value followed by "a".
    @Test func everyScalarGivesTwoSeparatorsAndOneTerminator() {
        var key: [UInt8] = []
        var bad: [UInt32] = []
        for value in UInt32(0)...0x10FFFF {
            guard let scalar = Unicode.Scalar(value) else { continue }  // surrogates
            var utf8 = Array(String(scalar).utf8)
            utf8.append(0x61)
            key.removeAll(keepingCapacity: true)
            let made = utf8.withUnsafeBufferPointer { ICUCollator.appendSortKey(utf8: $0, to: &key) }
            let body = key.dropLast()
            if !made || key.last != 0 || body.contains(0) || body.count(where: { $0 == 1 }) != 2 {
                bad.append(value)
            }
        }
        #expect(bad.isEmpty, "scalars with other sort-key structure: \(bad.prefix(20).map { String($0, radix: 16) })")
    }

    /// `ucol_strcollUTF8` and `ucol_getSortKey` take different paths through ICU (UTF-8 vs UTF-16 iteration,
    /// an identical-prefix shortcut); Sofa needs them to agree exactly.
    @Test func compareAgreesWithSortKeys() throws {
        var random = CollationRandom(stream: 2)
        for _ in 0..<5000 {
            let a = random.string()
            let b: String
            if case .string(let near) = random.variant(of: .string(a)) { b = near } else { b = random.string() }
            let byKeys = byteOrder(try #require(ICUCollator.sortKey(a)), try #require(ICUCollator.sortKey(b)))
            #expect(ICUCollator.compare(a, b) == byKeys,
                    "\(describe(.string(a))) vs \(describe(.string(b))) \(seedNote)")
        }
    }

    @Test func longStringsGrowTheBuffer() throws {
        // U+FDFA makes 47 bytes of key from 3 bytes of text: far past the first capacity guess.
        let text = String(repeating: "\u{FDFA}", count: 300)
        var buffer: [UInt8] = [0xAB]
        #expect(ICUCollator.appendSortKey(of: text, to: &buffer))
        #expect(buffer.first == 0xAB)
        #expect(Array(buffer.dropFirst()) == ICUCollator.sortKey(text))
        #expect(buffer.count > 300 * 40)
    }

    @Test func versionIsKnown() {
        #expect(ICUCollator.version != [0, 0, 0, 0])
        #expect(CollationKey.collatorVersion == ICUCollator.version)
        #expect(ICUCollator.libraryVersion[0] >= 60)
    }
}
