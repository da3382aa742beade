import Testing

@testable import Sofa

/// One malformed input, the offset its error must name, and why it is malformed.
struct MalformedJSON: Sendable, CustomTestStringConvertible {
    let bytes: [UInt8]
    let offset: Int
    let reason: String

    init(_ text: String, _ offset: Int, _ reason: String) {
        self.init(bytes: Array(text.utf8), offset, reason)
    }

    init(bytes: [UInt8], _ offset: Int, _ reason: String) {
        self.bytes = bytes
        self.offset = offset
        self.reason = reason
    }

    var testDescription: String { "\(reason): \(bytes.map { $0 < 0x80 ? String(UnicodeScalar($0)) : "·" }.joined())" }
}

@Suite struct JSONParserTests {
    @Test func scalarsAtTopLevel() throws {
        #expect(try JSON(parsing: "null") == .null)
        #expect(try JSON(parsing: "true") == true)
        #expect(try JSON(parsing: "false") == false)
        #expect(try JSON(parsing: "42") == 42)
        #expect(try JSON(parsing: #""hi""#) == "hi")
        #expect(try JSON(parsing: " \t\r\n[] \n") == [])
        #expect(try JSON(parsing: "{}") == [:])
    }

    @Test func allEntryPointsAgree() throws {
        let text = #"{"_id":"track-00000042","type":"track","genre":"Rock","duration":235,"tags":["live",null]}"#
        let fromString = try JSON(parsing: text)
        let fromArray = try JSON(parsing: Array(text.utf8))
        let fromRaw = try Array(text.utf8).withUnsafeBytes { try JSON(parsing: $0) }
        #expect(fromString == fromArray && fromArray == fromRaw)
        #expect(fromString["genre"] == "Rock")
        #expect(fromString["duration"]?.intValue == 235)
        #expect(fromString["tags"]?[1] == .null)
    }

