import Foundation

/// What a child process killed by ``runAndKill(executable:arguments:delay:)`` left behind.
package struct KilledRun {
    /// Everything the child wrote to standard output before it ended.
    package var output: String
    /// True when the SIGKILL ended the child; false when it had exited by itself before.
    package var killed: Bool
}

/// Starts `executable arguments…`, kills it with SIGKILL after `delay` microseconds, waits for it, and returns
/// what it printed on standard output (its standard error is discarded) and whether the signal ended it.
/// The crash tests run `crash-worker` through it, the tool tests `sofa`.
package func runAndKill(executable: String, arguments: [String], delay: UInt32) throws -> KilledRun {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = FileHandle.nullDevice
    try process.run()
    usleep(delay)
    kill(process.processIdentifier, SIGKILL)
    process.waitUntilExit()
    let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    return KilledRun(output: output, killed: process.terminationReason == .uncaughtSignal)
}
