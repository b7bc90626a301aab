import Foundation
import NIOCore
import Testing
import TestSupport
import TileCore
@testable import TileServer

/// Cached tiles answered from the bytes as they arrive: in order with what the application answers,
/// and only for plainly written requests. The client here writes requests by hand (pipelined, HTTP/1.0,
/// malformed); the answers are read back with their own framing (Content-Length).
@Suite("Cached tile responder", .serialized)
struct CachedTileResponderTests {
    /// HTTP/1.1 responses split by their Content-Length (no body for 304, nor for the answers to the
    /// requests whose indices are in `heads`): status, headers, body.
    static func responses(_ data: Data, heads: Set<Int> = []) -> [(status: Int, headers: [String: String], body: Data)] {
        var rest = data[...]
        var out: [(Int, [String: String], Data)] = []
        while let split = rest.range(of: Data("\r\n\r\n".utf8)) {
            let lines = String(decoding: rest[..<split.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
            var headers: [String: String] = [:]
            for line in lines.dropFirst() {
                guard let colon = line.firstIndex(of: ":") else { continue }
                headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
            let status = Int(lines[0].split(separator: " ").dropFirst().first ?? "") ?? 0
            let length = status == 304 || heads.contains(out.count) ? 0 : Int(headers["content-length"] ?? "0") ?? 0
            let bodyStart = split.upperBound
            guard rest.distance(from: bodyStart, to: rest.endIndex) >= length else { break }
            let bodyEnd = rest.index(bodyStart, offsetBy: length)
            out.append((status, headers, Data(rest[bodyStart..<bodyEnd])))
            rest = rest[bodyEnd...]
        }
        return out
    }

    @Test("pipelined requests: the application's answer first, then the cached one, then one that closes")
    func pipelined() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await TileServerTests.withServer(folder) { base, client in
            let cached = "/dzi/kept_files/11/0_0.jpg"
            let tile = try await TileServerTests.get(client, base + cached)  // rendered, now in the cache
            let port = UInt16(base.split(separator: ":").last!)!
            let connection = try LoopbackConnection(port: port)
            let requests = [
                "GET /iiif/3/kept/0,0,300,200/150,/0/default.png HTTP/1.1\r\nHost: x\r\n\r\n",
                "GET \(cached) HTTP/1.1\r\nHost: x\r\n\r\n",
                "HEAD \(cached) HTTP/1.1\r\nHost: x\r\n\r\n",
                "GET \(cached) HTTP/1.1\r\nHost: x\r\nIf-None-Match: \(tile.headers["etag"] ?? "")\r\n\r\n",
                "GET \(cached) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            ]
            try connection.send(Data(requests.joined().utf8))
            let (bytes, closed) = connection.read(timeout: .seconds(30))
            #expect(closed)
            let answers = Self.responses(bytes, heads: [2])
            #expect(answers.map(\.status) == [200, 200, 200, 304, 200], "\(answers.map(\.status))")
            guard answers.count == 5 else { return }
            #expect(answers[0].headers["content-type"] == "image/png" && answers[0].body.starts(with: [0x89, 0x50]))
            #expect(answers[1].body == tile.body && answers[1].headers["etag"] == tile.headers["etag"])
            #expect(answers[2].body.isEmpty && answers[2].headers["content-length"] == String(tile.body.count))
            #expect(answers[3].body.isEmpty && answers[4].body == tile.body)
        }
    }

    @Test("HTTP/1.0, a chunked body and a malformed request go to the application and its decoder")
    func others() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await TileServerTests.withServer(folder) { base, client in
            let cached = "/dzi/kept_files/11/1_0.jpg"
            let tile = try await TileServerTests.get(client, base + cached)
            let port = UInt16(base.split(separator: ":").last!)!
            let old = try LoopbackConnection(port: port)
            try old.send(Data("GET \(cached) HTTP/1.0\r\n\r\n".utf8))
            // (Hummingbird keeps an HTTP/1.0 connection open after its answer: the framing is its
            // Content-Length.)
            let oldAnswer = old.read(timeout: .seconds(3))
            #expect(Self.responses(oldAnswer.bytes).first?.body == tile.body)
            let chunked = try LoopbackConnection(port: port)
            try chunked.send(Data("GET \(cached) HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\n".utf8))
            #expect(Self.responses(chunked.read(timeout: .seconds(30)).bytes).first?.status == 200)
            let bad = try LoopbackConnection(port: port)
            try bad.send(Data("GET \(cached) HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n".utf8))
            let badAnswer = bad.read(timeout: .seconds(30))
            #expect(Self.responses(badAnswer.bytes).first?.status == 400 || (badAnswer.closed && badAnswer.bytes.isEmpty))
        }
    }

    @Test("request heads are read strictly: anything unusual is left to NIO's decoder")
    func heads() {
        func head(_ text: String) -> RequestHead? { RequestHead(ByteBuffer(string: text).readableBytesView) }
        let plain = head("GET /dzi/a_files/1/0_0.jpg HTTP/1.1\r\nHost: x\r\nIf-None-Match: \"a\"\r\nif-none-match: \"b\"\r\n\r\n")
        #expect(plain?.isGetOrHead == true && plain?.contentLength == 0 && plain?.ifNoneMatch == "\"a\", \"b\"")
        #expect(head("GET / HTTP/1.1\r\nContent-Length: 5\r\n\r\n")?.contentLength == 5)
        #expect(head("GET / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n") == nil)
        #expect(head("GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n")?.isChunked == true)
        #expect(head("GET / HTTP/1.1\r\nConnection: keep-alive, close\r\n\r\n")?.closesConnection == true)
        #expect(head("GET / HTTP/1.1\r\nExpect: 100-continue\r\n\r\n")?.isGetOrHead == false)
        for odd in ["GET / HTTP/1.0\r\n\r\n", "GET http://x/ HTTP/1.1\r\n\r\n", "GET  / HTTP/1.1\r\n\r\n", "get / HTTP/1.1\r\n\r\n",
                    "GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n", "GET / HTTP/1.1\r\nA: b\nContent-Length: 5\r\n\r\n", "GET / HTTP/1.1\r\nNoColon\r\n\r\n",
                    "GET / HTTP/1.1\rA: b\r\n\r\n", "GET /a b HTTP/1.1\r\n\r\n", "GET / HTTP/1.1\r\n"] {
            #expect(head(odd) == nil, "\(odd.debugDescription)")
        }
        #expect(CachedTileResponder.headLength(ByteBuffer(string: "GET / HTTP/1.1\r\nA: b\r\n\r\nrest").readableBytesView) == 24)
        #expect(CachedTileResponder.headLength(ByteBuffer(string: "GET / HTTP/1.1\r\nA: b\r\n\r").readableBytesView) == nil)
        #expect(CachedTileResponder.httpDate(784111777) == "Sun, 06 Nov 1994 08:49:37 GMT")
    }

    @Test("mutated heads never crash the reader, and what it accepts is plain")
    func mutatedHeads() {
        var seed: UInt64 = 0x5EED
        func next() -> UInt64 {  // a fixed sequence: SplitMix64
            seed &+= 0x9E37_79B9_7F4A_7C15
            var z = seed
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        let valid = Array("GET /dzi/a_files/12/3_4.jpg HTTP/1.1\r\nHost: x\r\nIf-None-Match: \"abc\"\r\nContent-Length: 0\r\n\r\n".utf8)
        let alphabet: [UInt8] = [0, 9, 10, 13, 32, 58, 47, 65, 97, 255] + Array("GETHTP/1.chunkedlose-".utf8)
        var accepted = 0
        for _ in 0..<5000 {
            var bytes = valid
            for _ in 0...(next() % 4) {
                let at = Int(next() % UInt64(bytes.count))
                switch next() % 3 {
                case 0: bytes[at] = alphabet[Int(next() % UInt64(alphabet.count))]
                case 1: bytes.remove(at: at)
                default: bytes.insert(alphabet[Int(next() % UInt64(alphabet.count))], at: at)
                }
            }
            let buffer = ByteBuffer(bytes: bytes)
            _ = CachedTileResponder.headLength(buffer.readableBytesView)
            if let head = RequestHead(buffer.readableBytesView) {
                accepted += 1
                #expect(head.target.hasPrefix("/") && !head.target.utf8.contains(32) && head.contentLength >= 0)
                #expect(!bytes.contains(0x0A) || bytes.indices.allSatisfy { bytes[$0] != 0x0A || ($0 > 0 && bytes[$0 - 1] == 0x0D) })
            }
        }
        #expect(accepted > 0)
    }
}
