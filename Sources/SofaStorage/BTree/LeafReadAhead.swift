import Dispatch

/// Decodes the leaves a scan is about to visit into the file's node cache on another thread, so a long scan
/// over leaves that are not cached finds them decompressed instead of decompressing each one itself.
///
/// Made by ``BTree/forEachEntry(in:descending:skip:readAhead:_:)`` for the children of one inner node, listed
/// in scan order without the first (which the scan reads itself). The scan reports each child it has
/// reached, so leaves it got to first are not decoded twice; ``finish()`` stops the work and waits for it, so
/// nothing reads the file after the scan returns. A failed read is left to the scan, which meets the same
/// error on its own read and throws it.
final class LeafReadAhead: Sendable {
    private struct Progress {
        /// How many children at the head of `offsets` the scan has reached.
        var reached = 0
        var stopped = false
    }

    private let progress = Lock(Progress())
    private let group = DispatchGroup()

    init(tree: BTree, offsets: [UInt64]) {
        DispatchQueue.global().async(group: group) { [progress] in
            for (n, offset) in offsets.enumerated() {
                let (reached, stopped) = progress.withLock { ($0.reached, $0.stopped) }
                if stopped { return }
                if n < reached { continue }  // the scan got there first
                _ = try? tree.node(at: offset)
            }
        }
    }

    /// The first `count` children of the list are the scan's own (visited, or being read by it now): the other
    /// thread skips them.
    func reached(_ count: Int) {
        progress.withLock { $0.reached = max($0.reached, count) }
    }

    /// Stops reading ahead and waits until the other thread has.
    func finish() {
        progress.withLock { $0.stopped = true }
        group.wait()
    }
}
