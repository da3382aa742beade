// The child process of the crash tests (RELIABILITY.md R1): a seeded writer that is killed with SIGKILL at
// random moments by the test driver.
//
//     crash-worker tree PATH SEED [COMMITS]
//     crash-worker database PATH SEED [STEPS]
//
// `tree` continues the storage-level workload from the file's newest commit: commit k (k = 1, 2, …) applies
// `CrashWorkload.batch(seed, k)`. `database` continues `DatabaseCrashWorkload` (puts, batches, deletes,
// conflicts, view index updates, compaction) on the database directory PATH from the step its lastSequence
// names. Each commit or step is logged as "BEGIN k" before it starts and "ACK k" after it returned, each line
// written at once, so the driver knows what may and what must have survived.
#if canImport(Glibc)
import Glibc
#endif
import Sofa
import SofaStorage

@main
struct CrashWorker {
    static func main() throws {
        let args = CommandLine.arguments
        guard args.count >= 4, ["tree", "database"].contains(args[1]), let seed = UInt64(args[3]) else {
            say("usage: crash-worker tree|database PATH SEED [COUNT]", to: 2)
            exit(2)
        }
        let count = args.count > 4 ? Int(args[4]) ?? Int.max : Int.max
        if args[1] == "database" {
            try runDatabase(path: args[2], seed: seed, steps: count)
        } else {
            try runTree(path: args[2], seed: seed, commits: count)
        }
    }

    /// The storage-level workload: one B+tree, one commit per `CrashWorkload.batch`.
    static func runTree(path: String, seed: UInt64, commits: Int) throws {
        let file = try StorageFile(path: path, options: StorageOptions(durability: .full))
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

    /// The database workload: `DatabaseCrashWorkload` steps, with full durability (the default).
    static func runDatabase(path: String, seed: UInt64, steps: Int) throws {
        let db = try Database(path: path)
        let views = try DatabaseCrashWorkload.views(of: db)
        var model = DatabaseCrashWorkload.Model(seed: seed)
        guard model.advance(toSequence: db.lastSequence) else {
            say("lastSequence \(db.lastSequence) ends no step of seed \(seed)", to: 2)
            exit(3)
        }
        while model.steps < steps {
            let step = model.nextStep()
            say("BEGIN \(step.number)")
            try DatabaseCrashWorkload.perform(step, on: db, views: views)
            say("ACK \(step.number)")
            model.apply(step)
            guard db.lastSequence == model.lastSequence else {
                say("step \(step.number) (\(step.kind)) left lastSequence \(db.lastSequence), the model " +
                    "\(model.lastSequence)", to: 2)
                exit(4)
            }
        }
        try db.close()
    }
}

/// Writes one line with a single unbuffered `write`, so a kill never leaves half a line or a buffered one.
func say(_ text: String, to fd: Int32 = 1) {
    var line = text + "\n"
    line.withUTF8 { _ = write(fd, $0.baseAddress, $0.count) }
}
