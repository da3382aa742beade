#if canImport(Glibc)
import Glibc
#endif
@_spi(Fuzzing) import Sofa
@_spi(Fuzzing) import SofaStorage

/// libFuzzer's entry: the input becomes a Sofa file, opened read-only, verified and read.
/// (`StorageFuzzing.runInput`: a `SofaError` is a clean rejection, anything else a finding.)
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    StorageFuzzing.runInput(data, size) { bytes in _ = try SofaFuzzing.openFile(bytes, directory: fuzzDirectory) }
}

/// Where inputs are written: a RAM disk when there is one (the file is created and removed per input).
let fuzzDirectory: String = {
    #if canImport(Glibc)
    if access("/dev/shm", W_OK) == 0 { return "/dev/shm" }
    #endif
    return "/tmp"
}()
