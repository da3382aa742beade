extension String {
    /// The string whose UTF-8 is `bytes` read from a file (a document ID in a leaf, a view row's key), with any
    /// invalid sequence repaired as `String(decoding:as:)` repairs it.
    ///
    /// Copied into the new string's storage, which validates as it goes: for a 14-byte ID, 126 instructions
    /// against `String(decoding:as:)`'s 214 (callgrind), ~10 % of an all-documents scan's row (BENCHMARKS.md §3,
    /// "D1, eleventh round").
    @inline(__always)
    init(storedUTF8 bytes: UnsafeRawBufferPointer) {
        self.init(unsafeUninitializedCapacity: bytes.count) { $0.initialize(from: bytes).index }
    }
}
