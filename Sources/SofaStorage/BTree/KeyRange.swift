/// One end of a key range.
public struct KeyBound: Sendable, Hashable {
    /// The bound's key.
    public var key: [UInt8]
    /// Whether a key equal to the bound is inside the range.
    public var inclusive: Bool

    /// A bound at `key`.
    public init(_ key: [UInt8], inclusive: Bool = true) {
        self.key = key
        self.inclusive = inclusive
    }
}

/// A range of keys in `memcmp` order; a missing bound is open.
public struct KeyRange: Sendable, Hashable {
    /// The low end, or `nil` for no low end.
    public var lower: KeyBound?
    /// The high end, or `nil` for no high end.
    public var upper: KeyBound?

    /// A range from `lower` to `upper`.
    public init(lower: KeyBound? = nil, upper: KeyBound? = nil) {
        self.lower = lower
        self.upper = upper
    }

    /// Every key.
    public static let all = KeyRange()

    /// True when `key` is below the range.
    package func isBelow(_ key: UnsafeRawBufferPointer) -> Bool {
        guard let lower else { return false }
        let c = lower.key.withUnsafeBytes { compareBytes(key, $0) }
        return c < 0 || (c == 0 && !lower.inclusive)
    }

    /// True when `key` is above the range.
    package func isAbove(_ key: UnsafeRawBufferPointer) -> Bool {
        guard let upper else { return false }
        let c = upper.key.withUnsafeBytes { compareBytes(key, $0) }
        return c > 0 || (c == 0 && !upper.inclusive)
    }

    /// True when `key` is inside the range.
    package func contains(_ key: UnsafeRawBufferPointer) -> Bool { !isBelow(key) && !isAbove(key) }

    /// True when the range cannot hold any key.
    package var isEmpty: Bool {
        guard let lower, let upper else { return false }
        let c = lower.key.withUnsafeBytes { l in upper.key.withUnsafeBytes { compareBytes(l, $0) } }
        return c > 0 || (c == 0 && !(lower.inclusive && upper.inclusive))
    }
}
