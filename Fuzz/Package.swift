// swift-tools-version: 6.1
//
// Sofa's libFuzzer targets (RELIABILITY.md R6): a package of their own, because a libFuzzer binary has no
// `main` (libFuzzer brings it) and so cannot sit in the root package without breaking a plain `swift build`.
// They call the library through `@_spi(Fuzzing) public` entry points (`StorageFuzzing`, `SofaFuzzing`), the
// same ones `FuzzFixtureReplayTests` feeds every fixture to in the normal test suite.
//
//   fuzz-file        bytes → a file opened read-only (storage level and database level), verified, read
//   fuzz-chunk       bytes → chunk check, LZ4, node decoding
//   fuzz-json        bytes → JSON parser (and serialize/parse round trip)
//   fuzz-collation   bytes → collation-key validator and walkers
//
// Build and run only with the fuzzer (`make fuzz` does both):
//   swift build --sanitize=fuzzer -Xswiftc -sanitize=fuzzer,address
//   SWIFT_BACKTRACE=enable=no .build/debug/fuzz-json ../Tests/Fixtures/fuzz/json -max_total_time=60
import PackageDescription

let package = Package(
    name: "SofaFuzz",
    platforms: [.macOS(.v14)],
    dependencies: [
        // Named, because a path dependency's identity is its directory name (wt-rel, main, …).
        .package(name: "Sofa", path: ".."),
    ],
    targets: [
        fuzzer("fuzz-file", "FuzzFile"),
        fuzzer("fuzz-chunk", "FuzzChunk"),
        fuzzer("fuzz-json", "FuzzJSON"),
        fuzzer("fuzz-collation", "FuzzCollation"),
    ]
)

/// A libFuzzer executable: one file that defines `LLVMFuzzerTestOneInput` and no `main`.
func fuzzer(_ name: String, _ directory: String) -> Target {
    .executableTarget(
        name: name,
        dependencies: [
            .product(name: "Sofa", package: "Sofa"),
            .product(name: "SofaStorage", package: "Sofa"),
        ],
        path: "Sources/\(directory)",
        // libFuzzer provides `main`; the Swift file must not be treated as top-level code.
        swiftSettings: [.unsafeFlags(["-parse-as-library"])])
}
