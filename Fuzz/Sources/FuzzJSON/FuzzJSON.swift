@_spi(Fuzzing) import Sofa
@_spi(Fuzzing) import SofaStorage

/// libFuzzer's entry: the input is parsed as JSON.
///
/// A `SofaError` is an expected outcome (the bytes were bad and were rejected cleanly); anything else — a
/// trap, an ASan report, a non-Sofa error — is a finding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    do {
        _ = try SofaFuzzing.parseJSON(bytes)
    } catch is SofaError {
        // Rejected with a typed error: the contract holds.
    } catch {
        fatalError("non-Sofa error: \(error)")
    }
    return 0
}
