// The child process of the crash tests (RELIABILITY.md R1): a seeded writer that is killed with SIGKILL at
// random moments by the test driver.
//
//     crash-worker tree PATH SEED [COMMITS]
//
// Continues the workload from the file's newest commit: commit k (k = 1, 2, …) applies `CrashWorkload.batch`
// (seed, k) and is logged as "BEGIN k" before it starts and "ACK k" after `commit` returned, each line
// flushed at once, so the driver knows what may and what must have survived.
#if canImport(Glibc)
import Glibc
#endif
import SofaStorage

@main
struct CrashWorker {
    static func main() throws {
        let args = CommandLine.arguments
        guard args.count >= 4, args[1] == "tree", let seed = UInt64(args[3]) else {
            say("usage: crash-worker tree PATH SEED [COMMITS]", to: 2)
            exit(2)
        }
        let commits = args.count > 4 ? Int(args[4]) ?? Int.max : Int.max
        let file = try StorageFile(path: args[2], options: StorageOptions(durability: .full))
        var tree = BTree(file: file, commit: file.latestCommit, index: 0, configuration: CrashWorkload.configuration)
        var k = Int(file.latestCommit.commitNumber)  // the empty first commit is number 1, workload commit 1 is 2
        while k <= commits {
            say("BEGIN \(k)")
            tree = try tree.modified(by: CrashWorkload.batch(seed: seed, commit: k))
            try file.commit(roots: [tree.root], metadata: CrashWorkload.metadata(commit: k))
            say("ACK \(k)")
            k += 1
        }
    }
}

/// Writes one line with a single unbuffered `write`, so a kill never leaves half a line or a buffered one.
func say(_ text: String, to fd: Int32 = 1) {
    var line = text + "\n"
    line.withUTF8 { _ = write(fd, $0.baseAddress, $0.count) }
}
