import Foundation
import HTTPTypes

#if canImport(Glibc)
import Glibc
#endif

/// A range of addresses (`10.0.0.0/8`, `fd00::/8`, `127.0.0.1`): the proxies whose `Forwarded` and
/// `X-Forwarded-*` headers a server believes (``RequestGuard/trustedProxies``).
public struct AddressRange: Sendable, Hashable, CustomStringConvertible {
    /// The first address, as 16 bytes (an IPv4 address mapped into IPv6: `::ffff:a.b.c.d`).
    private let bytes: [UInt8]
    private let prefixLength: Int
    public let description: String

    /// Reads `address` or `address/prefix-length`; nil for anything else.
    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1).map(String.init)
        guard let first = parts.first, let (bytes, isV4) = Self.parse(first) else { return nil }
        let full = isV4 ? 32 : 128
        guard let length = parts.count == 2 ? Int(parts[1]) : full, (0...full).contains(length) else { return nil }
        (self.bytes, prefixLength, description) = (bytes, length + (isV4 ? 96 : 0), text)
    }

    /// What one client is counted by (login attempts): an IPv4 address as it is, an IPv6 address's /64
    /// (what one subscriber is given), as hexadecimal; nil for no address.
    static func clientKey(_ address: String) -> String? {
        guard let (bytes, isV4) = parse(address) else { return nil }
        return isV4 ? address : bytes.prefix(8).map { String($0, radix: 16) }.joined(separator: ":") + "::/64"
    }

    /// Whether `address` (a peer's IP address as text) is in the range.
    public func contains(_ address: String) -> Bool {
        guard let (other, _) = Self.parse(address) else { return false }
        for bit in 0..<prefixLength where (bytes[bit / 8] ^ other[bit / 8]) & (0x80 >> UInt8(bit % 8)) != 0 { return false }
        return true
    }

    private static func parse(_ text: String) -> ([UInt8], Bool)? {
        var v4 = in_addr(), v6 = in6_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            return ([UInt8](repeating: 0, count: 10) + [0xff, 0xff] + withUnsafeBytes(of: &v4) { Array($0) }, true)
        }
        if inet_pton(AF_INET6, text, &v6) == 1 { return (withUnsafeBytes(of: &v6) { Array($0) }, false) }
        return nil
    }
}

/// Where clients reach the server: the scheme, the authority and the path prefix that URLs in answers
/// (info.json's `id`, the 303 to it) start with. From a trusted proxy's `Forwarded` (RFC 7239: its
/// first element's `proto` and `host`), else its `X-Forwarded-Proto`, `-Host`, `-Port` and `-Prefix`
/// (first values); else the request's own `Host`. Headers of untrusted peers never arrive here: the
/// request guard removes them.
struct ForwardedOrigin: Sendable, Hashable {
    var scheme = "http"
    var authority: String
    var prefix = ""

    static let forwardedNames: [HTTPField.Name] = [
        .forwarded, .xForwardedProto, .xForwardedHost, .xForwardedPort, .xForwardedPrefix, .xForwardedFor
    ]

    init(_ fields: HTTPFields, authority: String?) {
        self.authority = authority ?? "localhost"
        var (proto, host, port, prefix) = (String?.none, String?.none, String?.none, fields[.xForwardedPrefix].map(Self.first))
        if let forwarded = fields[.forwarded] {
            for pair in Self.first(forwarded).split(separator: ";") {
                let kv = pair.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                guard kv.count == 2 else { continue }
                let value = kv[1].hasPrefix("\"") && kv[1].hasSuffix("\"") && kv[1].count >= 2 ? String(kv[1].dropFirst().dropLast()) : kv[1]
                switch kv[0].lowercased() {
                case "proto": proto = value
                case "host": host = value
                default: break
                }
            }
        } else {
            (proto, host, port) = (
                fields[.xForwardedProto].map(Self.first), fields[.xForwardedHost].map(Self.first), fields[.xForwardedPort].map(Self.first)
            )
        }
        if let proto = proto?.lowercased(), proto == "http" || proto == "https" { scheme = proto }
        if let host, Self.isAuthority(host) { self.authority = host }
        if let port, let number = Int(port), (1...65535).contains(number) {
            let name =
                self.authority.hasSuffix("]") || !self.authority.contains(":")
                ? self.authority : String(self.authority[..<self.authority.lastIndex(of: ":")!])
            self.authority = (scheme == "https" && number == 443) || (scheme == "http" && number == 80) ? name : "\(name):\(number)"
        }
        if var prefix, prefix.hasPrefix("/"), Self.isPath(prefix) {
            while prefix.hasSuffix("/") { prefix.removeLast() }
            self.prefix = prefix
        }
    }

    /// `scheme://authority/prefix`, without a trailing slash.
    var base: String { "\(scheme)://\(authority)\(prefix)" }

    private static func first(_ value: String) -> String {
        String(value.split(separator: ",", maxSplits: 1).first ?? "").trimmingCharacters(in: .whitespaces)
    }

    /// A host name or address with an optional port: letters, digits, `.`, `-`, `:`, `[`, `]`.
    private static func isAuthority(_ text: String) -> Bool {
        !text.isEmpty && text.count <= 255
            && text.unicodeScalars.allSatisfy {
                $0.properties.isASCIIHexDigit || ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ".-:[]".unicodeScalars.contains($0)
            }
    }

    /// A path of plain segments: letters, digits, `-`, `_`, `.`, `~`, `/`; no `..` segment.
    private static func isPath(_ text: String) -> Bool {
        text.count <= 255 && !text.split(separator: "/").contains("..")
            && text.unicodeScalars.allSatisfy {
                ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || "-_.~/".unicodeScalars.contains($0)
            }
    }
}

extension HTTPField.Name {
    static let forwarded = Self("Forwarded")!
    static let xForwardedProto = Self("X-Forwarded-Proto")!
    static let xForwardedHost = Self("X-Forwarded-Host")!
    static let xForwardedPort = Self("X-Forwarded-Port")!
    static let xForwardedPrefix = Self("X-Forwarded-Prefix")!
    static let xForwardedFor = Self("X-Forwarded-For")!
}
