import Foundation

/// What a killed `crash-worker` had printed: the last step it began (`BEGIN k`) and the last it acknowledged
/// (`ACK k`), each nil when it printed none.
package struct CrashWorkerLog {
    package var lastBegin: Int?
    package var lastAck: Int?
}

/// Runs `worker arguments…`, kills it with SIGKILL after `delay` microseconds, and returns what it had printed
/// (the crash tests' oracle: the recovered commit must lie between the last acknowledged and the last begun).
package func runAndKillCrashWorker(_ worker: String, _ arguments: [String],
                                   afterMicroseconds delay: UInt32) throws -> CrashWorkerLog {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: worker)
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    usleep(delay)
    kill(process.processIdentifier, SIGKILL)
    process.waitUntilExit()
    let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    var log = CrashWorkerLog()
    for line in output.split(separator: "\n") {
        let parts = line.split(separator: " ")
        guard parts.count == 2, let k = Int(parts[1]) else { continue }
        if parts[0] == "BEGIN" { log.lastBegin = k } else if parts[0] == "ACK" { log.lastAck = k }
    }
    return log
}
