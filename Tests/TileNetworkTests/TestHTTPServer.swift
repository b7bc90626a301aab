import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOConcurrencyHelpers

/// A small HTTP server on 127.0.0.1 for the tests: it serves bytes in chunks with a delay between them,
/// and misbehaves on purpose on some paths. Every loop is bounded; it stops when the test stops it.
final class TestHTTPServer: Sendable {
    /// Holds the last chunk of `/gated` back until opened (or until the server stops).
    final class Gate: Sendable {
        private let state = NIOLockedValueBox(false)
        private let opened: AsyncStream<Void>
        private let continuation: AsyncStream<Void>.Continuation
        init() { (opened, continuation) = AsyncStream.makeStream() }
        func open() {
            state.withLockedValue { $0 = true }
            continuation.finish()
        }
        var isOpen: Bool { state.withLockedValue { $0 } }
        /// Returns once the gate is open.
        func wait() async { for await _ in opened {} }
    }

    let data: Data
    let chunkSize: Int
    let delay: Duration
    let gate = Gate()
    private let served = NIOLockedValueBox(0)
    private let asked = NIOLockedValueBox<[String: Int]>([:])

    /// Requests answered on paths starting with `prefix` (`/slow/`, `/denied/`) so far.
    func requests(_ prefix: String) -> Int { asked.withLockedValue { $0[prefix] ?? 0 } }
    private let channel: NIOAsyncChannel<NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>, Never>
    private let acceptTask = NIOLockedValueBox<Task<Void, Never>?>(nil)
    let port: Int

    /// Body bytes written so far, over all requests.
    var bytesServed: Int { served.withLockedValue { $0 } }

    init(data: Data, chunkSize: Int = 16 * 1024, delay: Duration = .milliseconds(1)) async throws {
        self.data = data
        self.chunkSize = chunkSize
        self.delay = delay
        (connectionsEnded, connectionsEndedContinuation) = AsyncStream.makeStream(of: Int.self)
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .bind(host: "127.0.0.1", port: 0) { child in
                child.eventLoop.makeCompletedFuture {
                    try child.pipeline.syncOperations.configureHTTPServerPipeline()
                    return try NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>(
                        wrappingChannelSynchronously: child)
                }
            }
        port = channel.channel.localAddress?.port ?? 0
        let channel = self.channel
        let task = Task { [self] () -> Void in
            _ = try? await channel.executeThenClose { connections in
                await withDiscardingTaskGroup { group in
                    do {
                        for try await connection in connections {
                            group.addTask { try? await self.handle(connection) }
                        }
                    } catch {}
                }
            }
        }
        acceptTask.withLockedValue { $0 = task }
    }

    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    func stop() async {
        gate.open()
        acceptTask.withLockedValue { $0?.cancel() }
        try? await channel.channel.close()
    }

    /// Yields the body bytes served so far each time a connection's handling ends (the response was
    /// sent, or the client went away and a write failed).
    let connectionsEnded: AsyncStream<Int>
    private let connectionsEndedContinuation: AsyncStream<Int>.Continuation

    private func handle(_ connection: NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>) async throws {
        defer { connectionsEndedContinuation.yield(bytesServed) }
        try await connection.executeThenClose { inbound, outbound in
            for try await part in inbound {
                guard case .head(let head) = part else { continue }
                let keepGoing = try await respond(to: head.uri, outbound)
                if !keepGoing { return }
            }
        }
    }

    /// Answers one request; returns false when the connection must close now.
    private func respond(to uri: String, _ out: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>) async throws -> Bool {
        func head(_ status: HTTPResponseStatus, _ headers: [(String, String)]) async throws {
            try await out.write(.head(HTTPResponseHead(version: .http1_1, status: status, headers: HTTPHeaders(headers))))
        }
        let path = String(uri.prefix { $0 != "?" })
        for prefix in ["/slow/", "/denied/"] where path.hasPrefix(prefix) { asked.withLockedValue { $0[prefix, default: 0] += 1 } }
        if path.hasPrefix("/slow/") && requests("/slow/") <= 2 || path.hasPrefix("/denied/") {
            // An object store's refusals: 503 SlowDown twice, then the object; 403 always.
            let slow = path.hasPrefix("/slow/")
            let body = Data("<Error><Code>\(slow ? "SlowDown" : "AccessDenied")</Code><Message>m &amp; n</Message></Error>".utf8)
            try await head(slow ? .serviceUnavailable : .forbidden, [("content-length", "\(body.count)")])
            try await send(body, out)
            try await out.write(.end(nil))
            return true
        }
        switch path {
        case "/404", "/500":
            try await head(uri == "/404" ? .notFound : .internalServerError, [("content-length", "0")])
            try await out.write(.end(nil))
            return true
        case "/redirect":
            try await head(.found, [("location", "/image"), ("content-length", "0")])
            try await out.write(.end(nil))
            return true
        case "/short-length":  // announces the whole file, sends half, closes
            try await head(.ok, [("content-length", "\(data.count)")])
            try await send(data.prefix(data.count / 2), out)
            return false
        case "/drop":  // chunked, no length: half the file, then the connection drops
            try await head(.ok, [("transfer-encoding", "chunked")])
            try await send(data.prefix(data.count / 2), out)
            return false
        case "/gated":  // everything but the last chunk, then waits for the gate
            try await head(.ok, [("content-length", "\(data.count)")])
            let split = data.count - min(chunkSize, data.count)
            try await send(data.prefix(split), out)
            await gate.wait()
            try await send(data.suffix(from: data.startIndex + split), out)
            try await out.write(.end(nil))
            return true
        default:  // "/image"
            try await head(.ok, [("content-length", "\(data.count)")])
            try await send(data, out)
            try await out.write(.end(nil))
            return true
        }
    }

    private func send(_ bytes: Data, _ out: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>) async throws {
        var offset = bytes.startIndex
        while offset < bytes.endIndex {
            let end = min(offset + chunkSize, bytes.endIndex)
            try await out.write(.body(.byteBuffer(ByteBuffer(bytes: bytes[offset..<end]))))
            served.withLockedValue { $0 += end - offset }
            offset = end
            if delay > .zero { try await Task.sleep(for: delay) }
        }
    }
}
