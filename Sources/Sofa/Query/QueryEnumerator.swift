import SofaStorage

/// The result of running a ``Query``: its rows, in order, and what the database looked like then.
///
/// A collection of ``QueryRow``s. Two results are equal when their rows are (CBL's test for "has the result
/// changed?").
///
/// ```swift
/// let result = try query.run()
/// for row in result { print(row.key) }
/// if result.isStale, try query.run() != result { refresh() }
/// ```
///
/// All-documents rows are held as 8-byte references to the by-ID leaves they were read from and made into
/// ``QueryRow`` values as they are read, so a million-row scan keeps 8 MB of references, not a million rows.
public struct QueryEnumerator: RandomAccessCollection, Sendable, Equatable {
    private let store: RowStore
    /// The database's last sequence when the query ran.
    public let sequenceNumber: UInt64
    /// Rows in the whole index the query read, before ranges, skip and limit (for an all-documents query: the
    /// documents its mode covers).
    public let totalRows: Int
    private let database: Database

    package init(rows: [QueryRow], sequenceNumber: UInt64, totalRows: Int, database: Database) {
        self.init(store: RowStore(rows: rows), sequenceNumber: sequenceNumber, totalRows: totalRows,
                  database: database)
    }

    init(store: RowStore, sequenceNumber: UInt64, totalRows: Int, database: Database) {
        self.store = store
        self.sequenceNumber = sequenceNumber
        self.totalRows = totalRows
        self.database = database
    }

    /// The rows, as an array (made on each access for an all-documents result; iterate the result itself to
    /// read rows one at a time).
    public var rows: [QueryRow] { store.rows }

    /// The same result with other rows (sorted or paged after the fact).
    func replacingRows(_ rows: [QueryRow]) -> QueryEnumerator {
        QueryEnumerator(rows: rows, sequenceNumber: sequenceNumber, totalRows: totalRows, database: database)
    }

    /// The position of the first row.
    public var startIndex: Int { 0 }
    /// The position after the last row.
    public var endIndex: Int { store.count }
    /// The row at `position`.
    public subscript(position: Int) -> QueryRow { store[position] }

    /// True when the database has changed since the query ran, so running it again might give other rows
    /// (a conservative test: the new rows may well be equal).
    public var isStale: Bool { database.lastSequence != sequenceNumber }

    /// Equal when the rows are equal, in order.
    public static func == (a: QueryEnumerator, b: QueryEnumerator) -> Bool {
        a.count == b.count && a.elementsEqual(b)
    }
}

/// A query's rows in order: rows given in full (view and reduced rows, conflict rows), or all-documents rows as
/// references to by-ID entries — the leaf (kept once per leaf, in `leaves`) and the entry's index — from which
/// a ``QueryRow`` is made when the row is read.
struct RowStore: Sendable {
    /// A row: entry `index` of `leaves[leaf]`, or `full[index]` when `leaf` is ``RowStore/fullRow``.
    private struct Reference: Sendable {
        var leaf: UInt32
        var index: UInt32
    }

    private static let fullRow = UInt32.max

    private var full: [QueryRow]
    private var leaves: [Node] = []
    /// One per row once an entry row was added; empty while every row is in `full`, in order.
    private var references: [Reference] = []
    private let source: RowSource?
    private let keyIsSequence: Bool

    /// A store for entry rows read from `source`'s by-ID tree, keyed by sequence when `keyIsSequence`.
    init(source: RowSource, keyIsSequence: Bool) {
        full = []
        self.source = source
        self.keyIsSequence = keyIsSequence
    }

    /// A store of rows given in full.
    init(rows: [QueryRow] = []) {
        full = rows
        source = nil
        keyIsSequence = false
    }

    var count: Int { references.isEmpty ? full.count : references.count }

    /// Every row, in order.
    var rows: [QueryRow] { references.isEmpty ? full : (0..<count).map { self[$0] } }

    subscript(position: Int) -> QueryRow {
        if references.isEmpty { return full[position] }
        let r = references[position]
        if r.leaf == RowStore.fullRow { return full[Int(r.index)] }
        return entryRow(leaf: leaves[Int(r.leaf)], index: Int(r.index))
    }

    /// The row for entry `index` of `leaf`, as it will read once added.
    func entryRow(leaf: Node, index: Int) -> QueryRow {
        QueryRow(entry: QueryRow.Entry(leaf: leaf, keyIsSequence: keyIsSequence), index: index, source: source!)
    }

    mutating func reserveCapacity(_ rows: Int) {
        if source == nil { full.reserveCapacity(rows) } else { references.reserveCapacity(rows) }
    }

    mutating func append(_ row: consuming QueryRow) {
        if !references.isEmpty { references.append(Reference(leaf: RowStore.fullRow, index: UInt32(full.count))) }
        full.append(row)
    }

    /// Adds entry `index` of `leaf` (whose summary the caller has checked).
    mutating func append(leaf: Node, index: Int) {
        precondition(source != nil, "entry rows need the store made for them")
        if references.isEmpty && !full.isEmpty {
            references = full.indices.map { Reference(leaf: RowStore.fullRow, index: UInt32($0)) }
        }
        if leaves.last !== leaf {
            precondition(leaves.count < Int(RowStore.fullRow), "more than 2³² − 1 leaves in one result")
            leaves.append(leaf)
        }
        references.append(Reference(leaf: UInt32(leaves.count - 1), index: UInt32(index)))
    }
}
