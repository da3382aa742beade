import Foundation
import Testing

@testable import Sofa
@testable import SofaStorage

/// A temporary directory for one test's databases, removed with everything in it when the test ends.
final class TemporaryDatabaseDirectory {
    let path: String

    init(_ name: String = "sofa-docs") {
        path = NSTemporaryDirectory() + "\(name)-\(UUID().uuidString.prefix(8))"
        try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    /// The path of database `name` inside the directory.
    func database(_ name: String = "test") -> String { "\(path)/\(name).sofa" }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// Plants `leftover` (100 bytes) in the closed database at `path`, checks a read-only open keeps it and a
/// writable open removes it, and returns that writable database for the caller's further checks.
func openRemovingLeftover(_ leftover: String, database path: String,
                          sourceLocation: SourceLocation = #_sourceLocation) throws -> Database {
    #expect(FileManager.default.createFile(atPath: leftover, contents: Data(repeating: 7, count: 100)),
            sourceLocation: sourceLocation)
    let reader = try Database(path: path, options: testOptions(readOnly: true))
    #expect(FileManager.default.fileExists(atPath: leftover), "a read-only open changes nothing",
            sourceLocation: sourceLocation)
    try reader.close()
    let writer = try Database(path: path, options: testOptions())
    #expect(!FileManager.default.fileExists(atPath: leftover), "a writable open removes it",
            sourceLocation: sourceLocation)
    return writer
}

/// Fast options for tests: no fsync (durability is the storage tests' subject).
func testOptions(readOnly: Bool = false, revisionTreeDepth: Int = 20) -> DatabaseOptions {
    DatabaseOptions(readOnly: readOnly, durability: .none, revisionTreeDepth: revisionTreeDepth)
}

/// What ``expectSound(_:_:sourceLocation:)`` checks: a database or a view, whose `verify()` lists its problems.
protocol Verifiable {
    func verify() throws -> [SofaError]
}

extension Database: Verifiable {}
extension View: Verifiable {}

/// Runs `verify()` of a database or a view and records every problem as a test failure.
func expectSound(_ subject: some Verifiable, _ context: String = "",
                 sourceLocation: SourceLocation = #_sourceLocation) {
    let what = subject is View ? "view verify" : "verify"
    do {
        let problems = try subject.verify()
        #expect(problems.isEmpty, "\(context) \(what): \(problems)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("\(context) \(what) threw \(error)", sourceLocation: sourceLocation)
    }
}

/// Expects `body` to throw a ``SofaError`` with `code`.
func expectSofaError<R>(_ code: SofaError.Code, _ context: String = "",
                        sourceLocation: SourceLocation = #_sourceLocation,
                        _ body: () throws -> R) {
    do {
        _ = try body()
        Issue.record("\(context): expected \(code), nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as SofaError {
        #expect(error.code == code, "\(context): \(error)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("\(context): expected SofaError \(code), got \(error)", sourceLocation: sourceLocation)
    }
}

/// The IDs of a query result's rows.
func ids(_ result: QueryEnumerator) -> [String] { result.map { $0.documentID ?? "?" } }
