import AsyncHTTPClient
import Foundation
import Testing
import TestSupport
import TileCore
@testable import TileServer

/// Behind a proxy: info.json's `id` names the public URL that a trusted proxy's `Forwarded` or
/// `X-Forwarded-*` headers give, and the same headers from any other peer change nothing.
@Suite("Behind proxies", .serialized)
struct ProxyTests {
    @Test("address ranges: IPv4 and IPv6, with and without a prefix length")
    func ranges() {
        let cases: [(String, String, Bool)] = [
            ("127.0.0.1", "127.0.0.1", true), ("127.0.0.1", "127.0.0.2", false), ("10.0.0.0/8", "10.200.3.4", true),
            ("10.0.0.0/8", "11.0.0.1", false), ("192.168.1.128/25", "192.168.1.200", true), ("192.168.1.128/25", "192.168.1.127", false),
            ("::1", "::1", true), ("::1", "127.0.0.1", false), ("fd00::/8", "fd12:3456::1", true), ("fd00::/8", "fe80::1", false),
            ("0.0.0.0/0", "203.0.113.9", true), ("10.0.0.0/8", "not an address", false)
        ]
        for (range, address, inside) in cases {
            #expect(AddressRange(range)?.contains(address) == inside, "\(range) \(address)")
        }
        for bad in ["10.0.0.0/33", "::1/129", "example.org", "10.0.0/8", ""] { #expect(AddressRange(bad) == nil, "\(bad)") }
    }

    static func id(_ client: HTTPClient, _ base: String, _ headers: [(String, String)]) async throws -> String? {
        let reply = try await SourceVersionTests.get(client, "\(base)/iiif/3/photo/info.json", headers: headers)
        return (try JSONSerialization.jsonObject(with: reply.body) as? [String: Any])?["id"] as? String
    }

    @Test("info.json's id and the 303 from a trusted proxy's headers; ignored from others; bad values ignored")
    func forwarded() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let forwardedHeaders: [([(String, String)], String)] = [
            (
                [("X-Forwarded-Proto", "https"), ("X-Forwarded-Host", "images.example.org"), ("X-Forwarded-Prefix", "/tiles/")],
                "https://images.example.org/tiles/iiif/3/photo"
            ),
            (
                [("X-Forwarded-Proto", "https"), ("X-Forwarded-Host", "images.example.org"), ("X-Forwarded-Port", "8443")],
                "https://images.example.org:8443/iiif/3/photo"
            ),
            (
                [("X-Forwarded-Proto", "https"), ("X-Forwarded-Host", "images.example.org:80"), ("X-Forwarded-Port", "443")],
                "https://images.example.org/iiif/3/photo"
            ),
            (
                [("Forwarded", "for=198.51.100.7;proto=https;host=\"museum.example:8443\", for=10.0.0.2"), ("X-Forwarded-Host", "ignored.example")],
                "https://museum.example:8443/iiif/3/photo"
            ),
            ([("X-Forwarded-Proto", "https, http"), ("X-Forwarded-Host", "a.example, b.example")], "https://a.example/iiif/3/photo")
        ]
        var rules = RequestGuard(trustedProxies: [AddressRange("127.0.0.0/8")!])
        var server = try TileServer(root: folder, cache: "\(folder)/.cache", storeFormat: .raw)
        server.requestGuard = rules
        try await TileServerTests.withServer(server) { base, client in
            for (headers, expected) in forwardedHeaders {
                let id = try await Self.id(client, base, headers)
                #expect(id == expected, "\(headers)")
            }
            // Values that are not what they claim: the request's own Host.
            let bad: [[(String, String)]] = [
                [("X-Forwarded-Proto", "javascript")], [("X-Forwarded-Host", "evil.example/path")], [("X-Forwarded-Prefix", "/a/../b")],
                [("X-Forwarded-Prefix", "no-slash")], [("X-Forwarded-Host", "<script>")], [("X-Forwarded-Port", "99999")]
            ]
            for headers in bad {
                let id = try await Self.id(client, base, headers)
                #expect(id == "\(base)/iiif/3/photo", "\(headers)")
            }
            let redirect = try await TileServerTests.get(client, "\(base)/iiif/3/photo", headers: forwardedHeaders[0].0)
            #expect(redirect.status == 303 && redirect.headers["location"] == "https://images.example.org/tiles/iiif/3/photo/info.json")
        }
        // The same headers from a peer that is not trusted.
        rules.trustedProxies = [AddressRange("10.0.0.0/8")!]
        server.requestGuard = rules
        try await TileServerTests.withServer(server) { base, client in
            for (headers, _) in forwardedHeaders {
                let id = try await Self.id(client, base, headers)
                #expect(id == "\(base)/iiif/3/photo", "\(headers)")
            }
        }
    }
}
