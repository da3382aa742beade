// swift-tools-version: 6.1
//
// Sofa: an embedded document store with map/reduce views.
//
// Targets, bottom up (DESIGN.md §1):
//   CLZ4, CICU, CXXHash  system libraries (liblz4, ICU, libxxhash), found with pkg-config
//   CSofaICU       C wrapper around ICU's collator; its header has no ICU types (see TOOLCHAIN notes in README)
//   CSofaCRC       CRC32C (hardware instruction when present, table otherwise)
//   CSofaSys       Linux calls Glibc does not export to Swift (sync_file_range: a writeback hint)
//   SofaStorage    the append-only file and the copy-on-write B+tree
//   Sofa           JSON, collation, documents, views, queries and the public API
//   sofa           the command-line tool (tools/sofa)
//   crash-worker   the child process the crash tests kill (tools/crash-worker)
//   SofaTestSupport  helpers the test targets share (Tests/SofaTestSupport); in no product
//
// Products: `Sofa` (the database) and `SofaStorage` (the engine alone: file + B+tree, for the engine-level
// benchmarks and anyone who wants a memcmp-ordered tree with stored reductions).
import PackageDescription

// Release builds keep Swift's bounds and overflow checks (no -Ounchecked): every length and offset read from
// disk is checked explicitly, and the checks are the backstop if one is ever missed. Cross-module optimization
// is on by default; no unsafe flags, so the package can be depended on by version.
let releaseTuning: [SwiftSetting] = []

let package = Package(
    name: "Sofa",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "Sofa", targets: ["Sofa"]),
        .library(name: "SofaStorage", targets: ["SofaStorage"]),
        .executable(name: "sofa", targets: ["sofa"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", exact: "1.8.2"),
        .package(url: "https://github.com/apple/swift-collections", exact: "1.6.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CLZ4", path: "Sources/CLZ4", pkgConfig: "liblz4",
            providers: [.apt(["liblz4-dev"])]),
        .systemLibrary(
            name: "CICU", path: "Sources/CICU", pkgConfig: "icu-i18n",
            providers: [.apt(["libicu-dev"])]),
        .systemLibrary(
            name: "CXXHash", path: "Sources/CXXHash", pkgConfig: "libxxhash",
            providers: [.apt(["libxxhash-dev"])]),
        .target(name: "CSofaICU", dependencies: ["CICU"], path: "Sources/CSofaICU"),
        .target(name: "CSofaCRC", path: "Sources/CSofaCRC"),
        .target(name: "CSofaSys", path: "Sources/CSofaSys"),
        .target(
            name: "SofaStorage",
            dependencies: ["CLZ4", "CSofaCRC", "CSofaSys"],
            swiftSettings: releaseTuning),
        .target(
            name: "Sofa",
            dependencies: [
                "SofaStorage", "CSofaICU", "CSofaSys", "CXXHash",
                .product(name: "OrderedCollections", package: "swift-collections"),
            ],
            swiftSettings: releaseTuning),
        .executableTarget(
            name: "sofa",
            dependencies: ["Sofa", "SofaStorage", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            path: "tools/sofa",
            swiftSettings: releaseTuning),
        .executableTarget(
            name: "crash-worker", dependencies: ["Sofa", "SofaStorage"], path: "tools/crash-worker",
            swiftSettings: releaseTuning),
        .target(name: "SofaTestSupport", dependencies: ["Sofa"], path: "Tests/SofaTestSupport"),
        // The crash tests run `crash-worker` as a child process; depending on it makes `swift test` build it.
        .testTarget(name: "SofaStorageTests", dependencies: ["SofaStorage", "SofaTestSupport", "crash-worker"]),
        .testTarget(name: "SofaTests", dependencies: ["Sofa", "SofaStorage", "SofaTestSupport", "crash-worker"]),
        // Runs the built `sofa` executable as a child process (exit codes, output).
        .testTarget(name: "SofaToolTests", dependencies: ["sofa", "Sofa", "SofaTestSupport"]),
    ]
)
