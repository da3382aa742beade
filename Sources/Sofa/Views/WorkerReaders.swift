import Dispatch
#if canImport(Glibc)
import Glibc
#endif
import SofaStorage
import Synchronization

/// The ``BTreeReader``s of one worker of ``DispatchQueue/forEachChunk(_:_:)``, made on first use, each in a
/// numbered slot that names what it reads.
final class WorkerReaders {
    /// A view update's mapping chunk: the snapshot's by-ID tree.
    static let byID = 0
    /// A view update's mapping chunk: the previous back-index.
    static let previousBackIndex = 1
    /// A group recompute's chunk: the rows tree, read below its written length.
    static let groupRows = 0

    private var readers: [BTreeReader?] = []

    /// Reader number `slot` of the worker, reading `tree` (made on first use). Every call with a slot must pass
    /// the same tree: the same file, root and limit (a precondition: a reader's memo answers for one tree only).
    func reader(_ slot: Int, of tree: BTree) -> BTreeReader {
        while readers.count <= slot { readers.append(nil) }
        if let reader = readers[slot] {
            precondition(reader.tree.file === tree.file && reader.tree.root?.offset == tree.root?.offset
                         && reader.tree.limit == tree.limit, "a worker's reader slot \(slot) asked for another tree")
            return reader
        }
        let reader = BTreeReader(tree)
        readers[slot] = reader
        return reader
    }
}

extension DispatchQueue {
    /// The number of cores online (at least 1): how many workers a parallel step runs at most.
    static var onlineCoreCount: Int { max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN))) }

    /// Calls `body` once for each of `count` chunks, on one worker per core (fewer when there are fewer chunks),
    /// each worker taking the next chunk not yet taken; `body` gets the chunk's number and the worker's readers,
    /// which stay with the worker from one chunk to the next. Returns when every chunk is done.
    static func forEachChunk(_ count: Int, _ body: @Sendable (_ chunk: Int, _ readers: WorkerReaders) -> Void) {
        let next = Atomic<Int>(0)
        let workers = min(count, onlineCoreCount)
        concurrentPerform(iterations: workers) { _ in
            let readers = WorkerReaders()
            while true {
                let c = next.add(1, ordering: .relaxed).oldValue
                guard c < count else { return }
                body(c, readers)
            }
        }
    }
}
