import Testing

@testable import Sofa

/// Runs `View.verify()` and records every problem as a test failure.
func expectSound(_ view: View, _ context: String = "", sourceLocation: SourceLocation = #_sourceLocation) {
    do {
        let problems = try view.verify()
        #expect(problems.isEmpty, "\(context) view verify: \(problems)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("\(context) view verify threw \(error)", sourceLocation: sourceLocation)
    }
}

/// The keys of a query result's rows.
func keys(_ result: QueryEnumerator) -> [JSON] { result.map(\.key) }

/// Runs a query configured by `configure`.
func run(_ view: View, _ configure: (inout Query) -> Void = { _ in }) throws -> QueryEnumerator {
    var query = view.createQuery()
    configure(&query)
    return try query.run()
}
