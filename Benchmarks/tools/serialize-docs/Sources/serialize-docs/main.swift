// Parses the first COUNT lines of gen.py's docs.jsonl (default /tmp/sofa-bench-data/1000000/docs.jsonl, 200,000),
// drops `_id` from each document as sofa-compare does, then serializes all of them 15 times and prints the
// fastest round in ns per document (and the bytes per document, so the work is used and checked).
import Glibc
import Sofa

let arguments = CommandLine.arguments
let path = arguments.count > 1 ? arguments[1] : "/tmp/sofa-bench-data/1000000/docs.jsonl"
let limit = arguments.count > 2 ? Int(arguments[2]) ?? 0 : 200_000

func seconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

func fail(_ message: String) -> Never {
    print("serialize-docs: \(message)")
    exit(1)
}

guard limit > 0 else { fail("COUNT must be a positive number of documents, not \(arguments[2])") }
guard let file = fopen(path, "r") else { fail("cannot open \(path) (run Benchmarks/data/generate.sh 1000000)") }
var documents: [JSON] = []
var line: UnsafeMutablePointer<CChar>?
var capacity = 0
while documents.count < limit {
    let length = getline(&line, &capacity, file)
    guard length > 0, let line else { break }
    let bytes = UnsafeRawBufferPointer(start: line, count: line[length - 1] == 10 ? length - 1 : length)
    guard case .object(var members) = try JSON(parsing: bytes) else {
        fail("line \(documents.count + 1) is not an object")
    }
    members.removeValue(forKey: "_id")
    documents.append(.object(members))
}
fclose(file)
guard !documents.isEmpty else { fail("\(path) holds no documents") }

var bytes = 0
var fastest = Double.infinity
for _ in 0..<15 {
    let start = seconds()
    for document in documents { bytes &+= try document.serializedBytes().count }
    fastest = min(fastest, seconds() - start)
}
let nanoseconds = fastest / Double(documents.count) * 1e9
print("\(documents.count) documents, \(bytes / 15 / documents.count) bytes each: fastest round",
      Int(nanoseconds.rounded()), "ns per document")
