// swift-tools-version: 6.1
//
// serialize-docs: the JSON serializer alone on the benchmark documents (BENCHMARKS.md §3, "Session 14: the
// serializer's short strings"). D1's run-to-run noise on a shared VM is larger than a change to the serializer;
// the fastest of 15 rounds over the same 200,000 parsed documents is not.
//
//   swift build -c release && ./.build/release/serialize-docs [DOCS.JSONL] [COUNT]
import PackageDescription

let package = Package(
    name: "serialize-docs",
    dependencies: [
        // Named, because a path dependency's identity is its directory name.
        .package(name: "Sofa", path: "../../.."),
    ],
    targets: [
        .executableTarget(name: "serialize-docs", dependencies: [.product(name: "Sofa", package: "Sofa")]),
    ]
)
