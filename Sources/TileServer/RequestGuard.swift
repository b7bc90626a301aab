import Hummingbird
import HTTPTypes

/// What a server accepts of a request before any route sees it: which `Host` names it answers for
/// (against DNS rebinding), which other origins' pages may change anything (uploads), and what CORS
/// allows.
public struct RequestGuard: Sendable, Hashable {
    /// Host names (no port) requests may name in `Host`; nil accepts any (a server reached through
    /// names it cannot know, behind a proxy). Default for a loopback bind: ``loopbackHosts``.
    public var allowedHosts: Set<String>?
    /// Origins (`https://viewer.example`) whose pages may send uploads across origins (CORS allows
    /// them `PUT`); every other origin may only read (`GET`, `HEAD`, `OPTIONS`).
    public var uploadOrigins: Set<String>
    /// Peers whose `Forwarded` and `X-Forwarded-*` headers say where clients reach the server (the
    /// URLs in info.json); from any other peer those headers are removed before a route sees them.
    /// Default none.
    public var trustedProxies: [AddressRange]

    public static let loopbackHosts: Set<String> = ["localhost", "127.0.0.1", "::1"]

    public init(allowedHosts: Set<String>? = nil, uploadOrigins: Set<String> = [], trustedProxies: [AddressRange] = []) {
        self.allowedHosts = allowedHosts.map { Set($0.map { $0.lowercased() }) }
        self.uploadOrigins = uploadOrigins
        self.trustedProxies = trustedProxies
    }

    /// The guard for a server bound to `host`: loopback names only on a loopback address, any name
    /// elsewhere.
    public static func defaults(bind host: String) -> RequestGuard {
        RequestGuard(allowedHosts: loopbackHosts.contains(host) || host.hasPrefix("127.") ? loopbackHosts : nil)
    }

    /// Whether `authority` (a `Host` value, `name[:port]`) is one this server answers for: a host and
    /// a port of digits (``hostName(ofAuthority:)``), the host among ``allowedHosts`` when they are set.
    func allows(authority: String?) -> Bool {
        // No Host, or an empty one (RFC 9112 3.2: a target without an authority): no name to check.
        guard let authority, !authority.isEmpty else { return allowedHosts == nil }
        guard let name = Self.hostName(ofAuthority: authority) else { return false }
        return allowedHosts?.contains(name) ?? true
    }

    /// The host of a `Host` value (RFC 9110 7.2: `uri-host [ ":" port ]`), lowercased, or nil when the
    /// value is anything else: a name of letters, digits, `-`, `.` and `_`, an IPv4 address, or an IPv6
    /// address in brackets, then at most a `:` and a port up to 65535. User information
    /// (`localhost:80@evil.example`), paths, spaces and empty names are refused: the value ends up in
    /// the URLs of answers.
    static func hostName(ofAuthority authority: String) -> String? {
        let bytes = Array(authority.utf8)
        guard !bytes.isEmpty, bytes.count <= 262 else { return nil }
        var end = bytes.count
        if let colon = bytes.lastIndex(of: UInt8(ascii: ":")), bytes.first != UInt8(ascii: "[") || bytes[colon - 1] == UInt8(ascii: "]") {
            let port = bytes[(colon + 1)...]
            guard port.count <= 5, port.allSatisfy({ (48...57).contains($0) }),
                port.isEmpty || Int(String(decoding: port, as: UTF8.self))! <= 65535
            else { return nil }
            end = colon
        }
        let host = bytes[..<end]
        guard !host.isEmpty else { return nil }
        if host.first == UInt8(ascii: "[") {
            guard host.count > 2, host.last == UInt8(ascii: "]") else { return nil }
            let inner = String(decoding: host.dropFirst().dropLast(), as: UTF8.self)
            // An IPv6 address alone: no prefix length (AddressRange takes `::1/0`), no zone.
            guard inner.contains(":"), !inner.contains("/"), !inner.contains("%"), AddressRange(inner) != nil else { return nil }
            return inner.lowercased()
        }
        let allowed = host.allSatisfy { byte in
            (97...122).contains(byte | 0x20) || (48...57).contains(byte) || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
                || byte == UInt8(ascii: "_")
        }
        return allowed ? String(decoding: host, as: UTF8.self).lowercased() : nil
    }

    /// Whether a request that changes something may come from `origin` (nil: no `Origin`, not a
    /// browser's cross-site request): the server's own origin, or one of ``uploadOrigins``.
    func allowsChange(from origin: String?, authority: String?, fetchSite: String?) -> Bool {
        guard let origin else { return fetchSite == nil || fetchSite != "cross-site" }
        if uploadOrigins.contains(origin) { return true }
        guard let authority else { return false }
        return origin == "http://\(authority)" || origin == "https://\(authority)"
    }
}

