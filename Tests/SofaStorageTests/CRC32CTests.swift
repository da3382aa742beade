import CSofaCRC
import Testing

@testable import SofaStorage

@Suite struct CRC32CTests {
    /// Known answers from RFC 3720 (iSCSI), appendix B.4.
    @Test func knownVectors() {
        #expect(CRC32C.checksum([UInt8](repeating: 0, count: 32)) == 0x8A91_36AA)
        #expect(CRC32C.checksum([UInt8](repeating: 0xFF, count: 32)) == 0x62A8_AB43)
        #expect(CRC32C.checksum((0..<32).map { UInt8($0) }) == 0x46DD_794E)
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
    }

    /// The hardware and table paths agree on every length and alignment (the hardware's three-stream stretches
    /// included), and chaining equals one pass.
    @Test func pathsAgree() {
        #if arch(x86_64)
        // Every x86-64 machine this runs on has SSE4.2; without it the test would compare the table with itself.
        #expect(sofa_crc32c_hardware() == 1)
        #endif
        var rng = SeededGenerator(seed: 0x5EED_C3C)
        let bytes = (0..<20_009).map { _ in UInt8.random(in: 0...255, using: &rng) }
        bytes.withUnsafeBytes { all in
            for start in 0..<9 {
                // Around the three-stream stretches (768 bytes) too.
                for length in [0, 1, 7, 8, 9, 63, 64, 65, 767, 768, 769, 1000, 1543, 2304, 4090, 4096, 20_000] {
                    let slice = UnsafeRawBufferPointer(rebasing: all[start..<(start + length)])
                    let hw = sofa_crc32c(0, slice.baseAddress, slice.count)
                    let sw = sofa_crc32c_software(0, slice.baseAddress, slice.count)
                    #expect(hw == sw, "start \(start) length \(length)")
                    let half = length / 2
                    let first = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: slice[0..<half]))
                    let chained = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: slice[half...]), seed: first)
                    #expect(chained == hw)
                }
            }
        }
    }
}
