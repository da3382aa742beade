import Testing

@testable import Sofa

// MARK: - Types to round-trip

private struct Track: Codable, Equatable {
    enum Genre: String, Codable { case rock = "Rock", jazz = "Jazz" }
    var id: String
    var genre: Genre
    var title: String
    var duration: Int
    var year: Int?
    var rating: Double?
}

private enum Media: Codable, Equatable {
    case audio(bitrate: Int)
    case video(width: UInt16, height: UInt16, tags: [String])
    case unknown
}

private enum Priority: Int, Codable { case low = 1, high = 9 }

private struct Album: Codable, Equatable {
    struct Credit: Codable, Equatable {
        var name: String
        var roles: [String]
    }
    var title: String
    var tracks: [Track]
    var credits: [Credit]?
    var counts: [String: Int]
    var byDisc: [Int: [String]]
    var media: [Media]
    var priority: Priority
    var cover: JSON
    var matrix: [[Double]]
    var flags: Set<Bool>
    var small: Int8
    var unsigned: UInt64
    var ratio: Float
    var optionalNested: Credit?
    var optionalList: [Int?]
}

private let sampleAlbum = Album(
    title: "Bar Baz",
    tracks: [
        Track(id: "track-1", genre: .rock, title: "Qux", duration: 235, year: 1999, rating: 4.5),
        Track(id: "track-2", genre: .jazz, title: "Été", duration: 61, year: nil, rating: nil),
    ],
    credits: [Album.Credit(name: "The Foo", roles: ["vocals", "bass"])],
    counts: ["plays": 12, "skips": 0],
    byDisc: [1: ["a", "b"], 2: []],
    media: [.audio(bitrate: 320), .video(width: 1920, height: 1080, tags: ["hd"]), .unknown],
    priority: .high,
    cover: ["url": "https://example.com/c.jpg", "size": [600, 600]],
    matrix: [[1, 2.5], [], [-0.125]],
    flags: [true],
    small: -128,
    unsigned: 9_007_199_254_740_992,
    ratio: 0.1,
    optionalNested: nil,
    optionalList: [1, nil, 3])

@Suite struct JSONCodableTests {
    @Test func nestedTypesRoundTrip() throws {
        let json = try JSON(encoding: sampleAlbum)
        #expect(try json.decode(Album.self) == sampleAlbum)
        // And through text.
        let reparsed = try JSON(parsing: json.serialized())
        #expect(try reparsed.decode(Album.self) == sampleAlbum)
    }

    @Test func encodingFollowsDeclarationOrderAndSkipsNil() throws {
        let track = Track(id: "track-2", genre: .jazz, title: "Été", duration: 61, year: nil, rating: nil)
        let expected = #"{"id":"track-2","genre":"Jazz","title":"Été","duration":61}"#
        #expect(try JSON(encoding: track).serialized() == expected)
    }