/// Applies a ``RequestGuard`` to every request: 421 for a `Host` the server does not answer for,
/// 403 for a change (`PUT`, ...) from another origin's page, CORS preflights answered (reads from any
/// origin, uploads from ``RequestGuard/uploadOrigins``), forwarding headers removed unless a trusted
/// proxy sent them, and `X-Content-Type-Options: nosniff` on every response.
struct GuardMiddleware<Context: ChannelRequestContext>: RouterMiddleware {
    let rules: RequestGuard

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var request = request
        if ForwardedOrigin.forwardedNames.contains(where: { request.headers[$0] != nil }) {
            let peer = context.channel.remoteAddress?.ipAddress ?? ""
            if !rules.trustedProxies.contains(where: { $0.contains(peer) }) {
                var head = request.head
                for name in ForwardedOrigin.forwardedNames { head.headerFields[name] = nil }
                request = Request(head: head, body: request.body)
            }
        }
        var response: Response
        do { response = try await answer(request, context: context, next: next) } catch let error as any HTTPResponseError {
            response = try error.response(from: request, context: context)  // a route not found, say
        }
        response.headers[.xContentTypeOptions] = "nosniff"
        // An error is about this moment (an image not there yet, a build failed, the server busy): no
        // cache in front keeps it (Varnish would answer a new image's 404 for two minutes).
        if response.status.code >= 400, response.headers[.cacheControl] == nil { response.headers[.cacheControl] = "no-store" }
        return response
    }

    private func answer(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        // RFC 9112 3.2: a request with more than one Host, or an invalid one, is answered 400. The
        // conversion from HTTP/1.1 takes the first Host as the authority: one left among the fields is a second.
        if request.headers[.host] != nil {
            return TileRoutes.plain(.badRequest, "a request names one Host")
        }
        if let authority = request.head.authority, !authority.isEmpty, RequestGuard.hostName(ofAuthority: authority) == nil {
            return TileRoutes.plain(.badRequest, "Host is not a host name or address and a port")
        }
        guard rules.allows(authority: request.head.authority) else {
            // Says how to add a name: a proxy that passes the client's Host needs it among the allowed ones.
            return TileRoutes.plain(
                .misdirectedRequest,
                "this server does not answer for \(request.head.authority ?? "no host"): add the name to its allowed hosts (tiler serve --allowed-host NAME, RequestGuard.allowedHosts)"
            )
        }
        let origin = request.headers[.origin]
        if request.method == .options, let asked = request.headers[.accessControlRequestMethod] {
            return preflight(origin: origin, method: asked)
        }
        guard
            [.get, .head, .options].contains(request.method)
                || rules.allowsChange(from: origin, authority: request.head.authority, fetchSite: request.headers[.secFetchSite])
        else { return TileRoutes.plain(.forbidden, "a change from another site's page (\(origin ?? "no origin")) is refused") }
        var response = try await next(request, context)
        if let origin, rules.uploadOrigins.contains(origin) {
            response.headers[.accessControlAllowOrigin] = origin
            response.headers[.vary] = ((response.headers[.vary].map { [$0] } ?? []) + ["Origin"]).joined(separator: ", ")
        }
        return response
    }

    /// A CORS preflight: reads from any origin; `PUT` only from the upload origins.
    private func preflight(origin: String?, method: String) -> Response {
        var headers: HTTPFields = [.accessControlMaxAge: "86400", .vary: "Origin"]
        if ["GET", "HEAD"].contains(method) {
            headers[.accessControlAllowOrigin] = "*"
            headers[.accessControlAllowMethods] = "GET, HEAD, OPTIONS"
            // Authorization: a viewer's access token, for the probe service (IIIF Auth 2.0).
            headers[.accessControlAllowHeaders] = "Accept, Authorization, If-None-Match, If-Modified-Since, Range"
        } else if method == "PUT", let origin, rules.uploadOrigins.contains(origin) {
            headers[.accessControlAllowOrigin] = origin
            headers[.accessControlAllowMethods] = "GET, HEAD, OPTIONS, PUT"
            headers[.accessControlAllowHeaders] = "Authorization, Content-Type"
        } else {
            return Response(status: .forbidden, headers: headers)
        }
        return Response(status: .noContent, headers: headers)
    }
}

extension HTTPField.Name {
    static let secFetchSite = Self("Sec-Fetch-Site")!
    /// `Host` among the fields (swift-http-types marks its own unavailable: the authority replaces it).
    static let host = Self("Host")!
}
