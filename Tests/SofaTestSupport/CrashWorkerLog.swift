import Foundation

/// What a killed `crash-worker` had printed: the last step it began (`BEGIN k`) and the last it acknowledged
/// (`ACK k`), each nil when it printed none.
package struct CrashWorkerLog {
    package var lastBegin: Int?
    package var lastAck: Int?

    /// The log of a worker that printed `output` (the crash tests' oracle: the recovered commit must lie
    /// between the last acknowledged and the last begun).
    package init(output: String) {
        for line in output.split(separator: "\n") {
            let parts = line.split(separator: " ")
            guard parts.count == 2, let k = Int(parts[1]) else { continue }
            if parts[0] == "BEGIN" { lastBegin = k } else if parts[0] == "ACK" { lastAck = k }
        }
    }
}
