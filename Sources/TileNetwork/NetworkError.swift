public import TileActors
public import TileCore

/// Why an HTTP image source failed: a stable ``Code``, the URL, and the HTTP status or bytes received.
public struct NetworkError: Error, Sendable, Hashable, CustomStringConvertible, TileErrorConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable { case httpStatus, truncated, timeout, connection, invalidURL }
        private let base: Base
        private init(_ base: Base) { self.base = base }
        /// The server answered with a status outside 200...299 (``NetworkError/status``).
        public static let httpStatus = Code(.httpStatus)
        /// The body ended (or the connection dropped) before its announced length, or before the image.
        public static let truncated = Code(.truncated)
        /// Connecting or waiting for the next bytes took longer than allowed.
        public static let timeout = Code(.timeout)
        /// The connection could not be made or failed otherwise (refused, too many redirects, TLS).
        public static let connection = Code(.connection)
        public static let invalidURL = Code(.invalidURL)
        public var description: String { base.rawValue }
    }

    public var code: Code
    public var url: String
    /// The HTTP status, for ``Code/httpStatus``.
    public var status: Int?
    /// Body bytes received before the failure.
    public var bytesReceived: Int
    /// The announced length (Content-Length), if any.
    public var expectedBytes: Int?
    /// What the HTTP client said, if anything.
    public var cause: String?

    public var description: String {
        switch code {
        case .httpStatus: return "\(url): HTTP status \(status ?? 0)"
        case .truncated:
            let of = expectedBytes.map { " of \($0)" } ?? ""
            return "\(url): the body ended after \(bytesReceived)\(of) bytes\(cause.map { " (\($0))" } ?? "")"
        case .connection: return "\(url): cannot connect\(cause.map { ": \($0)" } ?? "")"
        default: return "\(url): \(code)\(cause.map { ": \($0)" } ?? "")"
        }
    }

    /// Truncated bodies are `TileError.Code.truncated`; everything else is `TileError.Code.io`.
    public var tileError: TileError { TileError(code == .truncated ? .truncated : .io, description) }
}
