import Foundation
import Testing
import TestSupport
import TileCore
@testable import TileServer

/// A server with all its connections open: one client sending heads a byte at a time (slowloris) must
/// not keep the others out until the idle timeout.
@Suite("The connection limit")
struct ConnectionLimitTests {
    /// Waits until `condition` holds (the server's own counts), `LoopbackConnection.answerTimeout` at most.
    static func until(_ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + LoopbackConnection.answerTimeout
        while !condition(), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(condition(), "not reached within \(LoopbackConnection.answerTimeout)")
    }

    @Test(
        "at the limit, the connection waiting longest for a request is closed for a new client; one with an upload under way is not",
        .disabled("flaky in the whole suite (2026-12-04: 2 of 3 CI rehearsals; passes alone): to be made deterministic first"))
    func slowHeads() async throws {
        let (folder, jpeg) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var server = try TileServer(root: folder, cache: "\(folder)/.cache", uploads: UploadPolicy(token: "t"))
        server.maximumConnections = 8
        server.idleTimeout = .seconds(600)  // no deadline of a head or a body can be what makes room here
        try await TileServerTests.withServer(server) { base, _ in
            let port = try #require(UInt16(base.split(separator: ":").last ?? ""))
            // The oldest connection: an upload whose body is under way (a request in progress).
            let upload = try LoopbackConnection(port: port)
            let head = "PUT /images/up HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer t\r\nContent-Length: \(jpeg.count)\r\n\r\n"
            try upload.send(Data(head.utf8) + jpeg.prefix(1000))
            try await Self.until { server.connections.open == 1 }
            // Then seven that send part of a head and nothing more, the first of them the oldest.
            var slow: [LoopbackConnection] = []
            for _ in 0..<7 {
                let connection = try LoopbackConnection(port: port)
                try connection.send(Data("GET /health HTTP/1.1\r\nHo".utf8))
                slow.append(connection)
                let count = slow.count + 1
                try await Self.until { server.connections.open == count }
            }
            // A new client, in the kernel's backlog until room is made.
            let newcomer = try LoopbackConnection(port: port)
            try newcomer.send(Data("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
            let answer = await HTTPAnswers.received(newcomer, count: 1, timeout: LoopbackConnection.answerTimeout)
            #expect(answer.answers.first?.status == 200, "\(answer)")
            let oldest = await slow[0].received(timeout: LoopbackConnection.answerTimeout)
            #expect(oldest.closed && oldest.bytes.isEmpty, "\(oldest)")
            #expect(server.connections.evictions >= 1 && server.connections.waits >= 1)
            // The upload was passed over: the rest of its body is taken and answered.
            try upload.send(jpeg.dropFirst(1000))
            let stored = await HTTPAnswers.received(upload, count: 1, timeout: LoopbackConnection.answerTimeout)
            #expect((200..<300).contains(stored.answers.first?.status ?? 0), "\(stored)")
        }
    }
}

/// A server stopped while clients connect (swift-nio#2637).
@Suite("Stopping while clients connect")
struct StopWhileConnectingTests {
    @Test(
        "64 connections opened as the server's task is cancelled: the process goes on (the connections not yet handed over are closed)",
        .disabled("flaky in the whole suite (2026-12-04): a connection set up as its server channel closes is never registered nor closed"))
    func cancelledWhileConnecting() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        for _ in 0..<5 {
            var clients: [LoopbackConnection] = []
            var server = try TileServer(root: folder, cache: "\(folder)/.cache")
            server.idleTimeout = .seconds(5)  // one taken after the shutdown's last look closes at its head's deadline
            try await TileServerTests.withServer(server) { base, _ in
                let port = try #require(UInt16(base.split(separator: ":").last ?? ""))
                // Accepted by the kernel at once; the server takes them while its task is being cancelled.
                for _ in 0..<64 { clients.append(try LoopbackConnection(port: port)) }
            }
            // Each is answered by the end of its stream (closed unanswered), never left open: by the
            // shutdown, or (taken after it) by the deadline of its head.
            for client in clients {
                let end = await client.received(timeout: LoopbackConnection.answerTimeout)
                #expect(end.closed && end.bytes.isEmpty)
            }
        }
    }
}
