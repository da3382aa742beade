#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import SofaStorage

/// The ICU sort keys of recently encoded strings, by their UTF-8 bytes: an index build asks ICU for the sort key
/// of the same genre, artist or album thousands of times, and a sort key costs ~1 µs where a lookup here costs
/// tens of nanoseconds.
///
/// Lookups compare bytes, not `String`s: Swift's `==` treats canonically equivalent strings as equal, and ICU's
/// sort keys of two such strings need not be identical, so only byte-identical text may share a key.
///
/// Bounded, in two generations: when the current one is full (``entriesPerGeneration`` strings or
/// ``bytesPerGeneration`` bytes) it becomes the old one and the old one is forgotten. A string found in the
/// old generation is copied into the current one, so strings that keep recurring (genres, artists, albums)
/// survive a stream of strings seen once (titles). Not thread-safe: one cache per thread, handed out by
/// ``SortKeyCachePool``, whose lock orders one thread's use before the next (hence `@unchecked Sendable`).
final class SortKeyCache: @unchecked Sendable {
    /// Strings one generation holds at most.
    static let entriesPerGeneration = 1 << 16
    /// Bytes of text and sort keys one generation holds at most.
    static let bytesPerGeneration = 4 << 20

    private var current = Generation()
    private var old = Generation()

    /// Appends `string`'s ICU sort key (with its terminating `0x00`) to `buffer`, from the cache when it holds
    /// it; as ``ICUCollator/appendSortKey(of:to:)`` otherwise. Returns `false`, leaving `buffer` as it was, if
    /// ICU fails.
    func appendSortKey(of string: String, to buffer: inout [UInt8]) -> Bool {
        var string = string
        return string.withUTF8 { appendSortKey(utf8: $0, to: &buffer) }
    }

    /// ``appendSortKey(of:to:)`` for valid UTF-8 bytes.
    func appendSortKey(utf8: UnsafeBufferPointer<UInt8>, to buffer: inout [UInt8]) -> Bool {
        let text = UnsafeRawBufferPointer(utf8)
        let hash = SortKeyCache.hash(text)
        if let key = current.find(text, hash: hash) {
            buffer.append(contentsOf: key)
            return true
        }
        let keyStart = buffer.count
        if let key = old.find(text, hash: hash) {
            buffer.append(contentsOf: key)
        } else {
            guard ICUCollator.appendSortKey(utf8: utf8, to: &buffer) else { return false }
        }
        // Remembered from `buffer`: an old generation's bytes are reused when the generations turn over.
        buffer.withUnsafeBytes { remember(text, hash: hash, key: UnsafeRawBufferPointer(rebasing: $0[keyStart...])) }
        return true
    }

    private func remember(_ text: UnsafeRawBufferPointer, hash: UInt64, key: UnsafeRawBufferPointer) {
        // Strings too long to be worth keeping are not cached.
        guard text.count + key.count <= 4096 else { return }
        if !current.hasRoom(text.count + key.count) {
            swap(&current, &old)
            current.forgetAll()
        }
        current.insert(text, hash: hash, key: key)
    }

    /// A 64-bit hash of `bytes`: eight bytes at a time, multiplied and folded.
    @inline(__always)
    private static func hash(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        var h: UInt64 = 0x9E37_79B9_7F4A_7C15 ^ UInt64(bytes.count)
        var i = 0
        while i + 8 <= bytes.count {
            h = (h ^ bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self)) &* 0xFF51_AFD7_ED55_8CCD
            h ^= h >> 32
            i += 8
        }
        var tail: UInt64 = 0
        var shift: UInt64 = 0
        while i < bytes.count {
            tail |= UInt64(bytes[i]) << shift
            shift += 8
            i += 1
        }
        h = (h ^ tail) &* 0xC4CE_B9FE_1A85_EC53
        return h ^ (h >> 29)
    }

    /// One generation: an open-addressing table over fixed, manually allocated storage (no exclusivity checks or
    /// copy-on-write tests on the lookup path).
    private final class Generation {
        private struct Entry {
            var hash: UInt64
            var text: Int32
            var textCount: Int32
            var keyCount: Int32
        }

        /// Entry index + 1 per slot, 0 for an empty slot; twice ``entriesPerGeneration`` slots.
        private let slots: UnsafeMutablePointer<Int32>
        private let slotMask: Int
        private let entries: UnsafeMutablePointer<Entry>
        private var entryCount = 0
        /// Per entry, its text then its sort key.
        private let bytes: UnsafeMutableRawPointer
        private var byteCount = 0

        init() {
            let slotCount = 2 * SortKeyCache.entriesPerGeneration
            slots = .allocate(capacity: slotCount)
            slots.initialize(repeating: 0, count: slotCount)
            slotMask = slotCount - 1
            entries = .allocate(capacity: SortKeyCache.entriesPerGeneration)
            bytes = .allocate(byteCount: SortKeyCache.bytesPerGeneration, alignment: 8)
        }

        deinit {
            slots.deallocate()
            entries.deallocate()
            bytes.deallocate()
        }

        /// The sort key stored for `text`, if any.
        @inline(__always)
        func find(_ text: UnsafeRawBufferPointer, hash: UInt64) -> UnsafeRawBufferPointer? {
            var slot = Int(truncatingIfNeeded: hash) & slotMask
            while slots[slot] != 0 {
                let entry = entries[Int(slots[slot]) - 1]
                if entry.hash == hash && Int(entry.textCount) == text.count
                    && (text.count == 0 || memcmp(bytes + Int(entry.text), text.baseAddress!, text.count) == 0) {
                    return UnsafeRawBufferPointer(start: bytes + Int(entry.text) + Int(entry.textCount),
                                                  count: Int(entry.keyCount))
                }
                slot = (slot + 1) & slotMask
            }
            return nil
        }

        func hasRoom(_ byteCount: Int) -> Bool {
            entryCount < SortKeyCache.entriesPerGeneration
                && self.byteCount + byteCount <= SortKeyCache.bytesPerGeneration
        }

        /// Stores `text` with `key` (which ``find(_:hash:)`` did not have; ``hasRoom(_:)`` said there was room).
        func insert(_ text: UnsafeRawBufferPointer, hash: UInt64, key: UnsafeRawBufferPointer) {
            var slot = Int(truncatingIfNeeded: hash) & slotMask
            while slots[slot] != 0 { slot = (slot + 1) & slotMask }
            let start = byteCount
            if text.count > 0 { (bytes + start).copyMemory(from: text.baseAddress!, byteCount: text.count) }
            if key.count > 0 { (bytes + start + text.count).copyMemory(from: key.baseAddress!, byteCount: key.count) }
            byteCount += text.count + key.count
            entries[entryCount] = Entry(hash: hash, text: Int32(start), textCount: Int32(text.count),
                                        keyCount: Int32(key.count))
            entryCount += 1
            slots[slot] = Int32(entryCount)
        }

        func forgetAll() {
            slots.update(repeating: 0, count: slotMask + 1)
            entryCount = 0
            byteCount = 0
        }
    }
}

/// Hands out one ``SortKeyCache`` per concurrent user: take one for a run of work on one thread, give it back
/// after. The caches outlive the runs, so what one batch of documents taught is there for the next.
final class SortKeyCachePool: @unchecked Sendable {
    private let idle = Lock<[SortKeyCache]>([])

    /// An idle cache, or a new one.
    func take() -> SortKeyCache {
        idle.withLock { $0.popLast() } ?? SortKeyCache()
    }

    /// Returns a cache taken with ``take()``.
    func give(back cache: SortKeyCache) {
        idle.withLock { $0.append(cache) }
    }
}
