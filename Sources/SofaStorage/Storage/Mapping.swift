/// A read-only `mmap` of a file, unmapped when the last holder lets go.
///
/// The mapping may be longer than the file: pages past the end are never touched, because every read is
/// bounds-checked against a committed (or written) end first. When a file outgrows its mapping the storage
/// layer maps it again, larger; readers still holding the old mapping keep it alive and valid.
final class Mapping: @unchecked Sendable {
    let base: UnsafeRawPointer
    let length: Int
    private let system: any SystemCalls

    init(fd: Int32, length: Int, system: any SystemCalls) throws(SystemCallFailure) {
        self.base = try system.mmap(fd, length: length)
        self.length = length
        self.system = system
    }

    deinit { system.munmap(base, length: length) }

    /// A mapping size for a file of `size` bytes, with room to grow so appends rarely remap.
    static func capacity(forFileSize size: Int) -> Int {
        let page = 1 << 20
        let wanted = max(size * 2, 1 << 30)
        return (wanted + page - 1) / page * page
    }
}
