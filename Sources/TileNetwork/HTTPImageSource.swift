public import AsyncHTTPClient
import Foundation
public import NIOCore
import NIOPosix
import NIOFoundationCompat
import NIOHTTP1
public import TileActors
import TileCore

/// A JPEG served over HTTP(S): the response body is streamed into an `ImageBuilder` chunk by chunk as
/// it arrives (with backpressure), never buffered whole, so decoding and tiling run during the download.
///
/// Redirects are followed up to the client's limit; a status outside 200...299 fails with
/// ``NetworkError/Code/httpStatus``; a body shorter than its Content-Length, or a connection that drops
/// mid-body, fails with ``NetworkError/Code/truncated`` (bytes received included). Cancelling the task
/// closes the connection.
public struct HTTPImageSource: ImageSource {
    public let url: String
    public var name: String { url }
    /// `true`: a progressive JPEG downloaded gets whole-image previews by default.
    public var streamsOverNetwork: Bool { true }
    private let client: HTTPClient
    private let timeout: TimeAmount
    /// Called as each part of the body arrives, before it is decoded, with the bytes received so far
    /// and the total the server announced (Content-Length), if any: download progress, apart from the
    /// builder's decode progress. Called on the task that reads the body (up to ``readAheadLimit``
    /// bytes ahead of the decoder); keep it short.
    public var onBodyPart: (@Sendable (_ bytesReceived: Int, _ expectedBytes: Int?) -> Void)?

    /// - Parameters:
    ///   - url: an http or https URL.
    ///   - client: the HTTP client (default ``HTTPImageSource/sharedClient``); its configuration holds
    ///     the connect and idle-read timeouts and the redirect limit.
    ///   - timeout: the longest the whole transfer may take (default 10 minutes).
    public init(url: String, client: HTTPClient = HTTPImageSource.sharedClient, timeout: TimeAmount = .minutes(10)) {
        self.url = url
        self.client = client
        self.timeout = timeout
    }

    /// The bytes of a body read ahead of the decoder at most (8 MiB: 0.4 s at 20 MB/s): what a source
    /// holds beyond the builder's own memory.
    public static let readAheadLimit = 8 << 20

    /// A client made with ``makeClient(connectTimeout:readTimeout:maximumRedirects:retriesConnecting:)``'s defaults.
    public static let sharedClient = makeClient()

    /// Makes an HTTP client for image sources.
    /// - Parameters:
    ///   - connectTimeout: default 10 s.
    ///   - readTimeout: the longest wait for the next bytes, default 30 s.
    ///   - maximumRedirects: default 5 (cycles refused).
    ///   - retriesConnecting: whether a connection that fails to establish (refused, unreachable) is
    ///     tried again with backoff until the connect timeout. Default `false`: an image source makes
    ///     one request, and a refused connection should fail at once, not after the timeout.
    public static func makeClient(
        connectTimeout: TimeAmount = .seconds(10), readTimeout: TimeAmount = .seconds(30), maximumRedirects: Int = 5,
        retriesConnecting: Bool = false
    ) -> HTTPClient {
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .follow(max: maximumRedirects, allowCycles: false),
            timeout: .init(connect: connectTimeout, read: readTimeout))
        configuration.decompression = .disabled
        configuration.connectionPool.retryConnectionEstablishment = retriesConnecting
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    public func feed(into builder: ImageBuilder) async throws {
        try await stream(announce: { await builder.setExpectedBytes($0) }) { part in
            try await builder.append(part)
            return await builder.hasReachedEndOfImage
        }
    }

    /// Streams the response body into an export, as ``feed(into:)-(ImageBuilder)`` does into a build.
    public func feed(into exporter: ImageExporter) async throws {
        try await stream(announce: { _ in }) { part in
            try await exporter.append(part)
            return await exporter.hasReachedEndOfImage
        }
    }

    /// Makes the request and hands each body part to `consume`, which says when the image is
    /// complete (the transfer stops there).
    private func stream(
        announce: (Int?) async -> Void, _ consume: (ByteBufferView) async throws -> Bool
    ) async throws {
        let request = HTTPClientRequest(url: url)
        let response: HTTPClientResponse
        do { response = try await client.execute(request, timeout: timeout) } catch {
            throw Self.classify(error, url: url, received: 0, expected: nil, duringBody: false)
        }
        guard (200...299).contains(Int(response.status.code)) else {
            throw NetworkError(code: .httpStatus, url: url, status: Int(response.status.code), bytesReceived: 0)
        }
        try await Self.feed(response, name: url, onBodyPart: onBodyPart, announce: announce, consume)
    }

    /// Hands `response`'s body to `consume` part by part, read ahead of it (``readAheadLimit``: a pause
    /// of the decoder's does not pause the download), until `consume` says the image is complete; what
    /// `name` names in errors. A body shorter than its Content-Length is ``NetworkError/Code/truncated``.
    static func feed(
        _ response: HTTPClientResponse, name: String, onBodyPart: (@Sendable (Int, Int?) -> Void)?, announce: (Int?) async -> Void,
        _ consume: (ByteBufferView) async throws -> Bool
    ) async throws {
        let expected = response.headers.first(name: "content-length").flatMap { Int($0) }
        await announce(expected)
        var received = 0
        var isWhole = false
        var arrived: (@Sendable (Int) -> Void)?
        if let report = onBodyPart { arrived = { @Sendable total in report(total, expected) } }
        do {
            try await ReadAhead.consume(response.body, limit: readAheadLimit, arrived: arrived) { buffer in
                received += buffer.readableBytes
                isWhole = try await consume(buffer.readableBytesView)
                return isWhole
            }
            if isWhole { return }
        } catch let error as TileError {
            throw error
        } catch {
            throw classify(error, url: name, received: received, expected: expected, duringBody: true)
        }
        if let expected, received < expected {
            throw NetworkError(code: .truncated, url: name, bytesReceived: received, expectedBytes: expected)
        }
    }

    static func classify(_ error: any Error, url: String, received: Int, expected: Int?, duringBody: Bool) -> any Error {
        if error is CancellationError { return error }
        if let client = error as? HTTPClientError {
            if client == .cancelled { return CancellationError() }
            if client == .readTimeout || client == .connectTimeout || client == .deadlineExceeded {
                return NetworkError(code: .timeout, url: url, bytesReceived: received, expectedBytes: expected, cause: "\(client)")
            }
        }
        if duringBody {
            return NetworkError(code: .truncated, url: url, bytesReceived: received, expectedBytes: expected, cause: "\(error)")
        }
        return NetworkError(code: .connection, url: url, bytesReceived: received, expectedBytes: expected, cause: describe(error))
    }

    /// The cause of a connection failure in words (`Connection refused`), not NIO's debug text.
    static func describe(_ error: any Error) -> String {
        if let failure = error as? NIOConnectionError {
            if let first = failure.connectionErrors.first { return describe(first.error) }
            if let dns = failure.dnsAAAAError ?? failure.dnsAError { return "cannot resolve \(failure.host): \(dns)" }
        }
        if let io = error as? IOError { return String(cString: strerror(io.errnoCode)) }
        return "\(error)"
    }
}
