// swift-tools-version: 6.1
//
// Sofa's benchmarks: a package of its own so that the library carries no benchmark dependency.
//
//   sofa-compare       W1–W7 of shared/bench/WORKLOADS.md, side by side on Sofa, LMDB and SQLite (README.md);
//                      --suite docs: D1–D5, documents on Sofa's Database and SQLite
//   CLMDB, CSQLite     the peers, found with pkg-config (tools/setup.sh installs liblmdb-dev, libsqlite3-dev)
//   Benchmarks/<Layer> microbenchmarks with ordo-one/package-benchmark, one target per layer, named
//                      `Layer.operation.case`; thresholds for the deterministic metrics in Thresholds/
import PackageDescription

let releaseTuning: [SwiftSetting] = [
    // The comparison runner is a hot loop around C calls; bounds checks stay on (they are the same for every
    // engine), only whole-module and cross-module optimization are asked for.
    .unsafeFlags(["-cross-module-optimization"], .when(configuration: .release)),
]

let package = Package(
    name: "SofaBenchmarks",
    platforms: [.macOS(.v14)],
    dependencies: [
        // Named, because a path dependency's identity is its directory name (wt-bench, main, …).
        .package(name: "Sofa", path: ".."),
        // The MallocInterposer trait counts mallocs without jemalloc; without the trait resolution asks for a
        // package that is not mirrored (shared/TOOLCHAIN.md).
        .package(url: "https://github.com/ordo-one/package-benchmark", exact: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/apple/swift-argument-parser", exact: "1.8.2"),
    ],
    targets: [
        .systemLibrary(
            name: "CLMDB", path: "Sources/CLMDB", pkgConfig: "lmdb",
            providers: [.apt(["liblmdb-dev"])]),
        .systemLibrary(
            name: "CSQLite", path: "Sources/CSQLite", pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]),
        .executableTarget(
            name: "sofa-compare",
            dependencies: [
                "CLMDB", "CSQLite",
                .product(name: "SofaStorage", package: "Sofa"),
                // The documents (D1–D5) and views (V1–V6) suites drive Sofa's Database.
                .product(name: "Sofa", package: "Sofa"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Sources/sofa-compare",
            swiftSettings: releaseTuning),
        .target(
            name: "MicrobenchmarkSupport",
            dependencies: [
                .product(name: "Benchmark", package: "package-benchmark"),
                .product(name: "Sofa", package: "Sofa"),
            ]),
        // One microbenchmark target per layer, named `<Layer>Benchmarks` (a module named `JSON` would shadow
        // Sofa's `JSON` type) in `Benchmarks/<Layer>/`, where package-benchmark's plugin looks for them.
        microbenchmarks("JSON"),
        microbenchmarks("Collation"),
        microbenchmarks("Storage"),
        microbenchmarks("BTree"),
        microbenchmarks("Documents"),
        microbenchmarks("Views"),
        microbenchmarks("Query"),
    ]
)

/// The executable target of one layer's microbenchmarks.
func microbenchmarks(_ layer: String) -> Target {
    .executableTarget(
        name: "\(layer)Benchmarks",
        dependencies: [
            "MicrobenchmarkSupport",
            .product(name: "Benchmark", package: "package-benchmark"),
            .product(name: "Sofa", package: "Sofa"),
            .product(name: "SofaStorage", package: "Sofa"),
        ],
        path: "Benchmarks/\(layer)",
        plugins: [.plugin(name: "BenchmarkPlugin", package: "package-benchmark")])
}
