import Glibc

/// The files gen.py writes for one N, loaded into encoded keys: rows, queries, updates and expected answers.
///
/// Loading parses bytes directly (no `String` per field): at 10M rows the TSV is ~0.7 GB and the load should
/// not dominate a run. Loading is not timed and happens before any engine is opened.
struct DataSet {
    /// The view rows in doc order (random with respect to key order), as W1 inserts them.
    let rows: RowSet
    /// W2 start keys: the four view-key parts of an existing row.
    let rangeStarts: RowSet
    /// W4 inclusive range starts (four parts).
    let reduceLows: RowSet
    /// W4 inclusive range ends (four parts and ``KeyEncoding/endOfPrefix``).
    let reduceHighs: RowSet
    /// W6: full row keys with their new durations, in u6.tsv order.
    let updates: RowSet
    /// gen.py's checksums, "W2" … "W7", and `n`.
    let expected: Expected

    /// Reads `rows.tsv`, `q2.tsv`, `q4.tsv`, `u6.tsv` and `expected.json` from `directory`.
    /// - Throws: ``CompareError`` when a file is missing or malformed.
    static func load(from directory: String) throws -> DataSet {
        let expected = try Expected(json: try readFile(directory + "/expected.json"))
        let rowsFile = try readFile(directory + "/rows.tsv")
        var rowBuilder = RowSetBuilder(reservingRows: expected.n, bytesPerRow: 80)
        try rowsFile.withUnsafeBytes { file in
            try forEachLine(file, fields: 6, name: "rows.tsv") { fields in
                for f in 0 ..< 5 {
                    rowBuilder.appendPart(slice(file, fields[f]))
                }
                rowBuilder.endRow(value: UInt32(parseInt(slice(file, fields[5]))))
            }
        }
        let rows = rowBuilder.build()
        guard rows.count == expected.n else {
            throw CompareError("rows.tsv has \(rows.count) rows but expected.json says n=\(expected.n)")
        }

        let q2 = try keys(fromFile: directory + "/q2.tsv", fields: 4, parts: 0 ..< 4, endMarker: false)
        let lows = try keys(fromFile: directory + "/q4.tsv", fields: 8, parts: 0 ..< 4, endMarker: false)
        let highs = try keys(fromFile: directory + "/q4.tsv", fields: 8, parts: 4 ..< 8, endMarker: true)

        // u6.tsv names rows by line number in rows.tsv; resolve them to keys now so that W6 is given bytes.
        let u6File = try readFile(directory + "/u6.tsv")
        var updateBuilder = RowSetBuilder(reservingRows: expected.n / 100, bytesPerRow: 80)
        try u6File.withUnsafeBytes { file in
            try forEachLine(file, fields: 2, name: "u6.tsv") { fields in
                let index = parseInt(slice(file, fields[0]))
                guard index >= 0 && index < rows.count else { throw CompareError("u6.tsv: row \(index) out of range") }
                updateBuilder.appendBytes(rows.key(index))
                updateBuilder.endRow(value: UInt32(parseInt(slice(file, fields[1]))))
            }
        }
        return DataSet(rows: rows, rangeStarts: q2, reduceLows: lows, reduceHighs: highs,
                       updates: updateBuilder.build(), expected: expected)
    }

    /// Keys made of the fields in `parts` of each line, optionally followed by the end-of-prefix marker.
    private static func keys(fromFile path: String, fields: Int, parts: Range<Int>, endMarker: Bool) throws
        -> RowSet
    {
        let file = try readFile(path)
        var builder = RowSetBuilder(reservingRows: 100_000, bytesPerRow: 70)
        try file.withUnsafeBytes { bytes in
            try forEachLine(bytes, fields: fields, name: path) { line in
                for f in parts {
                    builder.appendPart(slice(bytes, line[f]))
                }
                if endMarker {
                    builder.appendByte(KeyEncoding.endOfPrefix)
                }
                builder.endRow(value: 0)
            }
        }
        return builder.build()
    }

    /// Calls `body` with the field ranges of each line of a TSV file that must have exactly `fields` fields.
    /// One reused array of ranges: at 10M lines an array per line would dominate the load.
    private static func forEachLine(
        _ file: UnsafeRawBufferPointer, fields: Int, name: String, _ body: ([Range<Int>]) throws -> Void
    ) throws {
        var current: [Range<Int>] = []
        current.reserveCapacity(fields)
        var start = 0
        var line = 1
        for i in 0 ..< file.count {
            let byte = file[i]
            guard byte == UInt8(ascii: "\t") || byte == UInt8(ascii: "\n") else { continue }
            current.append(start ..< i)
            start = i + 1
            if byte == UInt8(ascii: "\n") {
                guard current.count == fields else {
                    throw CompareError("\(name) line \(line): \(current.count) fields, not \(fields)")
                }
                try body(current)
                current.removeAll(keepingCapacity: true)
                line += 1
            }
        }
        guard start == file.count else { throw CompareError("\(name) does not end with a newline") }
    }

    private static func slice(_ file: UnsafeRawBufferPointer, _ range: Range<Int>) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: file[range])
    }

    private static func parseInt(_ bytes: UnsafeRawBufferPointer) -> Int {
        bytes.reduce(0) { $0 * 10 + Int($1 &- UInt8(ascii: "0")) }
    }
}

/// Reads a whole file.
/// - Throws: ``CompareError`` naming the file and the errno text.
func readFile(_ path: String) throws -> [UInt8] {
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else { throw CompareError("cannot open \(path): \(errnoText())") }
    defer { close(fd) }
    var info = stat()
    guard fstat(fd, &info) == 0 else { throw CompareError("cannot stat \(path): \(errnoText())") }
    let size = Int(info.st_size)
    var bytes = [UInt8](repeating: 0, count: size)
    var done = 0
    try bytes.withUnsafeMutableBytes { buffer in
        while done < size {
            let n = read(fd, buffer.baseAddress! + done, size - done)
            guard n > 0 else { throw CompareError("cannot read \(path): \(n == 0 ? "short file" : errnoText())") }
            done += n
        }
    }
    return bytes
}

/// The text of the current `errno`.
func errnoText() -> String {
    String(cString: strerror(errno))
}

/// What goes wrong in the comparison runner: a missing data set, an engine error, a failed child process.
struct CompareError: Error, CustomStringConvertible {
    /// What happened and, where it helps, what to do about it.
    let description: String

    init(_ description: String) {
        self.description = description
    }
}
