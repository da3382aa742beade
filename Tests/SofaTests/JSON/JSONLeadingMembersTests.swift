import Testing

@testable import Sofa

/// `JSON.parsingObject(_:leading:)`, the indexer's one-pass `_id` + `_rev` + body: the same document the old way
/// (parse, then insert `_id` at 0 and `_rev` at 1) gives, or `nil` when the body has one of those names.
@Suite struct JSONLeadingMembersTests {
    private let leading: [(String, JSON)] = [("_id", "doc-1"), ("_rev", "1-abc")]

    private func parse(_ text: String) throws -> JSON? {
        try Array(text.utf8).withUnsafeBytes { try JSON.parsingObject($0, leading: leading) }
    }

    /// The old construction, for comparison.
    private func inserted(_ text: String) throws -> JSON {
        guard case .object(var members) = try JSON(parsing: text) else { return try JSON(parsing: text) }
        members.updateValue("doc-1", forKey: "_id", insertingAt: 0)
        members.updateValue("1-abc", forKey: "_rev", insertingAt: 1)
        return .object(members)
    }

    @Test(arguments: [
        #"{"type":"track","genre":"Jazz","duration":235}"#,
        #"{}"#,
        #" { "a" : { "b" : [1, {"c": null}] }, "d": "e" } "#,
        #"{"a":1,"b":2,"a":3}"#,  // a duplicate of the body's own: first position, last value
        #"{"nested":{"_id":"inner","_rev":"x"}}"#,  // names only count at the top level
        #"{"\u005fidx":1}"#,  // an escaped key that is not a leading name
    ])
    func sameDocumentAsInserting(text: String) throws {
        let parsed = try #require(try parse(text))
        #expect(parsed == (try inserted(text)))
        guard case .object(let members) = parsed else { Issue.record("not an object"); return }
        #expect(Array(members.keys.prefix(2)) == ["_id", "_rev"])
    }

    @Test(arguments: [#"{"_id":"other"}"#, #"{"a":1,"_rev":"2-x"}"#, #"{"\u005fid":1}"#])
    func bodyWithALeadingNameIsDeclined(text: String) throws {
        #expect(try parse(text) == nil)
    }

    @Test func notAnObjectComesBackAsParsed() throws {
        #expect(try parse("[1,2]") == [1, 2])
        #expect(try parse(#""text""#) == "text")
    }

    @Test func errorsAreTheParsersOwn() throws {
        for text in ["{,}", #"{"a":1,}"#, "{"] {
            var plain: SofaError?
            do { _ = try JSON(parsing: text) } catch let error as SofaError { plain = error }
            var seeded: SofaError?
            do { _ = try parse(text) } catch let error as SofaError { seeded = error }
            #expect(seeded?.message == plain?.message, "\(text)")
            #expect(seeded != nil)
        }
    }
}
