import SofaStorage

/// The one error type Sofa throws; defined next to the storage layer, which throws it first.
public typealias SofaError = SofaStorage.SofaError
