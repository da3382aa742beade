import Testing

@testable import Sofa

/// The keys of a query result's rows.
func keys(_ result: QueryEnumerator) -> [JSON] { result.map(\.key) }

/// Runs a query configured by `configure`.
func run(_ view: View, _ configure: (inout Query) -> Void = { _ in }) throws -> QueryEnumerator {
    var query = view.createQuery()
    configure(&query)
    return try query.run()
}
