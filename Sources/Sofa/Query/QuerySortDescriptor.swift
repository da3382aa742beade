/// When a view query brings the index up to date (Couchbase Lite's `indexUpdateMode`).
public enum IndexUpdateMode: Sendable, Hashable {
    /// Update the index first if it is stale (the default): results reflect every committed change.
    case before
    /// Never update: answer from the index as it is (possibly stale), at once.
    case never
    /// Answer from the index as it is, then update it in the background for the next query.
    case after
}

/// One sort criterion for ``Query/sortDescriptors``: a path into each row and a direction.
///
/// The path starts with `key`, `value`, `documentID` or `sequenceNumber`; further components, separated by
/// dots or written as subscripts, step into objects by member name and into arrays by position: `key[1]`,
/// `key.1`, `value.price`. Values compare by JSON collation, a missing value first.
///
/// ```swift
/// query.sortDescriptors = [QuerySortDescriptor("value.price", ascending: false), QuerySortDescriptor("key")]
/// ```
public struct QuerySortDescriptor: Sendable, Hashable {
    /// The path into the row.
    public var keyPath: String
    /// Smallest first when true.
    public var ascending: Bool

    /// A criterion.
    ///
    /// - Parameters:
    ///   - keyPath: `key`, `value`, `documentID` or `sequenceNumber`, then components into it.
    ///   - ascending: smallest first when true.
    public init(_ keyPath: String, ascending: Bool = true) {
        self.keyPath = keyPath
        self.ascending = ascending
    }

    /// The components of the path: `key[1].name` → `key`, `1`, `name`.
    var components: [String] {
        keyPath.replacingOccurrences("[", with: ".").replacingOccurrences("]", with: "")
            .split(separator: ".").map(String.init)
    }

    /// The value the path names in `row`, nil when missing.
    func value(in row: QueryRow) -> JSON? {
        let parts = components
        guard let head = parts.first else { return nil }
        var current: JSON?
        switch head {
        case "key": current = row.key
        case "value": current = row.value
        case "documentID": current = row.documentID.map { .string($0) }
        case "sequenceNumber": current = .number(Double(row.sequenceNumber))
        default: return nil
        }
        for part in parts.dropFirst() {
            guard let value = current else { return nil }
            if case .array = value, let index = Int(part) { current = value[index] } else { current = value[part] }
        }
        return current
    }
}

extension String {
    fileprivate func replacingOccurrences(_ target: Character, with replacement: String) -> String {
        var out = ""
        for c in self { if c == target { out += replacement } else { out.append(c) } }
        return out
    }
}

extension Query {
    /// `rows` stably sorted by `descriptors`.
    static func sorted(_ rows: [QueryRow], by descriptors: [QuerySortDescriptor]) -> [QueryRow] {
        guard !descriptors.isEmpty else { return rows }
        let keyed = rows.enumerated().map { item in
            (offset: item.offset, row: item.element, values: descriptors.map { $0.value(in: item.element) })
        }
        return keyed.sorted { a, b in
            for (i, d) in descriptors.enumerated() {
                let c = Query.collate(a.values[i], b.values[i])
                if c != 0 { return d.ascending ? c < 0 : c > 0 }
            }
            return a.offset < b.offset
        }.map { $0.row }
    }

    /// JSON collation with a missing value first.
    static func collate(_ a: JSON?, _ b: JSON?) -> Int {
        switch (a, b) {
        case (nil, nil): return 0
        case (nil, _): return -1
        case (_, nil): return 1
        case let (x?, y?): return JSON.collate(x, y)
        }
    }

    /// `rows` after skipping `skip` and keeping at most `limit`.
    static func page(_ rows: [QueryRow], skip: Int, limit: Int?) -> [QueryRow] {
        let start = min(skip, rows.count)
        let end = limit.map { min(rows.count, start + $0) } ?? rows.count
        return Array(rows[start..<end])
    }
}
