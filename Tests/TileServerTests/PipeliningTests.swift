import Foundation
import NIOCore
import Testing
import TestSupport
import TileCore
@testable import TileServer

/// Cached tiles answered from the bytes as they arrive: in order with what the application answers,
/// and only for plainly written requests. The client here writes requests by hand (pipelined, HTTP/1.0,
/// malformed); the answers are read back with their own framing (Content-Length).
@Suite("Pipelined requests on one connection", .serialized)
struct PipeliningTests {
    /// HTTP/1.1 responses split by their Content-Length (no body for 304, nor for the answers to the
    /// requests whose indices are in `heads`): status, headers, body.
    static func responses(_ data: Data, heads: Set<Int> = []) -> [HTTPAnswers.Answer] {
        HTTPAnswers.split(data) { heads.contains($0) }
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
                "GET /iiif/3/kept/0,0,300,200/150,/0/default.png HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                "GET \(cached) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                "HEAD \(cached) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                "GET \(cached) HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-None-Match: \(tile.headers["etag"] ?? "")\r\n\r\n",
                "GET \(cached) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
            ]
            try connection.send(Data(requests.joined().utf8))
            let (bytes, closed) = await connection.received(timeout: LoopbackConnection.answerTimeout)
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

    @Test("cached answers (GET, HEAD, 304) then the application's, one connection: each answer framed for its request")
    func interleaved() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await TileServerTests.withServer(folder) { base, client in
            let (cached, rendered) = ("/dzi/kept_files/11/0_0.jpg", "/iiif/3/kept/0,0,512,512/128,/0/default.png")
            let tile = try await TileServerTests.get(client, base + cached)
            let port = UInt16(base.split(separator: ":").last!)!
            let requests = [
                "GET \(cached) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", "HEAD \(cached) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                "GET \(cached) HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-None-Match: \(tile.headers["etag"] ?? "")\r\n\r\n",
                "GET \(rendered) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", "HEAD \(rendered) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
            ]
            // One request at a time on one connection, so each cached answer is written right after NIO's decoder.
            let connection = try LoopbackConnection(port: port)
            var bytes = Data()
            for request in requests {
                try connection.send(Data(request.utf8))
                bytes += await connection.received(timeout: .milliseconds(1500)).bytes
            }
            // The rest, until the server closes (the last request says `Connection: close`): a render can
            // take longer than the wait above under a sanitizer on a loaded machine.
            bytes += await connection.received(timeout: .seconds(60)).bytes
            let answers = Self.responses(bytes, heads: [1, 4])
            #expect(answers.map(\.status) == [200, 200, 304, 200, 200], "\(answers.map(\.status))")
            guard answers.count == 5 else { return }
            #expect(answers[0].body == tile.body && answers[1].body.isEmpty && answers[2].body.isEmpty)
            let png = try Reference.decodePNG(answers[3].body)
            #expect(png.width == 128 && png.height == 128)
            #expect(answers[4].headers["content-length"] == String(answers[3].body.count))
        }
    }

    @Test("a client pipelining 1,000 requests and not reading: 64 go to the application, then the connection closes after their answers")
    func pipelinedPastTheBound() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await TileServerTests.withServer(folder) { base, client in
            // A large answer (the whole image as a PNG): a few fill the sockets' buffers while the client
            // does not read, so the answers of the rest wait with the application.
            let path = "/iiif/3/kept/full/max/0/default.png"
            let image = try await TileServerTests.get(client, base + path)
            #expect(image.status == 200 && image.body.count > 100_000, "\(image.status), \(image.body.count) B")
            let port = UInt16(base.split(separator: ":").last!)!
            let connection = try LoopbackConnection(port: port)
            let requests = [String](repeating: "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", count: 1000)
            try connection.send(Data(requests.joined().utf8))
            let (bytes, closed) = await connection.received(timeout: LoopbackConnection.answerTimeout)
            #expect(closed)
            let answers = Self.responses(bytes)
            // Those answered here while the channel took them, then the 64 passed on; none after.
            #expect(answers.count >= TileConnectionHandler.maximumWithApplication && answers.count < requests.count, "\(answers.count) answers")
            #expect(answers.allSatisfy { $0.status == 200 && $0.body == image.body })
            // The server goes on answering other connections.
            #expect(try await TileServerTests.get(client, base + path).status == 200)
        }
    }

    @Test("past the bound, a client still sending as it reads gets every answer whole, then the end of the stream (a lingering close, no reset)")
    func pipelinedPastTheBoundWhileSending() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await TileServerTests.withServer(folder) { base, client in
            let path = "/iiif/3/kept/full/max/0/default.png"
            let image = try await TileServerTests.get(client, base + path)
            let connection = try LoopbackConnection(port: UInt16(base.split(separator: ":").last!)!)
            // 6,000 requests (about 400 KB), sent while the answers are read: most of them arrive after
            // the server has stopped passing them on, some after it has answered the last one. Closed
            // whole with them unread, the connection would reset, and the client's system drop answers.
            let requests = Data([String](repeating: "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", count: 6000).joined().utf8)
            Thread {
                try? connection.send(requests)
                connection.shutDownWrites()
            }.start()
            let (bytes, end) = await LoopbackConnection.onOwnThread { connection.readToEnd(timeout: LoopbackConnection.answerTimeout) }
            let answers = Self.responses(bytes)
            #expect(end == 0, "the stream ended by \(end.map { $0 == 0 ? "a close" : "error \($0)" } ?? "nothing in time")")
            #expect(answers.count >= TileConnectionHandler.maximumWithApplication && answers.count < 6000, "\(answers.count) answers")
            #expect(answers.allSatisfy { $0.status == 200 && $0.body == image.body })
        }
    }

    @Test("a client that sends its requests and closes its side gets every answer whole before the connection closes")
    func halfClosed() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await TileServerTests.withServer(folder) { base, client in
            let path = "/iiif/3/kept/full/max/0/default.png"
            let image = try await TileServerTests.get(client, base + path)
            let connection = try LoopbackConnection(port: UInt16(base.split(separator: ":").last!)!)
            // Ten large answers (7 MB): more than the sockets hold, so most are still queued when the
            // client's end of stream arrives.
            try connection.send(Data([String](repeating: "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", count: 10).joined().utf8))
            connection.shutDownWrites()
            let (bytes, end) = await LoopbackConnection.onOwnThread { connection.readToEnd(timeout: LoopbackConnection.answerTimeout) }
            let answers = Self.responses(bytes)
            #expect(end == 0, "the stream ended by \(end.map { $0 == 0 ? "a close" : "error \($0)" } ?? "nothing in time")")
            #expect(
                answers.count == 10 && answers.allSatisfy { $0.status == 200 && $0.body == image.body }, "\(answers.count) answers, \(bytes.count) B")
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
            // (Hummingbird keeps an HTTP/1.0 connection open after its answer: the framing is its
            // Content-Length.)
            let old = try await Self.exchange(port, ["GET \(cached) HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"], answers: 1, grace: .zero)
            #expect(old.answers.first?.body == tile.body)
            let chunked = try LoopbackConnection(port: port)
            try chunked.send(
                Data("GET \(cached) HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\n".utf8))
            #expect(Self.responses(await chunked.received(timeout: LoopbackConnection.answerTimeout).bytes).first?.status == 200)
            let bad = try LoopbackConnection(port: port)
            try bad.send(Data("GET \(cached) HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header\r\n\r\n".utf8))
            let badAnswer = await bad.received(timeout: LoopbackConnection.answerTimeout)
            #expect(Self.responses(badAnswer.bytes).first?.status == 400 || (badAnswer.closed && badAnswer.bytes.isEmpty))
        }
    }

    /// Sends `requests` pipelined in one write on a new connection and reads until the server closes
    /// it or `timeout` passes.
    static func exchange(_ port: UInt16, _ requests: [String], timeout: Duration = LoopbackConnection.answerTimeout, body: Data = Data()) async throws
        -> (answers: [HTTPAnswers.Answer], closed: Bool)
    {
        let connection = try LoopbackConnection(port: port)
        try connection.send(Data(requests.joined().utf8) + body)
        let (bytes, closed) = await connection.received(timeout: timeout)
        return (responses(bytes), closed)
    }

    /// Sends `requests` as ``exchange(_:_:timeout:body:)`` does, and reads until `count` answers (an
    /// interim `100 Continue` is one) have come, the server closes the connection, or `timeout` passes;
    /// then `grace` more, for any answer that should not come. The wait for the answers expected is long:
    /// the application's answers need a thread of Swift's cooperative pool, which tests running beside
    /// this one may hold for seconds at a time (child processes, blocking sockets).
    static func exchange(
        _ port: UInt16, _ requests: [String], answers count: Int, timeout: Duration = LoopbackConnection.answerTimeout, grace: Duration,
        body: Data = Data()
    ) async throws -> (answers: [HTTPAnswers.Answer], closed: Bool) {
        let connection = try LoopbackConnection(port: port)
        try connection.send(Data(requests.joined().utf8) + body)
        return await HTTPAnswers.received(connection, count: count, interim: true, timeout: timeout, grace: grace)
    }

    /// As ``exchange(_:_:timeout:body:)``, blocking the calling thread (for tests' own threads).
    @available(*, noasync, message: "blocks a thread of Swift's cooperative pool, which an in-process server needs: use exchange")
    static func blockingExchange(_ port: UInt16, _ requests: [String], timeout: Duration = LoopbackConnection.answerTimeout) throws -> [HTTPAnswers
        .Answer]
    {
        let connection = try LoopbackConnection(port: port)
        try connection.send(Data(requests.joined().utf8))
        return responses(connection.read(timeout: timeout).bytes)
    }

    /// Heads NIO's decoder refuses (HTTP/1.1, RFC 9112 and 9110): each gets 400 and the connection
    /// closes; nothing sent after it is answered.
    static let malformed: [MalformedHead] = [
        MalformedHead("an unknown method", "FROB /dzi/kept_files/11/0_0.jpg HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"),
        MalformedHead("Content-Length: +0", "GET /dzi/kept_files/11/0_0.jpg HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: +0\r\n\r\n"),
        MalformedHead(
            "a duplicated Content-Length",
            "GET /dzi/kept_files/11/0_0.jpg HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n"),
        MalformedHead("a header name with a space", "GET /dzi/kept_files/11/0_0.jpg HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Name: 1\r\n\r\n"),
        MalformedHead("a header name with a control byte", "GET /dzi/kept_files/11/0_0.jpg HTTP/1.1\r\nHost: 127.0.0.1\r\nBad\u{01}Name: 1\r\n\r\n"),
        MalformedHead("a NUL byte", "GET /dzi/kept_files/11/0_0.jpg HTTP/1.1\r\nHost: x\u{00}\r\n\r\n"),
        MalformedHead("over 1000 fields", "GET /dzi/kept_files/11/0_0.jpg HTTP/1.1\r\n" + String(repeating: "X-A: 1\r\n", count: 1001) + "\r\n")
    ]

    /// A malformed head named for the test's report: the head itself (up to 1,001 fields) is not printed.
    struct MalformedHead: Sendable, CustomTestStringConvertible {
        let name: String
        let head: String
        init(_ name: String, _ head: String) { (self.name, self.head) = (name, head) }
        var testDescription: String { name }
    }

    @Test("a malformed head between cached tile requests: the tile, then 400, then the connection closes", arguments: malformed)
    func malformedHead(_ malformed: MalformedHead) async throws {
        let (name, bad) = (malformed.name, malformed.head)
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await TileServerTests.withServer(folder) { base, client in
            let tile = "/dzi/kept_files/11/0_0.jpg"
            let cached = try await TileServerTests.get(client, base + tile)
            #expect(cached.status == 200)
            let get = "GET \(tile) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
            let (answers, closed) = try await Self.exchange(UInt16(base.split(separator: ":").last!)!, [get, bad, get])
            #expect(answers.map(\.status) == [200, 400], "\(name): \(answers.map(\.status))")
            #expect(answers.first?.body == cached.body, "\(name)")
            #expect(closed, "\(name): the connection stayed open")
        }
    }

    @Test("after an Upgrade or a CONNECT request, nothing more is read: one answer each for the requests before it and for it")
    func upgrade() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await TileServerTests.withServer(folder) { base, client in
            let tile = "/dzi/kept_files/11/0_0.jpg"
            #expect(try await TileServerTests.get(client, base + tile).status == 200)
            let port = UInt16(base.split(separator: ":").last!)!
            let get = "GET \(tile) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
            let upgrade = "GET \(tile) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
            let connect = "CONNECT example.org:443 HTTP/1.1\r\nHost: example.org:443\r\n\r\n"
            for (name, request) in [("Upgrade", upgrade), ("CONNECT", connect)] {
                let (answers, _) = try await Self.exchange(port, [get, request, get, get], answers: 2, grace: .seconds(2))
                #expect(answers.count == 2 && answers.first?.status == 200, "\(name): \(answers.map(\.status))")
            }
        }
    }
}
