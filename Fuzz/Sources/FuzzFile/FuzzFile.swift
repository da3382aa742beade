#if canImport(Glibc)
import Glibc
#endif
@_spi(Fuzzing) import Sofa
@_spi(Fuzzing) import SofaStorage

/// libFuzzer's entry: the input becomes a Sofa file, opened read-only, verified and read.
///
/// A `SofaError` is an expected outcome (the bytes were bad and were rejected cleanly); anything else — a
/// trap, an ASan report, a non-Sofa error — is a finding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    do {
        _ = try SofaFuzzing.openFile(bytes, directory: fuzzDirectory)
    } catch is SofaError {
        // Rejected with a typed error: the contract holds.
    } catch {
        fatalError("non-Sofa error: \(error)")
    }
    return 0
}

/// Where inputs are written: a RAM disk when there is one (the file is created and removed per input).
let fuzzDirectory: String = {
    #if canImport(Glibc)
    if access("/dev/shm", W_OK) == 0 { return "/dev/shm" }
    #endif
    return "/tmp"
}()
