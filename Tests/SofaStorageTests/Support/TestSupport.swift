import Foundation
import Testing

@testable import SofaStorage

/// A small, fast, seedable generator (SplitMix64) so every randomized test can be replayed from its seed.
struct SeededGenerator: RandomNumberGenerator {
    private var random: SplitMix64
    let seed: UInt64

    init(seed: UInt64) {
        self.seed = seed
        self.random = SplitMix64(seed: seed)
    }

    mutating func next() -> UInt64 { random.next() }

    /// Seeds for a randomized test: `SOFA_SEED` when set (to replay a failure), else fixed ones plus one new
    /// seed per run, so CI explores while failures stay reproducible (the seed is in every failure message).
    static func seeds(fixed: [UInt64]) -> [UInt64] {
        if let text = ProcessInfo.processInfo.environment["SOFA_SEED"], let seed = UInt64(text) { return [seed] }
        var fresh = SystemRandomNumberGenerator()
        return fixed + [fresh.next() >> 16]
    }
}

/// A temporary directory, removed with everything in it when the test ends.
final class TemporaryDirectory {
    let path: String

    init(_ name: String = "sofa-test") {
        path = NSTemporaryDirectory() + "\(name)-\(UUID().uuidString.prefix(8))"
        try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func file(_ name: String) -> String { "\(path)/\(name)" }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// The bytes of a file.
func readFile(_ path: String) -> [UInt8] {
    guard let f = fopen(path, "rb") else { return [] }
    defer { fclose(f) }
    var out: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 1 << 16)
    while true {
        let n = fread(&buffer, 1, buffer.count, f)
        if n <= 0 { break }
        out.append(contentsOf: buffer[0..<n])
    }
    return out
}

/// Replaces a file's bytes.
func writeFile(_ path: String, _ bytes: [UInt8]) {
    let f = fopen(path, "wb")!
    _ = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, f) }
    fclose(f)
}

/// Checks a tree with `verify()` and records every problem as a test failure.
func expectSound(_ tree: BTree, _ context: String = "", sourceLocation: SourceLocation = #_sourceLocation) {
    let (_, problems) = tree.verify()
    #expect(problems.isEmpty, "\(context) verify: \(problems)", sourceLocation: sourceLocation)
}

/// A key of `width` bytes encoding `n` big-endian, so byte order equals numeric order.
func numericKey(_ n: Int, width: Int = 4) -> [UInt8] {
    (0..<width).map { UInt8(truncatingIfNeeded: n >> (8 * (width - 1 - $0))) }
}

/// An 8-byte little-endian value for the sum reducer.
func int64Value(_ v: Int64) -> [UInt8] { Int64SumReducer.encode(v) }
