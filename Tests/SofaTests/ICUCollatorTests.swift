import Testing

@testable import Sofa

@Suite struct ICUCollatorTests {
    @Test func rootOrder() {
        let ordered = ["~", "1", "a", "A", "aa", "b", "B"]
        for (i, a) in ordered.enumerated() {
            for (j, b) in ordered.enumerated() {
                #expect(ICUCollator.compare(a, b).signum() == (i < j ? -1 : i == j ? 0 : 1), "\(a) vs \(b)")
            }
        }
    }

    @Test func versionIsKnown() {
        #expect(ICUCollator.version != [0, 0, 0, 0])
    }
}
