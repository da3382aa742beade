@testable import Sofa

/// A deliberately naive in-memory implementation of view query semantics, to compare the engine with: map
/// every document, sort with `JSON.collate` then doc ID bytes, filter by the bounds one row at a time, group
/// and reduce with plain loops.
struct ViewQueryModel {
    struct Row {
        var key: JSON
        var value: JSON?
        var id: String
        var emitIndex: Int
        var sequence: UInt64
    }

    enum ModelReduce { case none, sum, count }

    /// Current documents: ID → (properties with _id/_rev, sequence).
    var documents: [String: (properties: JSON, sequence: UInt64)] = [:]
    let map: MapFunction
    let reduce: ModelReduce

    func rows() -> [Row] {
        var out: [Row] = []
        for (id, doc) in documents {
            var emitted: [(JSON, JSON?)] = []
            map(doc.properties) { emitted.append(($0, $1)) }
            for (i, e) in emitted.enumerated() {
                out.append(Row(key: e.0, value: e.1, id: id, emitIndex: i, sequence: doc.sequence))
            }
        }
        return out.sorted { a, b in
            let c = JSON.collate(a.key, b.key)
            if c != 0 { return c < 0 }
            if a.id != b.id { return Array(a.id.utf8).lexicographicallyPrecedes(Array(b.id.utf8)) }
            return a.emitIndex < b.emitIndex
        }
    }

    static func compareIDs(_ a: String, _ b: String) -> Int {
        let x = Array(a.utf8), y = Array(b.utf8)
        if x == y { return 0 }
        return x.lexicographicallyPrecedes(y) ? -1 : 1
    }

    /// Is `row` at or past the low end (key, docID, inclusive)?
    static func aboveLow(_ row: Row, _ key: JSON, _ docID: String?, _ inclusive: Bool) -> Bool {
        let c = JSON.collate(row.key, key)
        if c != 0 { return c > 0 }
        guard let docID else { return inclusive }
        let d = compareIDs(row.id, docID)
        return d > 0 || (d == 0 && inclusive)
    }

    static func belowHigh(_ row: Row, _ key: JSON, _ docID: String?, _ inclusive: Bool) -> Bool {
        let c = JSON.collate(row.key, key)
        if c != 0 { return c < 0 }
        guard let docID else { return inclusive }
        let d = compareIDs(row.id, docID)
        return d < 0 || (d == 0 && inclusive)
    }

    static func prefixMatch(_ key: JSON, _ level: Int) -> JSON {
        if level == 0 { return key }
        if case .string(let s) = key, level == 1 { return .string(s + "\u{FFFF}") }
        if case .array(var a) = key {
            if level == 1 { return .array(a + [[:]]) }
            if let last = a.popLast() { return .array(a + [prefixMatch(last, level - 1)]) }
        }
        return key
    }

    func run(_ q: Query) -> [(key: JSON, value: JSON?, id: String?, source: String?, sequence: UInt64)] {
        var rows = rows()
        if let keys = q.keys {
            rows = rows.filter { r in keys.contains { JSON.collate($0, r.key) == 0 } }
        } else {
            var start = q.startKey, end = q.endKey
            if q.prefixMatchLevel > 0 {
                if q.descending { start = start.map { Self.prefixMatch($0, q.prefixMatchLevel) } }
                else { end = end.map { Self.prefixMatch($0, q.prefixMatchLevel) } }
            }
            let startBound = (start, q.startKeyDocID, q.inclusiveStart), endBound = (end, q.endKeyDocID, q.inclusiveEnd)
            let (low, lowID, lowIn) = q.descending ? endBound : startBound
            let (high, highID, highIn) = q.descending ? startBound : endBound
            rows = rows.filter { r in
                (low.map { Self.aboveLow(r, $0, lowID, lowIn) } ?? true)
                    && (high.map { Self.belowHigh(r, $0, highID, highIn) } ?? true)
            }
        }
        var out: [(key: JSON, value: JSON?, id: String?, source: String?, sequence: UInt64)] = []
        let reducing = !q.mapOnly && (reduce != .none || q.groupLevel > 0)
        if !reducing {
            for r in q.descending ? rows.reversed() : rows {
                out.append((r.key, r.value, r.value?["_id"]?.stringValue ?? r.id, r.id, r.sequence))
            }
        } else if q.groupLevel == 0 {
            if !rows.isEmpty { out.append((.null, reduceValue(rows), nil, nil, 0)) }
        } else {
            var groups: [(key: JSON, rows: [Row])] = []
            for r in rows {
                let g: JSON = if case .array(let a) = r.key { .array(Array(a.prefix(q.groupLevel))) } else { r.key }
                if let last = groups.last, JSON.collate(last.key, g) == 0 {
                    groups[groups.count - 1].rows.append(r)
                } else {
                    groups.append((g, [r]))
                }
            }
            if q.descending { groups.reverse() }
            for g in groups { out.append((g.key, reduceValue(g.rows), nil, nil, 0)) }
        }
        return out
    }

    func reduceValue(_ rows: [Row]) -> JSON? {
        switch reduce {
        case .none: return nil
        case .count: return .number(Double(rows.count))
        case .sum: return .number(rows.reduce(0) { $0 + ($1.value?.doubleValue ?? 0) })
        }
    }
}
