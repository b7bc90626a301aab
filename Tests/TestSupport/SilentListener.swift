public import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A loopback port that takes connections and never answers: it listens and never accepts, so the
/// kernel completes each handshake into the backlog and the client's request waits forever (a bucket's
/// endpoint that hangs). The socket is the listener's own, closed when it goes.
public final class SilentListener: Sendable {
    public let port: Int
    private let descriptor: Int32

    public init() throws { (descriptor, port) = try Self.listen(backlog: 128) }

    /// A TCP socket listening on 127.0.0.1 at a port the kernel chose, and that port; `receiveBuffer`,
    /// when given, is its `SO_RCVBUF` (inherited by the sockets it accepts). The caller owns the socket.
    static func listen(backlog: Int32, receiveBuffer: Int32? = nil) throws -> (descriptor: Int32, port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        if var size = receiveBuffer { _ = setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size)) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound, Glibc.listen(fd, backlog) == 0 else {
            let code = POSIXErrorCode(rawValue: errno) ?? .EIO
            close(fd)
            throw POSIXError(code)
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    deinit { close(descriptor) }
}
