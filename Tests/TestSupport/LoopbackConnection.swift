public import Foundation
import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// A plain TCP connection to a loopback port, for what no HTTP client sends: a body that stops, headers
/// that never end, a request written by hand.
///
/// @unchecked Sendable: its one stored property never changes, and `send`, `recv` and `shutdown` on one
/// socket may be called from different threads (a sender blocked on a full socket, and a thread that
/// shuts the connection down).
public final class LoopbackConnection: @unchecked Sendable {
    private let fd: Int32

    /// How long a test waits for an answer it expects from a server in its own process, when the wait
    /// ends as the answer (or the connection's close) comes: the server's routes need a thread of
    /// Swift's cooperative pool (one per core), which tests running beside it hold for minutes at a
    /// time while they wait for child processes (a CI run once saw no `421` within 30 s).
    public static let answerTimeout = Duration.seconds(120)

    /// Connects to `port` on 127.0.0.1.
    /// - Parameter source: the local address to connect from (another of 127/8's, so that a server
    ///   sees another client), or the kernel's choice.
    public init(port: UInt16, from source: String? = nil) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        func address(_ text: String, _ port: UInt16) -> sockaddr_in {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            address.sin_addr.s_addr = inet_addr(text)
            return address
        }
        func call(_ address: sockaddr_in, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Int32) -> Int32 {
            withUnsafePointer(to: address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
        }
        let bound = source.map { source in call(address(source, 0)) { bind(fd, $0, $1) } } ?? 0
        let connected = bound == 0 ? call(address("127.0.0.1", port)) { connect(fd, $0, $1) } : -1
        // Not closed here: the value is whole, so its deinitializer runs when this throws, and closes it
        // (closed twice, the number may meanwhile be another thread's descriptor: CI once saw a spawn
        // fail with EBADF while Varnish's start was polled).
        guard fd >= 0, connected == 0 else { throw TileError(.io, "cannot connect to port \(port)") }
    }

    deinit { if fd >= 0 { close(fd) } }

    /// The connection's own port (how the server names this client), 0 when it cannot be read.
    public var localPort: Int {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Shuts the connection down both ways (a send blocked on it returns).
    public func shutDown() { _ = Glibc.shutdown(fd, Int32(SHUT_RDWR)) }

    /// Closes the sending side only (a FIN): what the peer sees when a client hangs up, as a closed
    /// socket, while the answer can still be read here.
    public func shutDownWrites() { _ = Glibc.shutdown(fd, Int32(SHUT_WR)) }

    /// Sends all of `data`, blocking while the peer's window is full. A blocking `send` interrupted by
    /// a signal returns what it has sent so far (`SIGCHLD` from the children other tests start; seen in
    /// CI's ASan stage, where a server that reads slowly kept a 50 KB send blocked): the rest is sent.
    /// - Throws: when the connection is reset or shut down before everything is sent.
    public func send(_ data: Data) throws {
        var offset = 0
        while offset < data.count {
            let sent = data.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if sent < 0, errno == EINTR { continue }
            guard sent > 0 else { throw TileError(.io, "send failed after \(offset) of \(data.count) bytes: errno \(errno)") }
            offset += sent
        }
    }

    /// Everything the peer sends until it closes the connection, or until `timeout` passes.
    /// - Returns: the bytes, and whether the peer closed.
    @available(*, noasync, message: "blocks a thread of the cooperative pool: use received(timeout:) or onOwnThread")
    public func read(timeout: Duration) -> (bytes: Data, closed: Bool) { read(timeout: timeout, until: { _ in false }) }

    /// As ``read(timeout:)``, waiting on a thread of its own (``onOwnThread(_:)``).
    public func received(timeout: Duration) async -> (bytes: Data, closed: Bool) {
        await Self.onOwnThread { self.read(timeout: timeout) }
    }

    /// As ``read(timeout:until:)``, waiting on a thread of its own (``onOwnThread(_:)``).
    public func received(timeout: Duration, until done: @escaping @Sendable (Data) -> Bool) async -> (bytes: Data, closed: Bool) {
        await Self.onOwnThread { self.read(timeout: timeout, until: done) }
    }

    /// Runs `reads` (blocking reads of connections) on a thread of its own: an async test never blocks
    /// Swift's cooperative pool, which an in-process server's request handlers need.
    public static func onOwnThread<T: Sendable>(_ reads: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: reads()) }.start()
        }
    }

    /// What the peer sends until it closes the connection, `timeout` passes, or `done` says the bytes
    /// so far are enough.
    @available(*, noasync, message: "blocks a thread of the cooperative pool: use received(timeout:) or onOwnThread")
    public func read(timeout: Duration, until done: (Data) -> Bool) -> (bytes: Data, closed: Bool) {
        let (bytes, end) = readStream(timeout: timeout, until: done)
        return (bytes, end != nil)
    }

    /// As ``read(timeout:)``, saying how the stream ended: `0` when the peer closed it (its FIN), the
    /// error otherwise (`ECONNRESET`: a reset, which drops what the peer sent and was not read yet),
    /// nil when `timeout` passed first.
    @available(*, noasync, message: "blocks a thread of the cooperative pool: use received(timeout:) or onOwnThread")
    public func readToEnd(timeout: Duration) -> (bytes: Data, end: Int32?) { readStream(timeout: timeout, until: { _ in false }) }

    private func readStream(timeout: Duration, until done: (Data) -> Bool) -> (bytes: Data, end: Int32?) {
        var received = Data()
        var buffer = [UInt8](repeating: 0, count: 65536)
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) >= 0 else { break }
            if poller.revents == 0 { continue }
            let n = recv(fd, &buffer, buffer.count, 0)
            if n < 0, errno == EINTR { continue }
            if n <= 0 { return (received, n == 0 ? 0 : errno) }
            received.append(contentsOf: buffer[0..<n])
            if done(received) { break }
        }
        return (received, nil)
    }
}
