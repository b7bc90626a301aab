import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A loopback HTTP/1.1 server that reads request bodies slowly: an object store at the far end of a
/// slow uplink. Each request's head is read, then its body (`Content-Length`) at most `bytesPerSecond`,
/// then a `200` with an `ETag` and no body, and the connection closed. Its receive buffer is small
/// (64 KiB), so what the client has sent and it has not read is little more than what the client's own
/// socket holds. One thread a connection, each closing its own socket; the listening socket is closed by
/// the accepting thread once the server goes (its deinitializer shuts it down).
/// Refusing, it answers `403 AccessDenied` (S3's XML) as soon as it has the head, then reads the body
/// to its end or the client's close, as a store that refuses a body before its end does.
public final class SlowReader: Sendable {
    public let port: Int
    private let descriptor: Int32
    private let bodies = Bodies()

    /// The bodies' lengths as read whole, one a request answered.
    public var bodyLengths: [Int] { bodies.lengths.withLock { $0 } }

    private final class Bodies: Sendable {
        let lengths = Mutex<[Int]>([])
    }

    /// The refusal's body, when refusing.
    public static let refusal = "<Error><Code>AccessDenied</Code><Message>refused early</Message></Error>"

    /// - Parameter chunked: the refusal's body in a chunk (no `Content-Length`), as AWS may send it.
    public init(bytesPerSecond: Int, refusing: Bool = false, chunked: Bool = false) throws {
        // A small receive buffer, inherited by the accepted sockets.
        let (fd, port) = try SilentListener.listen(backlog: 16, receiveBuffer: 64 << 10)
        (descriptor, self.port) = (fd, port)
        let bodies = bodies
        Thread.detachNewThread {
            defer { close(fd) }
            while true {
                let connection = accept(fd, nil, nil)
                guard connection >= 0 else {
                    if errno == EINTR { continue }
                    return  // the listening socket was shut down
                }
                Thread.detachNewThread {
                    Self.serve(connection, bytesPerSecond: bytesPerSecond, refusing: refusing, chunked: chunked, bodies: bodies)
                }
            }
        }
    }

    deinit { _ = shutdown(descriptor, Int32(SHUT_RDWR)) }  // the accepting thread's accept returns, and it closes the socket

    private static func serve(_ fd: Int32, bytesPerSecond: Int, refusing: Bool, chunked: Bool, bodies: Bodies) {
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        func receive(_ count: Int) -> Int {
            while true {
                let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, min(count, $0.count), 0) }
                if n < 0, errno == EINTR { continue }
                return n
            }
        }
        // The head, a byte at a time (nothing of the body is read with it).
        var head: [UInt8] = []
        while !head.suffix(4).elementsEqual([13, 10, 13, 10]) {
            guard head.count < 64 << 10, receive(1) == 1 else { return }
            head.append(buffer[0])
        }
        let lines = String(decoding: head, as: UTF8.self).split(separator: "\r\n")
        let lengthLine = lines.first { $0.lowercased().hasPrefix("content-length:") }
        let length = lengthLine.flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
        func answer(_ text: String) { _ = text.utf8CString.withUnsafeBytes { send(fd, $0.baseAddress, $0.count - 1, Int32(MSG_NOSIGNAL)) } }
        if refusing, chunked {
            let size = String(Self.refusal.utf8.count, radix: 16)
            answer("HTTP/1.1 403 Forbidden\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n\(size)\r\n\(Self.refusal)\r\n0\r\n\r\n")
        } else if refusing {
            answer("HTTP/1.1 403 Forbidden\r\nContent-Length: \(Self.refusal.utf8.count)\r\nConnection: close\r\n\r\n\(Self.refusal)")
        }
        // The body, paced: after each read, a pause until the bytes so far are due at the rate.
        let start = ContinuousClock.now
        var read = 0
        while read < length {
            let n = receive(min(16 << 10, length - read))
            guard n > 0 else { return }
            read += n
            let wait = start + .seconds(Double(read) / Double(bytesPerSecond)) - .now
            if wait > .zero { Thread.sleep(forTimeInterval: Double(wait.components.seconds) + Double(wait.components.attoseconds) / 1e18) }
        }
        bodies.lengths.withLock { $0.append(read) }
        if !refusing { answer("HTTP/1.1 200 OK\r\nETag: \"slow\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n") }
    }
}
