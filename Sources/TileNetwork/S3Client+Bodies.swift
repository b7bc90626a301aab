import AsyncHTTPClient
import NIOConcurrencyHelpers
import NIOCore

// Request bodies: handed to the connection a slice at a time as it takes them, and watched for a store
// that stops taking them.
extension S3Client {
    /// Bytes of a request body handed to the connection at a time. AsyncHTTPClient starts its read
    /// timeout when a body's last bytes are queued on the connection, not when they are sent: a part
    /// queued whole (16 MiB) had to reach the store and be answered within that timeout (30 s: never,
    /// below about 4.5 Mbit/s of uplink). Handed over a slice at a time, each once the connection has
    /// taken the one before, only the last slice and what the socket holds are under way when it starts.
    static let bodySlice = 256 << 10

    /// `request`'s response, `body` sent with it. A body of more than one slice goes a slice at a time
    /// (AsyncHTTPClient's streaming writer: its futures complete once the connection takes a slice, where
    /// its `async` body sequences are read ahead of the connection), its answer collected (up to
    /// 1 MiB); the try fails with ``StalledBody`` when the store takes no slice for
    /// ``S3Configuration/stallTimeout`` (seen within twice that) once it has taken the first. Before the
    /// first slice (a connection being made, or waited for in the pool) and after the last,
    /// AsyncHTTPClient's own timeouts apply.
    func execute(_ request: HTTPClientRequest, body: ByteBuffer?, timeout: TimeAmount) async throws -> HTTPClientResponse {
        guard let body, body.readableBytes > Self.bodySlice else {
            var request = request
            if let body { request.body = .bytes(body) }
            return try await client.execute(request, timeout: timeout)
        }
        let progress = BodyProgress()
        let streamed = try HTTPClient.Request(
            url: request.url, method: request.method, headers: request.headers,
            body: .stream(contentLength: Int64(body.readableBytes)) { writer in Self.write(body, to: writer, progress) })
        let (client, limit) = (client, configuration.stallTimeout)
        return try await withThrowingTaskGroup(of: HTTPClientResponse?.self) { group in
            group.addTask {
                let task = client.execute(
                    request: streamed, delegate: ResponseAccumulator(request: streamed, maxBodySize: 1 << 20), eventLoop: .indifferent,
                    deadline: .now() + timeout)
                let response = try await withTaskCancellationHandler {
                    try await task.futureResult.get()
                } onCancel: {
                    task.cancel()
                }
                return HTTPClientResponse(
                    version: response.version, status: response.status, headers: response.headers, body: .bytes(response.body ?? ByteBuffer()))
            }
            group.addTask {
                try await progress.watch(limit)
                return nil
            }
            defer { group.cancelAll() }
            while let result = try await group.next() {
                if let result { return result }
                if progress.hasStalled { throw StalledBody(limit: limit) }
            }
            throw StalledBody(limit: limit)  // not reached: the request's task answers or throws
        }
    }

    /// Writes `rest` to `writer` a slice at a time, each once the connection has taken the one before
    /// (the writer's future), counted in `progress`; each next slice from the event loop afresh (no
    /// stack grows when the futures complete at once).
    private static func write(_ rest: ByteBuffer, to writer: HTTPClient.Body.StreamWriter, _ progress: BodyProgress) -> EventLoopFuture<Void> {
        var rest = rest
        let slice = rest.readSlice(length: Swift.min(bodySlice, rest.readableBytes)) ?? ByteBuffer()
        return writer.write(.byteBuffer(slice)).flatMapWithEventLoop { [rest] _, loop in
            progress.took()
            guard rest.readableBytes > 0 else {
                progress.ended()
                return loop.makeSucceededVoidFuture()
            }
            return loop.flatSubmit { write(rest, to: writer, progress) }
        }
    }
}

/// The store took no bytes of a request's body for ``limit``: the try is given up (and tried again as
/// a connection's failure is).
struct StalledBody: Error, CustomStringConvertible {
    let limit: Duration
    var description: String { "the store took no bytes of the request's body for \(limit)" }
}

/// How much of a request's body the connection has taken, slice by slice.
final class BodyProgress: Sendable {
    private struct State {
        var slices = 0
        var isEnded = false
        var hasStalled = false
    }
    private let state = NIOLockedValueBox(State())

    func took() { state.withLockedValue { $0.slices += 1 } }
    func ended() { state.withLockedValue { $0.isEnded = true } }
    /// Whether ``watch(_:)`` returned because no slice was taken for its limit.
    var hasStalled: Bool { state.withLockedValue { $0.hasStalled } }

    /// Returns when the body has ended, or when a whole `limit` passed without a slice taken after the
    /// first (``hasStalled``). Throws `CancellationError` when its task is cancelled.
    func watch(_ limit: Duration) async throws {
        var seen = 0
        while true {
            try await Task.sleep(for: limit)
            let stalled = state.withLockedValue { state -> Bool? in
                if state.isEnded { return false }
                if state.slices > 0, state.slices == seen {
                    state.hasStalled = true
                    return true
                }
                seen = state.slices
                return nil
            }
            if stalled != nil { return }
        }
    }
}
