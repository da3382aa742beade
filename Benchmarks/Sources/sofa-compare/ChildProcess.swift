import Glibc

/// Runs this same executable again (`/proc/self/exe`) with other arguments and collects its stdout.
///
/// Each engine runs in a child of its own so that its peak RSS (`VmHWM`) is its own and no engine inherits
/// another's page-cache or heap state; the children run one after another, never concurrently.
enum ChildProcess {
    /// Runs `/proc/self/exe arguments…`, passes its stderr through, and returns its stdout.
    /// - Throws: ``CompareError`` if it cannot start or exits with a non-zero status.
    static func run(_ arguments: [String]) throws -> String {
        var pipeFDs: [Int32] = [0, 0]
        guard pipe(&pipeFDs) == 0 else { throw CompareError("pipe: \(errnoText())") }
        let (readEnd, writeEnd) = (pipeFDs[0], pipeFDs[1])

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, writeEnd, STDOUT_FILENO)
        posix_spawn_file_actions_addclose(&actions, readEnd)

        let executable = "/proc/self/exe"
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        close(writeEnd)
        guard rc == 0 else {
            close(readEnd)
            throw CompareError("cannot start \(executable): \(String(cString: strerror(rc)))")
        }

        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(readEnd, $0.baseAddress, $0.count) }
            if n > 0 {
                output.append(contentsOf: buffer[0 ..< n])
            } else if n == 0 || errno != EINTR {
                break
            }
        }
        close(readEnd)

        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        // WIFEXITED / WEXITSTATUS are macros Swift does not import: exited normally iff the low 7 bits are 0.
        let signal = status & 0x7F
        let exitCode = (status >> 8) & 0xFF
        guard signal == 0 && exitCode == 0 else {
            let how = signal != 0 ? "was killed by signal \(signal)" : "exited with status \(exitCode)"
            throw CompareError("child \(arguments.joined(separator: " ")) \(how)")
        }
        return String(decoding: output, as: UTF8.self)
    }
}
