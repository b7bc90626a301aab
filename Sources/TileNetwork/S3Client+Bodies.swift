public import AsyncHTTPClient
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

// Request bodies: handed to the connection a slice at a time, each once the socket has taken the one
// before, and watched for a store that stops taking them.
extension S3Client {
    /// The HTTP client of ``S3Client/init(configuration:client:)`` by default: HTTP/1.1 only (S3's
    /// protocol; an HTTP/2 stream's write buffer is smaller than a slice, and would pause every one),
    /// no redirects (a request is signed for one host: a redirect is the store's error), connections
    /// made within 10 s, 30 s at most between an answer's bytes.
    public static let sharedClient: HTTPClient = {
        var configuration = HTTPClient.Configuration(redirectConfiguration: .disallow, timeout: .init(connect: .seconds(10), read: .seconds(30)))
        configuration.decompression = .disabled
        configuration.httpVersion = .http1Only
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }()

    /// Bytes of a request body handed to the connection at a time: NIO's default low watermark, so that
    /// one slice and the request's head never make the connection unwritable (AsyncHTTPClient never
    /// pauses the body, and no write of its waits on a promise a failure would drop).
    ///
    /// AsyncHTTPClient starts its read timeout when a body's last bytes are queued on the connection,
    /// not when they are sent: a part queued whole (16 MiB) had to reach the store and be answered
    /// within that timeout (30 s: never, below about 4.5 Mbit/s of uplink). Here each slice is handed
    /// over once the socket has taken the one before, so only the last slice and what the kernel holds
    /// are under way when the timer starts. (AsyncHTTPClient's `async` body sequences are read ahead of
    /// the connection, and its streaming writer's futures complete before a slice is written.)
    static let bodySlice = 32 << 10

    /// `request`'s response, `body` sent with it. A body of more than one slice goes a slice at a time
    /// (``BodyUpload``); the try fails with ``StalledBody`` when the socket takes no slice for
    /// ``S3Configuration/stallTimeout`` (seen within twice that) once it has taken the first: at least
    /// 32 KiB in that time, or the store is taken for gone. Before the first slice (a connection being
    /// made, or waited for in the pool) and after the last, AsyncHTTPClient's own timeouts apply. A
    /// store that answers before the body's end (a refusal) is answered with its status.
    func execute(_ request: HTTPClientRequest, body: ByteBuffer?, timeout: TimeAmount) async throws -> HTTPClientResponse {
        guard let body, body.readableBytes > Self.bodySlice else {
            var request = request
            if let body { request.body = .bytes(body) }
            return try await client.execute(request, timeout: timeout)
        }
        // The request's task and its connection on one event loop: the delegate's calls, the writes and
        // AsyncHTTPClient's own state in one order.
        let loop = client.eventLoopGroup.any()
        let upload = BodyUpload(loop: loop)
        let streamed = try HTTPClient.Request(
            url: request.url, method: request.method, headers: request.headers,
            body: .stream(contentLength: Int64(body.readableBytes)) { writer in upload.send(body, to: writer) })
        let (client, limit) = (client, configuration.stallTimeout)
        return try await withThrowingTaskGroup(of: HTTPClientResponse?.self) { group in
            group.addTask {
                let task = client.execute(
                    request: streamed, delegate: upload, eventLoop: .delegateAndChannel(on: loop), deadline: .now() + timeout)
                do {
                    return try await withTaskCancellationHandler {
                        try await task.futureResult.get()
                    } onCancel: {
                        task.cancel()
                    }
                } catch is BodyUpload.AnsweredEarly {
                    return upload.collected
                }
            }
            group.addTask {
                try await upload.watch(limit)
                return nil
            }
            defer { group.cancelAll() }
            while let result = try await group.next() {
                if let result { return result }
                if upload.hasStalled { throw StalledBody(limit: limit) }
            }
            throw StalledBody(limit: limit)  // not reached: the request's task answers or throws
        }
    }
}

/// The store took no bytes of a request's body for ``limit``: the try is given up (and tried again as
/// a connection's failure is).
struct StalledBody: Error, CustomStringConvertible {
    let limit: Duration
    var description: String { "the store took no bytes of the request's body for \(limit)" }
}

/// One request's body sent a slice at a time, and its answer collected: AsyncHTTPClient's response
/// delegate, told when each slice is written to the socket (its write's promise), which lets the next
/// one go. An answer of 300 or more that comes before the body's
/// end (a refusal: the connection will not take the rest) stops the body once its own body (its
/// `Content-Length`) has come, and is the response.
final class BodyUpload: HTTPClientResponseDelegate, Sendable {
    typealias Response = HTTPClientResponse

    /// Ends the request when the store answered before the body's end (its answer: ``collected``).
    struct AnsweredEarly: Error {}

    private struct State {
        var written = 0
        var handedOver = 0
        var isEnded = false
        var hasStalled = false
        /// The writer's wait: for the slices handed over to be written, or for a refusal's body.
        var waiter: EventLoopPromise<Void>?
        var head: HTTPResponseHead?
        var answer = ByteBuffer()
        /// A refusal came before the body's end: no slice more is handed over.
        var isAnsweredEarly = false
        /// The refusal's body is not waited for any longer (``watch(_:)``'s next look).
        var isCutShort = false

        /// Whether the writer stops now: a refusal came, and its body has come whole as far as its head
        /// says (its `Content-Length`; without one, S3's error document's end), or is waited for no longer.
        var stopsNow: Bool {
            guard isAnsweredEarly else { return false }
            if isCutShort { return true }
            if let length = head?.headers.first(name: "content-length").flatMap({ Int($0) }) {
                return answer.readableBytes >= Swift.min(length, BodyUpload.answerLimit)
            }
            return answer.readableBytesView.firstRange(of: Array("</Error>".utf8)) != nil
        }

