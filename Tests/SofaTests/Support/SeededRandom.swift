#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import SofaStorage

/// A seeded generator (SplitMix64) that remembers its seed, so a failing randomized test can be replayed exactly
/// from the seed it prints.
struct SeededRandom: RandomNumberGenerator {
    /// The seed this generator started from; put it in every failure message.
    let seed: UInt64
    private var random: SplitMix64

    init(seed: UInt64) {
        self.seed = seed
        random = SplitMix64(seed: seed)
    }

    mutating func next() -> UInt64 { random.next() }

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
