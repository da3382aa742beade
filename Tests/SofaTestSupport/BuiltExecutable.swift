import Foundation

/// The path of executable `name` as SwiftPM built it next to the running test binary (a test target that
/// depends on an executable target makes `swift test` build it). Toolchains that nest the test binary one level
/// deeper, in an XCTest bundle, have the executable in the parent directory.
package func builtExecutable(_ name: String) -> String {
    let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? ""
    var dir = URL(fileURLWithPath: exe).deletingLastPathComponent()
    if !FileManager.default.fileExists(atPath: dir.appendingPathComponent(name).path) {
        dir = dir.deletingLastPathComponent()
    }
    return dir.appendingPathComponent(name).path
}
