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
public struct QueryEnumerator: RandomAccessCollection, Sendable, Equatable {
    /// The rows.
    public let rows: [QueryRow]
    /// The database's last sequence when the query ran.
    public let sequenceNumber: UInt64
    /// Rows in the whole index the query read, before ranges, skip and limit (for an all-documents query: the
    /// documents its mode covers).
    public let totalRows: Int
    private let database: Database

    package init(rows: [QueryRow], sequenceNumber: UInt64, totalRows: Int, database: Database) {
        self.rows = rows
        self.sequenceNumber = sequenceNumber
        self.totalRows = totalRows
        self.database = database
    }

    /// The same result with other rows (sorted or paged after the fact).
    func replacingRows(_ rows: [QueryRow]) -> QueryEnumerator {
        QueryEnumerator(rows: rows, sequenceNumber: sequenceNumber, totalRows: totalRows, database: database)
    }

    /// The position of the first row.
    public var startIndex: Int { rows.startIndex }
    /// The position after the last row.
    public var endIndex: Int { rows.endIndex }
    /// The row at `position`.
    public subscript(position: Int) -> QueryRow { rows[position] }

    /// True when the database has changed since the query ran, so running it again might give other rows
    /// (a conservative test: the new rows may well be equal).
    public var isStale: Bool { database.lastSequence != sequenceNumber }

    /// Equal when the rows are equal, in order.
    public static func == (a: QueryEnumerator, b: QueryEnumerator) -> Bool { a.rows == b.rows }
}
