import CSofaCRC

/// CRC32C (Castagnoli) checksums of stored bytes, as FORMAT.md's chunk framing uses them.
package enum CRC32C {
    /// The checksum of `bytes`, continuing from `seed` (0 to start).
    package static func checksum(_ bytes: UnsafeRawBufferPointer, seed: UInt32 = 0) -> UInt32 {
        sofa_crc32c(seed, bytes.baseAddress, bytes.count)
    }

    /// The checksum of a byte array.
    package static func checksum(_ bytes: [UInt8], seed: UInt32 = 0) -> UInt32 {
        bytes.withUnsafeBytes { checksum($0, seed: seed) }
    }

    /// True when the CPU's CRC32C instruction is used.
    package static var isHardwareAccelerated: Bool { sofa_crc32c_hardware() != 0 }
}
