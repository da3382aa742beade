package extension Array {
    /// Room for `count` elements, at least doubling the capacity when it grows: a buffer kept and refilled (from
    /// leaf to leaf, or appended to record by record) is not reallocated for every fill a little larger than the
    /// largest so far, as `reserveCapacity(_:)` would (it allocates the exact count).
    mutating func reserveGrowing(_ count: Int) {
        if capacity < count { reserveCapacity(Swift.max(count, 2 * capacity)) }
    }
}
