@_spi(Fuzzing) import Sofa
@_spi(Fuzzing) import SofaStorage

/// libFuzzer's entry: the input is decoded as a chunk or a node payload (first byte picks which).
/// (`StorageFuzzing.runInput`: a `SofaError` is a clean rejection, anything else a finding.)
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    StorageFuzzing.runInput(data, size) { bytes in _ = try StorageFuzzing.decodeChunk(bytes) }
}
