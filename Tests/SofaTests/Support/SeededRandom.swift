#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// SplitMix64 (Steele, Lea & Flood 2014): a small, fast, seedable generator, so a failing randomized test can
/// be replayed exactly from the seed it prints.
struct SeededRandom: RandomNumberGenerator {
    /// The seed this generator started from; put it in every failure message.
    let seed: UInt64
    private var state: UInt64

    init(seed: UInt64) {
        self.seed = seed
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// The seeds a randomized test runs with: `SOFA_SEED` alone when set (decimal or 0x-hex), else a fixed
    /// default, so every run covers the same ground, plus a fresh random one, so runs add coverage over time.
    static var testSeeds: [UInt64] {
        if let text = getenv("SOFA_SEED").map({ String(cString: $0) }) {
            let seed = text.hasPrefix("0x") ? UInt64(text.dropFirst(2), radix: 16) : UInt64(text)
            if let seed { return [seed] }
        }
        return [0x5EED_0000_C0FF_EE00, UInt64.random(in: .min ... .max)]
    }

    /// `Replay with SOFA_SEED=…`, for failure messages.
    var replayHint: String { "seed \(seed); replay with SOFA_SEED=\(seed)" }
}