    @Test func decodesTheBenchmarkDocumentShape() throws {
        struct Doc: Decodable, Equatable {
            var _id: String
            var type: String
            var duration: Int
            var year: Int
            var rating: UInt8
        }
        let doc = try JSON(parsing: #"{"_id":"track-00000042","type":"track","genre":"Rock","duration":235,"#
            + #""year":1999,"rating":4}"#)
        let expected = Doc(_id: "track-00000042", type: "track", duration: 235, year: 1999, rating: 4)
        #expect(try doc.decode(Doc.self) == expected)
    }

    @Test func missingAndNullOptionalsAreNil() throws {
        let missing = try JSON(parsing: #"{"id":"a","genre":"Rock","title":"t","duration":1}"#).decode(Track.self)
        #expect(missing.year == nil && missing.rating == nil)
        let null = try JSON(parsing: #"{"id":"a","genre":"Rock","title":"t","duration":1,"year":null}"#)
        #expect(try null.decode(Track.self).year == nil)
        #expect(try JSON.null.decode(Int?.self) == nil)
        #expect(try JSON.number(3).decode(Int?.self) == 3)
    }

    @Test func topLevelPrimitivesAndCollections() throws {
        #expect(try JSON.number(7).decode(Int.self) == 7)
        #expect(try JSON.string("s").decode(String.self) == "s")
        #expect(try JSON.bool(true).decode(Bool.self))
        #expect(try ([1, 2, 3] as JSON).decode([UInt8].self) == [1, 2, 3])
        #expect(try (["a": 1] as JSON).decode([String: Double].self) == ["a": 1])
        #expect(try JSON(encoding: [1, 2]) == [1, 2])
        #expect(try JSON(encoding: "x") == "x")
        #expect(try JSON(encoding: Int?.none) == .null)
        #expect(try JSON(encoding: ["k": [true]]) == ["k": [true]])
    }

    @Test func typeMismatchNamesTheCodingPath() throws {
        let json = try JSON(encoding: sampleAlbum)
        var broken = json
        var tracks = try #require(json["tracks"]?.arrayValue)
        tracks[1]["duration"] = "61"
        broken["tracks"] = .array(tracks)
        let error = try #require(throws: SofaError.self) { try broken.decode(Album.self) }
        #expect(error.code == .decodingFailed)
        #expect(error.message.contains("tracks[1].duration"), "\(error.message)")
        #expect(error.message.contains(#"found string "61""#), "\(error.message)")
        #expect(error.message.contains("Album"), "\(error.message)")
    }

    @Test func missingMemberNamesItsPath() throws {
        let json: JSON = ["tracks": [["id": "a", "genre": "Rock", "title": "t"]]]
        struct Holder: Decodable { var tracks: [Track] }
        let error = try #require(throws: SofaError.self) { try json.decode(Holder.self) }
        #expect(error.code == .decodingFailed)
        #expect(error.message.contains("tracks[0].duration"), "\(error.message)")
    }

    @Test func nullForANonOptionalIsAnError() throws {
        let json: JSON = ["id": "a", "genre": "Rock", "title": "t", "duration": nil]
        let error = try #require(throws: SofaError.self) { try json.decode(Track.self) }
        #expect(error.message.contains("duration"), "\(error.message)")
        #expect(error.message.contains("found null"), "\(error.message)")
    }

    @Test func integersMustBeWholeAndInRange() throws {
        #expect(throws: SofaError.self) { try JSON.number(1.5).decode(Int.self) }
        #expect(throws: SofaError.self) { try JSON.number(300).decode(UInt8.self) }
        #expect(throws: SofaError.self) { try JSON.number(-1).decode(UInt.self) }
        #expect(throws: SofaError.self) { try JSON.number(1e19).decode(Int64.self) }
        #expect(throws: SofaError.self) { try JSON.string("1").decode(Int.self) }
        #expect(throws: SofaError.self) { try JSON.number(1).decode(Bool.self) }
        #expect(throws: SofaError.self) { try JSON.number(1e300).decode(Float.self) }
        #expect(try JSON.number(-128).decode(Int8.self) == -128)
        #expect(try JSON.number(65535).decode(UInt16.self) == 65535)
        #expect(try JSON.number(-9_007_199_254_740_992).decode(Int64.self) == -9_007_199_254_740_992)
        let error = try #require(throws: SofaError.self) { try ([1, 2.5] as JSON).decode([Int].self) }
        #expect(error.message.contains("[1]") && error.message.contains("not a whole number"), "\(error.message)")
    }

    @Test func integersAJSONNumberCannotHoldAreRefused() throws {
        struct Big: Encodable { var value: Int64 }
        let error = try #require(throws: SofaError.self) { try JSON(encoding: Big(value: 9_007_199_254_740_993)) }
        #expect(error.code == .invalidValue)
        #expect(error.message.contains("value"), "\(error.message)")
        // Exactly representable large integers are fine.
        #expect(try JSON(encoding: Big(value: 1 << 60)) == ["value": .number(0x1p60)])
        #expect(throws: SofaError.self) { try JSON(encoding: [UInt64.max]) }
    }

    @Test func jsonPropertiesPassThrough() throws {
        struct Row: Codable, Equatable {
            var key: JSON
            var value: JSON?
        }
        let row = Row(key: ["red", [:]], value: ["n": 1.5])
        let json = try JSON(encoding: row)
        #expect(json == ["key": ["red", [:]], "value": ["n": 1.5]])
        #expect(try json.decode(Row.self) == row)
    }

    @Test func unkeyedDecodingDoesNotAdvanceOnFailure() throws {
        struct IntOrString: Decodable {
            var items: [String] = []
            init(from decoder: any Decoder) throws {
                var container = try decoder.unkeyedContainer()
                #expect(container.count == 3)
                while !container.isAtEnd {
                    if let number = try? container.decode(Int.self) {
                        items.append("int \(number)")
                    } else if try container.decodeNil() {
                        items.append("nil")
                    } else {
                        items.append("string \(try container.decode(String.self))")
                    }
                }
                #expect(throws: DecodingError.self) { try container.decode(Int.self) }
            }
        }
        let decoded = try ([1, "a", nil] as JSON).decode(IntOrString.self)
        #expect(decoded.items == ["int 1", "string a", "nil"])
    }
}