    @Test func objectsKeepMemberOrder() throws {
        let value = try JSON(parsing: #"{"b":2,"a":1,"c":{"z":0,"y":[]}}"#)
        #expect(value.objectValue.map { Array($0.keys) } == ["b", "a", "c"])
        #expect(value["c"]?.objectValue.map { Array($0.keys) } == ["z", "y"])
        #expect(try value.serialized() == #"{"b":2,"a":1,"c":{"z":0,"y":[]}}"#)
    }

    @Test func duplicateKeysKeepFirstPositionAndLastValue() throws {
        let value = try JSON(parsing: #"{"a":1,"b":2,"a":3}"#)
        #expect(try value.serialized() == #"{"a":3,"b":2}"#)
        // The same key written with an escape is still the same key.
        let escaped = try JSON(parsing: #"{"ab":1,"x":0,"\u0061b":2}"#)
        #expect(try escaped.serialized() == #"{"ab":2,"x":0}"#)
        // Beyond the small-object path.
        let many = (0..<40).map { #""k\#($0 % 30)":\#($0)"# }.joined(separator: ",")
        let large = try JSON(parsing: "{\(many)}")
        #expect(large.objectValue?.count == 30)
        #expect(large["k5"] == 35)
        #expect(large.objectValue?.keys.first == "k0")
        // Many distinct keys, some sharing length and first and last bytes, all kept in order.
        let distinct = (0..<40).map { #""k\#($0)x":\#($0)"# }.joined(separator: ",")
        let wide = try JSON(parsing: "{\(distinct)}")
        #expect(wide.objectValue.map { Array($0.keys) } == (0..<40).map { "k\($0)x" })
        // The empty key is a key like any other.
        #expect(try JSON(parsing: #"{"":1,"a":2,"":3}"#).serialized() == #"{"":3,"a":2}"#)
    }

    @Test func stringEscapes() throws {
        #expect(try JSON(parsing: #""\"\\\/\b\f\n\r\t""#) == "\"\\/\u{08}\u{0C}\n\r\t")
        #expect(try JSON(parsing: #""\u0041\u00e9\u4e2D""#) == "Aé中")
        #expect(try JSON(parsing: #""\u0000""#) == "\u{0}")
        #expect(try JSON(parsing: #""\uD83D\uDE00 \ud834\udd1e""#) == "😀 𝄞")
        #expect(try JSON(parsing: #""plain then \n escape""#) == "plain then \n escape")
    }

    @Test func rawNonASCIIText() throws {
        let text = #"{"artist":"Beyoncé","album":"東京","title":"😀 Ελληνικά"}"#
        let value = try JSON(parsing: text)
        #expect(value["artist"] == "Beyoncé")
        #expect(value["album"] == "東京")
        #expect(value["title"] == "😀 Ελληνικά")
        #expect(try value.serialized() == text)
    }

    @Test func longStringsCrossTheEightByteScan() throws {
        for length in 0..<40 {
            let body = String(repeating: "a", count: length)
            #expect(try JSON(parsing: "\"\(body)\"") == .string(body))
            #expect(try JSON(parsing: "\"\(body)\\n\(body)\"") == .string(body + "\n" + body))
            #expect(try JSON(parsing: "\"\(body)é\(body)\"") == .string(body + "é" + body))
        }
    }

    @Test func numbers() throws {
        #expect(try JSON(parsing: "0") == 0)
        #expect(try JSON(parsing: "-0").doubleValue?.sign == .minus)
        #expect(try JSON(parsing: "235") == 235)
        #expect(try JSON(parsing: "-17.25") == -17.25)
        #expect(try JSON(parsing: "0.1") == 0.1)
        #expect(try JSON(parsing: "1E2") == 100)
        #expect(try JSON(parsing: "1e+2") == 100)
        #expect(try JSON(parsing: "1e-2") == 0.01)
        #expect(try JSON(parsing: "0.30000000000000004") == 0.30000000000000004)
        #expect(try JSON(parsing: "3.141592653589793238462643383279") == .number(Double.pi))
        #expect(try JSON(parsing: "123456789012345678901234567890") == 1.2345678901234568e29)
        #expect(try JSON(parsing: "0.000000000000000000000000000001") == 1e-30)
    }

    @Test func integersUpToTwoToThe53AreExact() throws {
        let limit = 9_007_199_254_740_992.0  // 2^53
        #expect(try JSON(parsing: "9007199254740992") == .number(limit))
        #expect(try JSON(parsing: "-9007199254740992") == .number(-limit))
        #expect(try JSON(parsing: "9007199254740991").intValue == 9_007_199_254_740_991)
        // 2^53 + 1 has no double; the nearest (ties to even) is 2^53.
        #expect(try JSON(parsing: "9007199254740993") == .number(limit))
        #expect(try JSON(parsing: "18014398509481988") == 18_014_398_509_481_988)
    }

    @Test func extremeNumbers() throws {
        #expect(try JSON(parsing: "1.7976931348623157e308") == .number(.greatestFiniteMagnitude))
        #expect(try JSON(parsing: "-1.7976931348623157e308") == .number(-.greatestFiniteMagnitude))
        #expect(try JSON(parsing: "2.2250738585072014e-308") == .number(.leastNormalMagnitude))
        #expect(try JSON(parsing: "4.9406564584124654e-324") == .number(.leastNonzeroMagnitude))
        #expect(try JSON(parsing: "1e-400") == 0)
        #expect(try JSON(parsing: "0e999999999999") == 0)
        #expect(try JSON(parsing: "1e22") == 1e22)
        #expect(try JSON(parsing: "1e23") == 1e23)
    }

    static let malformed: [MalformedJSON] = [
        MalformedJSON("", 0, "empty input"),
        MalformedJSON("  ", 2, "only whitespace"),
        MalformedJSON("[1,]", 3, "trailing comma in an array"),
        MalformedJSON(#"{"a":1,}"#, 7, "trailing comma in an object"),
        MalformedJSON("[,1]", 1, "leading comma"),
        MalformedJSON("[1 2]", 3, "missing comma"),
        MalformedJSON("[1,2", 4, "unclosed array"),
        MalformedJSON("{", 1, "unclosed object"),
        MalformedJSON("]", 0, "stray closing bracket"),
        MalformedJSON(#"{"a"}"#, 4, "member without a value"),
        MalformedJSON(#"{"a" 1}"#, 5, "missing colon"),
        MalformedJSON("{a:1}", 1, "unquoted key"),
        MalformedJSON("{1:1}", 1, "number as key"),
        MalformedJSON("01", 1, "leading zero"),
        MalformedJSON("-01", 2, "leading zero after minus"),
        MalformedJSON("00", 1, "double zero"),
        MalformedJSON("-", 1, "lone minus"),
        MalformedJSON("+1", 0, "plus sign"),
        MalformedJSON(".5", 0, "no integer part"),
        MalformedJSON("1.", 2, "no fraction digits"),
        MalformedJSON("1.e5", 2, "no fraction digits before the exponent"),
        MalformedJSON("1e", 2, "no exponent digits"),
        MalformedJSON("1e+", 3, "no exponent digits after the sign"),
        MalformedJSON("0x10", 1, "hex number"),
        MalformedJSON("1e400", 0, "too large for a double"),
        MalformedJSON("[-1e400]", 1, "too large for a double, negative"),
        MalformedJSON("NaN", 0, "NaN literal"),
        MalformedJSON("Infinity", 0, "Infinity literal"),
        MalformedJSON("-Infinity", 1, "negative Infinity literal"),
        MalformedJSON("tru", 3, "truncated true"),
        MalformedJSON("nul", 3, "truncated null"),
        MalformedJSON("nulL", 3, "misspelt null"),
        MalformedJSON("True", 0, "capitalised literal"),
        MalformedJSON("1 2", 2, "two values"),
        MalformedJSON("[1] x", 4, "garbage after the value"),
        MalformedJSON(#""abc"#, 4, "unterminated string"),
        MalformedJSON(#""a\"#, 3, "unterminated escape"),
        MalformedJSON(#""\x""#, 2, "unknown escape"),
        MalformedJSON(#""\u12G4""#, 5, "bad hex digit"),
        MalformedJSON(#""\u12""#, 5, "short unicode escape"),
        MalformedJSON(#""\uD800""#, 7, "lone high surrogate"),
        MalformedJSON(#""\uD800x""#, 7, "high surrogate followed by a character"),
        MalformedJSON(#""\uD800\u0041""#, 7, "high surrogate followed by a non-surrogate"),
        MalformedJSON(#""\uD800\uD800""#, 7, "two high surrogates"),
        MalformedJSON(#""\uDC00""#, 1, "lone low surrogate"),
        MalformedJSON(#""ab\uDFFF\uD800""#, 3, "reversed pair"),
        MalformedJSON("\"a\u{01}b\"", 2, "raw control character"),
        MalformedJSON("\"\t\"", 1, "raw tab in a string"),
        MalformedJSON("\u{FEFF}1", 0, "byte order mark"),
        MalformedJSON("'a'", 0, "single quotes"),
        MalformedJSON("[1]\u{0}", 3, "NUL after the value"),
        MalformedJSON("\u{0B}1", 0, "vertical tab is not whitespace"),
        MalformedJSON(bytes: [0x22, 0xC3, 0x28, 0x22], 2, "missing continuation byte"),
        MalformedJSON(bytes: [0x22, 0xFF, 0x22], 1, "byte never valid in UTF-8"),
        MalformedJSON(bytes: [0x22, 0x80, 0x22], 1, "stray continuation byte"),
        MalformedJSON(bytes: [0x22, 0xC0, 0xAF, 0x22], 1, "overlong two-byte form"),
        MalformedJSON(bytes: [0x22, 0xE0, 0x80, 0xAF, 0x22], 2, "overlong three-byte form"),
        MalformedJSON(bytes: [0x22, 0xED, 0xA0, 0x80, 0x22], 2, "UTF-8 encoded surrogate"),
        MalformedJSON(bytes: [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], 2, "beyond U+10FFFF"),
        MalformedJSON(bytes: [0x22, 0xE2, 0x82], 3, "truncated sequence at the end"),
        MalformedJSON(bytes: [0x22, 0x61, 0x5C, 0x6E, 0xE2, 0x28, 0xA1, 0x22], 5, "bad UTF-8 after an escape"),
        MalformedJSON(bytes: [0x5B, 0xC3, 0xA9, 0x5D], 1, "non-ASCII outside a string"),
    ]

    @Test(arguments: malformed)
    func malformedInputNamesTheOffset(_ input: MalformedJSON) throws {
        let error = try #require(throws: SofaError.self) { try JSON(parsing: input.bytes) }
        #expect(error.code == .invalidJSON)
        #expect(error.offset == input.offset, "\(error.message)")
        #expect(error.message.contains("expected"), "\(error.message)")
        #expect(error.message.contains("at offset \(input.offset)"), "\(error.message)")
    }

    @Test func errorMessagesSayWhatWasExpected() throws {
        let comma = try #require(throws: SofaError.self) { try JSON(parsing: "[1 2]") }
        #expect(comma.message == "expected ',' or ']' after an array item at offset 3, found '2'")
        let end = try #require(throws: SofaError.self) { try JSON(parsing: #"{"a":"#) }
        #expect(end.message == "expected a value at offset 5, found the end of the input")
        let huge = try #require(throws: SofaError.self) { try JSON(parsing: "1e400") }
        #expect(huge.message.contains("range of a 64-bit double"))
        let surrogate = try #require(throws: SofaError.self) { try JSON(parsing: #""\uDC00""#) }
        #expect(surrogate.message.contains("lone low surrogate"))
        #expect(surrogate.description.hasPrefix("invalidJSON: "))
    }

    @Test func nestingUpToTheLimitParses() throws {
        let depth = JSON.maximumNestingDepth
        let arrays = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
        var value = try JSON(parsing: arrays)
        for _ in 1..<depth { value = try #require(value[0]) }
        #expect(value == [])
        let objects = String(repeating: #"{"a":"#, count: depth - 1) + "{}" + String(repeating: "}", count: depth - 1)
        #expect(try JSON(parsing: objects).objectValue?.count == 1)
    }

    @Test func nestingBeyondTheLimitIsAnError() throws {
        let depth = JSON.maximumNestingDepth + 1
        let arrays = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
        let error = try #require(throws: SofaError.self) { try JSON(parsing: arrays) }
        #expect(error.code == .invalidJSON)
        #expect(error.offset == JSON.maximumNestingDepth)
        #expect(error.message.contains("at most \(JSON.maximumNestingDepth) nested"))
        let mixed = String(repeating: #"[{"k":"#, count: depth)
        let mixedError = try #require(throws: SofaError.self) { try JSON(parsing: mixed) }
        #expect(mixedError.offset == 6 * (JSON.maximumNestingDepth / 2))
    }

    /// The limit is safe on any thread: parse, serialize, compare, hash, decode and free a value nested to the
    /// limit on a thread with a 512 KiB stack, the smallest default thread stack (macOS). Parsing and
    /// serializing use no stack per level; the synthesized `==` and `hash(into:)` and freeing do, and a debug
    /// build (the worst case) needs about 384 KiB for them.
    @Test func nestingAtTheLimitFitsASmallStack() throws {
        let depth = JSON.maximumNestingDepth
        let text = String(repeating: #"[{"k":"#, count: depth / 2) + "0" + String(repeating: "}]", count: depth / 2)
        let other = try JSON(parsing: text)
        let outcome = Outcome()
        runOnThread(stackSize: 512 * 1024) {
            do {
                let value = try JSON(parsing: text)
                let roundTrip = try JSON(parsing: value.serialized()) == other
                let decoded = try value.decode(JSON.self) == other && JSON(encoding: value) == other
                let hashed = value.hashValue == other.hashValue
                outcome.set(roundTrip && decoded && hashed)
            } catch {
                outcome.set(false)
            }
        }
        #expect(outcome.value == true)
    }

    /// Parsing alone needs no stack per level: a 64 KiB thread parses and rejects input nested a million deep.
    @Test func parsingDeepInputNeedsLittleStack() throws {
        let input = [UInt8](repeating: UInt8(ascii: "["), count: 1_000_000)
        let outcome = Outcome()
        runOnThread(stackSize: 64 * 1024) {
            do {
                _ = try JSON(parsing: input)
                outcome.set(false)
            } catch let error as SofaError {
                outcome.set(error.offset == JSON.maximumNestingDepth)
            } catch {
                outcome.set(false)
            }
        }
        #expect(outcome.value == true)
    }

    /// Far deeper input must fail at the limit, not overflow the stack.
    @Test func hugeNestingDoesNotCrash() throws {
        let input = [UInt8](repeating: UInt8(ascii: "["), count: 1_000_000)
        let error = try #require(throws: SofaError.self) { try JSON(parsing: input) }
        #expect(error.offset == JSON.maximumNestingDepth)
    }

    @Test func trackDocumentFromTheBenchmark() throws {
        let line = #"{"_id":"track-00000042","type":"track","genre":"Rock","artist":"The Foo","album":"Bar Baz","#
            + #""title":"Qux","duration":235,"year":1999,"rating":4}"#
        let track = try JSON(parsing: line)
        #expect(track["_id"]?.stringValue == "track-00000042")
        #expect(track["year"]?.intValue == 1999)
        #expect(track.objectValue?.keys.elementsEqual(
            ["_id", "type", "genre", "artist", "album", "title", "duration", "year", "rating"]) == true)
        #expect(try track.serialized() == line)
    }
}

/// A result handed back from another thread; `runOnThread` joins before it is read.
private final class Outcome: @unchecked Sendable {
    private(set) var value: Bool?
    func set(_ newValue: Bool) { value = newValue }
}