        /// The writer's wait taken, to be ended.
        mutating func takeWaiter() -> EventLoopPromise<Void>? {
            defer { waiter = nil }
            return waiter
        }
    }
    private let state = NIOLockedValueBox(State())
    private let loop: any EventLoop
    /// The most of an answer's body kept (an error's XML).
    static let answerLimit = 1 << 20

    /// - Parameter loop: the event loop of the request's task and connection.
    init(loop: any EventLoop) { self.loop = loop }

    /// Whether ``watch(_:)`` returned because no slice was written for its limit.
    var hasStalled: Bool { state.withLockedValue { $0.hasStalled } }

    /// The answer as it has come: its head, and its body's first ``answerLimit`` bytes.
    var collected: HTTPClientResponse {
        state.withLockedValue { state in
            let head = state.head ?? HTTPResponseHead(version: .http1_1, status: .internalServerError)
            return HTTPClientResponse(version: head.version, status: head.status, headers: head.headers, body: .bytes(state.answer))
        }
    }

    /// Writes `rest` to `writer` a slice at a time, each once the one before is written to the socket;
    /// each next slice from the event loop afresh (no stack grows). Once a refusal came, nothing more.
    func send(_ rest: ByteBuffer, to writer: HTTPClient.Body.StreamWriter) -> EventLoopFuture<Void> {
        var rest = rest
        let slice = rest.readSlice(length: Swift.min(S3Client.bodySlice, rest.readableBytes)) ?? ByteBuffer()
        let refused = state.withLockedValue { state in
            if !state.isAnsweredEarly { state.handedOver += 1 }
            return state.isAnsweredEarly
        }
        if refused { return wait() }
        return writer.write(.byteBuffer(slice)).flatMap { [rest, loop] in
            self.wait().flatMap {
                guard rest.readableBytes > 0 else {
                    self.state.withLockedValue { $0.isEnded = true }
                    return loop.makeSucceededVoidFuture()
                }
                return loop.flatSubmit { self.send(rest, to: writer) }
            }
        }
    }

    /// Succeeds once every slice handed over is written; fails (``AnsweredEarly``) once a refusal's
    /// body has come, or with the request's error.
    private func wait() -> EventLoopFuture<Void> {
        let promise = loop.makePromise(of: Void.self)
        let go: Bool? = state.withLockedValue { state in
            if state.stopsNow { return false }
            if !state.isAnsweredEarly, state.written >= state.handedOver { return true }
            state.waiter = promise
            return nil
        }
        switch go {
        case true?: promise.succeed()
        case false?: promise.fail(AnsweredEarly())
        case nil: break
        }
        return promise.futureResult
    }

    /// Ends the writer's wait: lets it go on, or stops the body with `error`.
    private func release(_ waiter: EventLoopPromise<Void>?, failing error: (any Error)? = nil) {
        guard let waiter else { return }
        if let error { waiter.fail(error) } else { waiter.succeed() }
    }

    func didSendRequestPart(task: HTTPClient.Task<Response>, _ part: IOData) {
        let waiter = state.withLockedValue { state -> EventLoopPromise<Void>? in
            state.written += 1
            guard !state.isAnsweredEarly, state.written >= state.handedOver else { return nil }
            return state.takeWaiter()
        }
        release(waiter)
    }

    func didReceiveHead(task: HTTPClient.Task<Response>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        let waiter = state.withLockedValue { state -> EventLoopPromise<Void>? in
            state.head = head
            // A refusal before the body's end: the rest is not sent; the request ends once the
            // answer's body has come.
            guard !state.isEnded, head.status.code >= 300 else { return nil }
            state.isAnsweredEarly = true
            return state.stopsNow ? state.takeWaiter() : nil
        }
        release(waiter, failing: AnsweredEarly())
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Response>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        let waiter = state.withLockedValue { state -> EventLoopPromise<Void>? in
            var buffer = buffer
            let room = Self.answerLimit - state.answer.readableBytes
            if room > 0, let kept = buffer.readSlice(length: Swift.min(buffer.readableBytes, room)) { state.answer.writeImmutableBuffer(kept) }
            return state.stopsNow ? state.takeWaiter() : nil
        }
        release(waiter, failing: AnsweredEarly())
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveError(task: HTTPClient.Task<Response>, _ error: any Error) {
        release(state.withLockedValue { $0.takeWaiter() }, failing: error)
    }

    func didFinishRequest(task: HTTPClient.Task<Response>) throws -> HTTPClientResponse { collected }

    /// Returns when the body has ended, or when a whole `limit` passed without a slice written after
    /// the first (``hasStalled``). Throws `CancellationError` when its task is cancelled.
    func watch(_ limit: Duration) async throws {
        var seen = 0
        while true {
            try await Task.sleep(for: limit)
            let (stalled, waiter) = state.withLockedValue { state -> (Bool?, EventLoopPromise<Void>?) in
                if state.isEnded { return (false, nil) }
                // A refusal's body waited for a whole limit: the answer is what has come.
                if state.isAnsweredEarly {
                    state.isCutShort = true
                    return (false, state.takeWaiter())
                }
                if state.written > 0, state.written == seen {
                    state.hasStalled = true
                    return (true, nil)
                }
                seen = state.written
                return (nil, nil)
            }
            release(waiter, failing: AnsweredEarly())
            if stalled != nil { return }
        }
    }
}
