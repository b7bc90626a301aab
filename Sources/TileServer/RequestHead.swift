import NIOCore

/// The parts of an HTTP/1.1 request head the responder needs, read strictly from its bytes:
/// `METHOD /target HTTP/1.1`, then `name: value` lines, each ended by CRLF. Nil for anything else (a
/// lone CR or LF, a folded line, a line without a colon, conflicting lengths): NIO's decoder then deals
/// with it.
struct RequestHead {
    var isHead: Bool
    var isGet: Bool
    var target: String
    var contentLength = 0
    var isChunked = false
    var closesConnection = false
    var hasExpectation = false
    var ifNoneMatch: String?

    var isGetOrHead: Bool { (isGet || isHead) && !hasExpectation }

    init?(_ bytes: ByteBufferView) {
        let (cr, lf, space, tab, colon): (UInt8, UInt8, UInt8, UInt8, UInt8) = (13, 10, 32, 9, 58)
        // The lines, as index ranges without their CRLF; the head ends with an empty line.
        var lines: [Range<Int>] = []
        var start = bytes.startIndex
        var index = start
        while index < bytes.endIndex {
            let byte = bytes[index]
            if byte == lf { return nil }  // a lone LF
            if byte == cr {
                guard index + 1 < bytes.endIndex, bytes[index + 1] == lf else { return nil }  // a lone CR
                lines.append(start..<index)
                index += 2
                start = index
                continue
            }
            index += 1
        }
        guard start == bytes.endIndex, lines.count >= 2, lines.last!.isEmpty else { return nil }
        lines.removeLast()
        // The request line.
        let first = lines.removeFirst()
        guard let space1 = bytes[first].firstIndex(of: space), let space2 = bytes[(space1 + 1)..<first.upperBound].firstIndex(of: space),
            space1 > first.lowerBound, bytes[space1 + 1] == UInt8(ascii: "/"),
            bytes[(space2 + 1)..<first.upperBound].elementsEqual("HTTP/1.1".utf8),
            bytes[first.lowerBound..<space1].allSatisfy({ $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") })
        else { return nil }
        let method = bytes[first.lowerBound..<space1]
        isGet = method.elementsEqual("GET".utf8)
        isHead = method.elementsEqual("HEAD".utf8)
        target = String(decoding: bytes[(space1 + 1)..<space2], as: UTF8.self)
        guard !target.utf8.contains(space) else { return nil }
        // The fields this responder cares about.
        for line in lines {
            guard let first = bytes[line].first, first != space, first != tab, let colon = bytes[line].firstIndex(of: colon) else {
                return nil
            }
            var valueStart = colon + 1, valueEnd = line.upperBound
            while valueStart < valueEnd, bytes[valueStart] == space || bytes[valueStart] == tab { valueStart += 1 }
            while valueEnd > valueStart, bytes[valueEnd - 1] == space || bytes[valueEnd - 1] == tab { valueEnd -= 1 }
            let name = bytes[line.lowerBound..<colon], value = bytes[valueStart..<valueEnd]
            func named(_ known: String) -> Bool {
                name.count == known.utf8.count && zip(name, known.utf8).allSatisfy { $0 | 0x20 == $1 }
            }
            if named("content-length") {
                guard let length = Int(String(decoding: value, as: UTF8.self)), length >= 0, contentLength == 0 || contentLength == length
                else { return nil }
                contentLength = length
            } else if named("transfer-encoding") {
                isChunked = true
            } else if named("connection") {
                closesConnection = closesConnection || String(decoding: value, as: UTF8.self).lowercased().contains("close")
            } else if named("expect") || named("upgrade") {
                hasExpectation = true
            } else if named("if-none-match") {
                let text = String(decoding: value, as: UTF8.self)
                ifNoneMatch = ifNoneMatch.map { "\($0), \(text)" } ?? text
            }
        }
    }
}
