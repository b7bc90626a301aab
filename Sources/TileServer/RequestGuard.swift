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

    /// Whether `authority` (a `Host` value, `name[:port]`) is one this server answers for.
    func allows(authority: String?) -> Bool {
        guard let allowedHosts else { return true }
        guard var name = authority?.lowercased(), !name.isEmpty else { return false }
        if name.hasPrefix("[") {  // [::1]:8080
            name = String(name.dropFirst().prefix { $0 != "]" })
        } else if let colon = name.lastIndex(of: ":") {
            name = String(name[..<colon])
        }
        return allowedHosts.contains(name)
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
        return response
    }

    private func answer(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard rules.allows(authority: request.head.authority) else {
            return TileRoutes.plain(.misdirectedRequest, "this server does not answer for \(request.head.authority ?? "no host")")
        }
        let origin = request.headers[.origin]
        if request.method == .options, let asked = request.headers[.accessControlRequestMethod] {
            return preflight(origin: origin, method: asked)
        }
        guard [.get, .head, .options].contains(request.method)
            || rules.allowsChange(from: origin, authority: request.head.authority, fetchSite: request.headers[.secFetchSite])
        else { return TileRoutes.plain(.forbidden, "a change from another site's page (\(origin ?? "no origin")) is refused") }
        var response = try await next(request, context)
        if let origin, rules.uploadOrigins.contains(origin) {
            response.headers[.accessControlAllowOrigin] = origin
            response.headers[.vary] = "Origin"
        }
        return response
    }

    /// A CORS preflight: reads from any origin; `PUT` only from the upload origins.
    private func preflight(origin: String?, method: String) -> Response {
        var headers: HTTPFields = [.accessControlMaxAge: "86400", .vary: "Origin"]
        if ["GET", "HEAD"].contains(method) {
            headers[.accessControlAllowOrigin] = "*"
            headers[.accessControlAllowMethods] = "GET, HEAD, OPTIONS"
            headers[.accessControlAllowHeaders] = "Accept, If-None-Match, If-Modified-Since, Range"
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
    static let xContentTypeOptions = Self("X-Content-Type-Options")!
    static let secFetchSite = Self("Sec-Fetch-Site")!
}
