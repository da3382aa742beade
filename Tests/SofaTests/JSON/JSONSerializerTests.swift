import Testing

@testable import Sofa

@Suite struct JSONSerializerTests {
    @Test func compactWithMembersInStoredOrder() throws {
        let value: JSON = ["type": "track", "tags": ["live", nil, true, false], "nested": ["z": 1, "a": [:]]]
        #expect(try value.serialized() == #"{"type":"track","tags":["live",null,true,false],"nested":{"z":1,"a":{}}}"#)
        #expect(try JSON.array([]).serialized() == "[]")
        #expect(try JSON.object([:]).serialized() == "{}")
        #expect(try JSON.null.serialized() == "null")
    }

    @Test func bytesStringAndAppendingAgree() throws {
        let value: JSON = ["red", [:], 1.5]
        var buffer = Array("prefix:".utf8)
        try value.serialize(into: &buffer)
        #expect(buffer == Array("prefix:".utf8) + (try value.serializedBytes()))
        #expect(try value.serialized() == #"["red",{},1.5]"#)
    }

    /// `withUnsafeText` hands over the text staged on the stack when it fits, through an array when it does not,
    /// after headroom that is the caller's: the same bytes as `serializedBytes` on both sides of the staging
    /// buffer's size, with the underscore flag, and the headroom writable without touching the text.
    @Test func withUnsafeTextGivesTheSameBytesAfterItsHeadroom() throws {
        for headroom in [0, 2, 64] {
            // The text is the string's `count` bytes and 15 more; the staging buffer holds 1,024 − headroom, less
            // the room a string's check reserves past it: every count from well inside to past the edge.
            let edge = 1_024 - headroom - 15
            for count in [0, 1, 1_000, 5_000] + Array((edge - 24)...(edge + 2)) {
                let text = String(repeating: "é", count: count / 2) + String(repeating: "a", count: count % 2)
                let value: JSON = ["s": .string(text), "_x": 1]
                let expected = try value.serializedBytes()
                let underscore = try JSONSerializer.withUnsafeText(of: value, headroom: headroom) { buffer, flag in
                    for i in 0..<headroom { buffer[i] = 0xEE }
                    #expect(Array(buffer[headroom...]) == expected, "headroom \(headroom), \(count)")
                    return flag
                }
                #expect(underscore, "a top-level member starting with _")
            }
        }
        #expect(try !JSONSerializer.withUnsafeText(of: ["a": ["_b": 1]], headroom: 2) { $1 }, "only the top level")
        #expect(throws: SofaError.self) {
            try JSONSerializer.withUnsafeText(of: [.number(.nan)], headroom: 2) { _, _ in }
        }
    }

    @Test func wholeNumbersPrintWithoutAFraction() throws {
        #expect(try JSON.number(235.0).serialized() == "235")
        #expect(try JSON.number(-17).serialized() == "-17")
        #expect(try JSON.number(0).serialized() == "0")
        #expect(try JSON.number(9_007_199_254_740_992).serialized() == "9007199254740992")
        #expect(try JSON.number(-9_007_199_254_740_992).serialized() == "-9007199254740992")
        // Beyond 2^53 whole numbers are spaced apart; Swift's shortest form switches to an exponent there.
        #expect(try JSON.number(9_007_199_254_740_994).serialized() == "9.007199254740994e+15")
        #expect(try JSON.number(1e21).serialized() == "1e+21")
    }

    /// `-0` keeps its sign through a round trip; collation folds it to 0 separately.
    @Test func negativeZeroPrintsWithItsSign() throws {
        #expect(try JSON.number(-0.0).serialized() == "-0")
        let back = try JSON(parsing: JSON.number(-0.0).serialized())
        #expect(back.doubleValue?.sign == .minus)
    }

    @Test func otherNumbersUseTheShortestRoundTripForm() throws {
        let cases: [(Double, String)] = [
            (0.1, "0.1"), (-2.5, "-2.5"), (0.30000000000000004, "0.30000000000000004"), (1e-7, "1e-07"),
            (1.5e300, "1.5e+300"), (.leastNonzeroMagnitude, "5e-324"),
            (.greatestFiniteMagnitude, "1.7976931348623157e+308"),
            (123.456, "123.456"),
        ]
        for (number, text) in cases {
            #expect(try JSON.number(number).serialized() == text)
            #expect(try JSON(parsing: text) == .number(number))
        }
    }

    @Test func nanAndInfinityCannotBeSerialized() throws {
        for number in [Double.nan, .infinity, -.infinity] {
            let error = try #require(throws: SofaError.self) { try JSON.array([1, .number(number)]).serialized() }
            #expect(error.code == .invalidValue)
        }
    }

    @Test func failedSerializationLeavesTheBufferAlone() throws {
        var buffer = Array("kept".utf8)
        #expect(throws: SofaError.self) { try JSON.array(["a", .number(.nan)]).serialize(into: &buffer) }
        #expect(buffer == Array("kept".utf8))
    }

    @Test func descriptionIsTheSerializedTextOrAReadableFallback() {
        let value: JSON = ["a": [1, "x"]]
        #expect(value.description == #"{"a":[1,"x"]}"#)
        #expect("\(value)" == #"{"a":[1,"x"]}"#)
        #expect(JSON.array([.number(.nan), .number(.infinity), .number(-.infinity)]).description
            == "[NaN,Infinity,-Infinity]")
    }

    @Test func stringEscaping() throws {
        let value = JSON.string(
            "quote\" backslash\\ slash/ \n\r\t\u{08}\u{0C} \u{0}\u{1F} del\u{7F} é 中 😀 \u{2028}")
        let expected = #""quote\" backslash\\ slash/ \n\r\t\b\f \u0000\u001F del"# + "\u{7F} é 中 😀 \u{2028}\""
        #expect(try value.serialized() == expected)
        #expect(try JSON(parsing: expected) == value)
    }

    @Test func keysAreEscapedToo() throws {
        let value: JSON = ["a\"b": 1, "line\nbreak": 2]
        #expect(try value.serialized() == #"{"a\"b":1,"line\nbreak":2}"#)
    }

    /// Strings of up to 16 bytes are checked in registers, longer ones copied to the output first and scanned
    /// there a word at a time: an escape at any position of any length up to a few words (the control characters
    /// at both ends of their range, next to space and DEL, which need none), and non-ASCII around it, must come
    /// out as escaped byte by byte.
    @Test func escapesAtEveryPositionOfShortStrings() throws {
        func expected(_ text: String) -> String {
            var out = "\""
            for scalar in text.unicodeScalars {
                switch scalar {
                case "\"": out += #"\""#
                case "\\": out += #"\\"#
                case "\n": out += #"\n"#
                case "\u{1}": out += #"\u0001"#
                case "\u{0}": out += #"\u0000"#
                case "\u{1F}": out += #"\u001F"#
                default: out.unicodeScalars.append(scalar)
                }
            }
            return out + "\""
        }
        for length in 0...33 {
            let plain = String(repeating: "x", count: length)
            #expect(try JSON.string(plain).serialized() == expected(plain))
            for position in 0..<length {
                for special in ["\"", "\\", "\n", "\u{1}", "\u{0}", "\u{1F}", " ", "\u{7F}", "é"] {
                    var scalars = Array(plain.unicodeScalars)
                    scalars[position] = special.unicodeScalars.first!
                    var text = ""
                    text.unicodeScalars.append(contentsOf: scalars)
                    #expect(try JSON.string(text).serialized() == expected(text))
                    let asKey: JSON = [text: .string(text)]
                    #expect(try asKey.serialized() == "{\(expected(text)):\(expected(text))}")
                }
            }
        }
    }

    /// Scalars are written in place and arrays and objects opened from inside the loop over their container:
    /// containers among scalars, empty ones included, at several depths, keep their order and separators.
    @Test func containersAmongScalars() throws {
        let value: JSON = [
            "a": 1, "empty": [:], "list": [1, [], ["x": [true, nil, "s"]], [[]], "t"], "b": "two",
            "inner": ["deeper": ["deepest": [:]], "n": -0.5], "c": nil,
        ]
        let text = #"{"a":1,"empty":{},"list":[1,[],{"x":[true,null,"s"]},[[]],"t"],"b":"two","#
            + #""inner":{"deeper":{"deepest":{}},"n":-0.5},"c":null}"#
        #expect(try value.serialized() == text)
        #expect(try JSON(parsing: text) == value)
        #expect(try JSON.array([]).serialized() == "[]")
        #expect(try JSON.object([:]).serialized() == "{}")
        #expect(try JSON.string("root").serialized() == #""root""#)
    }

    @Test func nestingLimitMatchesTheParser() throws {
        var value: JSON = []
        for _ in 1..<JSON.maximumNestingDepth { value = [value] }
        let text = try value.serialized()
        #expect(try JSON(parsing: text) == value)
        let tooDeep: JSON = [value]
        let error = try #require(throws: SofaError.self) { try tooDeep.serialized() }
        #expect(error.code == .invalidValue)
        #expect(error.message.contains("\(JSON.maximumNestingDepth)"))
    }

    /// The first `JSONSerializer.recursionDepth` levels are written by recursion, deeper ones on an explicit
    /// stack: values crossing that level anywhere (objects and arrays, with siblings before and after) come out
    /// the same, the parser's limit holds on both sides, and `description` writes values deeper than any limit.
    @Test func valuesCrossingTheRecursionDepthAreWrittenWhole() throws {
        // `levels` nested containers around `leaf`, alternating object and array, each with scalars around its
        // child, and their text, built alongside.
        func nested(_ levels: Int, leaf: (value: JSON, text: String) = ("leaf", #""leaf""#))
            -> (value: JSON, text: String) {
            var (value, text) = leaf
            for level in 0..<levels {
                if level % 2 == 0 {
                    value = ["a": .number(Double(level)), "child": value, "z": nil]
                    text = #"{"a":\#(level),"child":\#(text),"z":null}"#
                } else {
                    value = [true, value, "s"]
                    text = #"[true,\#(text),"s"]"#
                }
            }
            return (value, text)
        }
        func expectTooDeep(_ value: JSON, _ comment: Comment) throws {
            let error = try #require(throws: SofaError.self, comment) { try value.serialized() }
            #expect(error.code == .invalidValue, comment)
            #expect(error.message.contains("\(JSON.maximumNestingDepth)"), comment)
        }
        let recursion = JSONSerializer.recursionDepth
        for levels in [recursion - 1, recursion, recursion + 1, recursion + 2, 2 * recursion + 1,
                       JSON.maximumNestingDepth] {
            // Empty containers as the innermost value: the explicit stack's root itself when it is met there.
            for leaf: (value: JSON, text: String) in [("leaf", #""leaf""#), ([], "[]"), ([:], "{}")] {
                let (value, text) = nested(levels, leaf: leaf)
                let label: Comment = "\(levels) levels around \(leaf.text)"
                if levels < JSON.maximumNestingDepth || leaf.text == #""leaf""# {
                    #expect(try value.serialized() == text, label)
                } else {
                    try expectTooDeep(value, label)  // the empty container is level 513
                }
                #expect(value.description == text, label)
            }
            // Beside a shallow sibling, the deep path starts part-way down.
            let value = nested(levels).value
            let wrapped: JSON = ["before": [1, [2]], "deep": value]
            if levels < JSON.maximumNestingDepth {
                #expect(try JSON(parsing: wrapped.serialized()) == wrapped, "\(levels) levels, wrapped")
            } else {
                try expectTooDeep(wrapped, "\(levels) levels, wrapped")
            }
        }
        // Two deep siblings in one container just above the recursion depth: the explicit stack is entered twice
        // from one loop.
        let child = nested(10)
        var siblings: JSON = [child.value, child.value]
        var siblingsText = "[\(child.text),\(child.text)]"
        for _ in 0..<(recursion - 1) {
            siblings = [siblings]
            siblingsText = "[\(siblingsText)]"
        }
        #expect(try siblings.serialized() == siblingsText)
        // A NaN below the recursion depth: `description`'s readable form, and strict mode's error.
        let deepNaN = nested(recursion + 3, leaf: (.number(.nan), "NaN"))
        #expect(deepNaN.value.description == deepNaN.text)
        let nanError = try #require(throws: SofaError.self) { try deepNaN.value.serialized() }
        #expect(nanError.code == .invalidValue && nanError.message.hasPrefix("cannot serialize nan"))
        try expectTooDeep(nested(JSON.maximumNestingDepth + 1).value, "\(JSON.maximumNestingDepth + 1) levels")
        let veryDeep = nested(3 * JSON.maximumNestingDepth)
        #expect(veryDeep.value.description == veryDeep.text)
    }

    /// Output passes through a 1 KiB staging buffer: strings and documents longer than it, and strings ending
    /// on each side of its boundary, come out whole.
    @Test func outputLongerThanTheStagingBuffer() throws {
        let long = String(repeating: "abc\"é\n", count: 1000)
        let value: JSON = ["long": .string(long), "numbers": .array((0..<2000).map { .number(Double($0 * 7919)) })]
        #expect(try JSON(parsing: value.serialized()) == value)
        for length in 1000...1030 {
            let plain = String(repeating: "x", count: length)
            #expect(try JSON.string(plain).serialized() == "\"\(plain)\"")
            let array: JSON = [.string(plain), .string(plain + "\u{1}")]
            #expect(try array.serialized() == "[\"\(plain)\",\"\(plain)\\u0001\"]")
        }
        // Short strings, clean and escaped, starting from 26 to 2 bytes before the staging buffer's end: the
        // register path's room check flushes, or not, before it writes or falls back.
        for length in 990...1022 {
            let pad = String(repeating: "x", count: length)
            let array: JSON = [.string(pad), "ab", "a\"b", "0123456789abcdef", "é"]
            #expect(try array.serialized() == "[\"\(pad)\",\"ab\",\"a\\\"b\",\"0123456789abcdef\",\"é\"]")
        }
        var buffer: [UInt8] = []
        for _ in 0..<100 { try value.serialize(into: &buffer) }
        #expect(buffer.count == 100 * (try value.serializedBytes().count))
    }

    @Test func nonNativeStringsAreWrittenToo() throws {
        // A substring-backed string is still a String; make sure the slow UTF-8 path writes the same bytes.
        let long = String(repeating: "ab\"", count: 20)
        let sliced = String(long.dropFirst(3))
        #expect(try JSON.string(sliced).serialized() == "\"" + String(repeating: #"ab\""#, count: 19) + "\"")
    }
}
