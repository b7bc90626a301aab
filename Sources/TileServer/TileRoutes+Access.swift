import Foundation
import HTTPTypes
public import Hummingbird
import NIOCore
import NIOFoundationCompat
import NIOPosix
import TileCore

// IIIF Authorization Flow 2.0: the four services, and what restricted images' documents say of them.
extension TileRoutes {
    static let authContext = "http://iiif.io/api/auth/2/context.json"

    /// The services of ``access`` (nothing without one):
    /// - `GET /auth/login` (the access service, profile `active`): the login form; `POST /auth/login`
    ///   (`username`, `password`, form-encoded, with the form's CSRF value): sets the session cookie and
    ///   answers a page that closes its window; 401 with the form again for a wrong name or password,
    ///   429 after ``AccessState/failuresAllowed`` failures a minute from one client.
    /// - `GET /auth/token?messageId=...&origin=...` (the token service): a page that posts
    ///   `AuthAccessToken2` (or `AuthAccessTokenError2`) to `origin` alone, for a window that framed it.
    /// - `GET /auth/probe/{id}` (the probe service): `AuthProbeResult2`, status 200 or 401 for the bearer
    ///   token presented, with the degraded image as `substitute` for a tiered one.
    /// - `GET /auth/logout` (the logout service): ends the session and clears its cookie.
    public func registerAccess<Context: RequestContext>(on router: Router<Context>) {
        guard let policy = access else { return }
        router.get("auth/login") { request, _ in loginForm(policy, request: request, message: nil, status: .ok) }
        router.post("auth/login") { request, context in
            await login(policy, request: request, client: client(request, context)?.address ?? "")
        }
        router.get("auth/token") { request, _ in
            token(
                policy, request: request, messageId: request.uri.queryParameters.get("messageId"),
                origin: request.uri.queryParameters.get("origin"))
        }
        router.get("auth/probe/:id") { request, context in
            guard let id = Self.identifier(context.parameters.get("id") ?? "") else { return Self.notAnIdentifier }
            return probe(policy, id: id, request: request)
        }
        router.get("auth/logout") { request, _ in logout(policy, request: request) }
    }

    /// Whether listings and collections show `id` to the request's viewer: an image no rule restricts,
    /// or one they may see in full (nothing of the others reaches anyone else).
    func isListed(_ id: String) -> Bool {
        guard let access, let grant = access.grant(of: id, to: AccessContext.viewer) else { return true }
        return grant == .full
    }

    /// Whether listings and collections show `folder` to the request's viewer: not when a rule restricts
    /// what is in it (`archive/*`) from them.
    func isListed(folder: String) -> Bool { folder.isEmpty || isListed(folder + "/x") }

    /// The server's own origin, as clients reach it (`https://images.example`).
    func ownOrigin(_ request: Request) -> String? {
        guard let url = URL(string: root(request)), let scheme = url.scheme, let host = url.host else { return nil }
        let name = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        return Self.origin("\(scheme)://\(name)" + (url.port.map { ":\($0)" } ?? ""))
    }

    /// The server's root URL (with its final `/`), as the image services' bases name it.
    func root(_ request: Request) -> String {
        String(base(request, .v3).dropLast(IIIFVersion.v3.path.count))
    }

    /// The `service` of a restricted image's info.json: its probe service, with the access service
    /// and that one's token and logout services.
    func authServices(_ policy: AccessPolicy, encodedID: String, request: Request) -> [[String: Any]] {
        let root = root(request)
        let language = { (text: String) -> [String: [String]] in ["en": [text]] }
        let profile = policy.users.isEmpty && policy.userHeader != nil ? "external" : "active"
        var access: [String: Any] = [
            "id": "\(root)auth/login", "type": "AuthAccessService2", "profile": profile, "label": language(policy.label),
            "service": [
                ["id": "\(root)auth/token", "type": "AuthAccessTokenService2"],
                ["id": "\(root)auth/logout", "type": "AuthLogoutService2", "label": language("Log out")]
            ]
        ]
        if profile == "active" {
            access["heading"] = language(policy.heading)
            access["note"] = language(policy.note)
            access["confirmLabel"] = language("Log in")
        }
        return [["id": "\(root)auth/probe/\(encodedID)", "type": "AuthProbeService2", "service": [access]]]
    }

    /// `body` (an info.json) with `services` added as its `service`.
    static func adding(services: [[String: Any]], to body: Data) -> Data {
        guard var object = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] else { return body }
        object["service"] = services
        return (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? body
    }

    /// `limits` narrowed to a degraded tier's (no request's answer is larger than the tier's whole image).
    static func narrowed(_ limits: ImageRequest.Limits, to tier: AccessPolicy.Tier) -> ImageRequest.Limits {
        func least(_ a: Int?, _ b: Int?) -> Int? { [a, b].compactMap { $0 }.min() }
        return ImageRequest.Limits(
            maxWidth: least(limits.maxWidth, tier.maxWidth), maxHeight: least(limits.maxHeight ?? limits.maxWidth, tier.maxHeight ?? tier.maxWidth),
            maxArea: least(limits.maxArea, tier.maxArea))
    }

    /// The sizes and scale factors of `layout` a grant allows: all in full, those whose whole image is
    /// within a degraded tier, none without a grant.
    static func allowed(_ grant: AccessPolicy.Grant, layout: PyramidLayout) -> (size: (IIIFImageInformation.Size) -> Bool, factor: (Int) -> Bool) {
        switch grant {
        case .full: return ({ _ in true }, { _ in true })
        case .none: return ({ _ in false }, { _ in false })
        case .degraded(let tier):
            let limits = tier.limits
            return (
                { limits.allows($0.width, $0.height) },
                { limits.allows((layout.width + $0 - 1) / $0, (layout.height + $0 - 1) / $0) }
            )
        }
    }

    /// Whether a degraded tier allows `request` of an image laid out as `layout`: its scale (the larger of
    /// its two: a stretched request has the detail of its finer axis on both) gives a whole image within
    /// the tier's limits, or it is one of the pyramid's tiles at a level that is (an edge tile's size is
    /// rounded up).
    static func permits(_ request: ImageRequest.Resolved, layout: PyramidLayout, tier: AccessPolicy.Tier) -> Bool {
        let (w, h) = (Double(layout.width), Double(layout.height))
        // The tier's largest scale of the whole image.
        var most = Double.infinity
        if let maxWidth = tier.maxWidth { most = min(most, Double(maxWidth) / w) }
        if let maxHeight = tier.maxHeight ?? tier.maxWidth { most = min(most, Double(maxHeight) / h) }
        if let maxArea = tier.maxArea { most = min(most, (Double(maxArea) / (w * h)).squareRoot()) }
        // One side at most at that scale, the other at most its rounding (a size given by one side has the
        // other rounded): a strip a pixel thin rounds to nothing, a stretched request is past it.
        let (rw, rh) = (Double(request.width), Double(request.height))
        let (sw, sh) = (Double(request.scaledWidth), Double(request.scaledHeight))
        let (widthWithin, heightWithin) = (sw <= rw * most * (1 + 1e-12), sh <= rh * most * (1 + 1e-12))
        let (widthRounded, heightRounded) = (sw <= (rw * most).rounded(), sh <= (rh * most).rounded())
        if widthWithin && heightRounded || heightWithin && widthRounded { return true }
        let tile = layout.tileSize
        var factor = 1
        while factor <= max(layout.width, layout.height) {
            defer { factor *= 2 }
            let span = tile * factor
            guard tier.limits.allows((layout.width + factor - 1) / factor, (layout.height + factor - 1) / factor),
                request.x % span == 0, request.y % span == 0, request.width == min(span, layout.width - request.x),
                request.height == min(span, layout.height - request.y)
            else { continue }
            if request.scaledWidth == (request.width + factor - 1) / factor, request.scaledHeight == (request.height + factor - 1) / factor {
                return true
            }
        }
        return false
    }

    // MARK: - The services

    func loginForm(_ policy: AccessPolicy, request: Request, message: String?, status: HTTPResponse.Status) -> Response {
        let nonce = ViewerPage.nonce()
        let form = AccessPolicy.randomText()
        let note = message.map { "<p class=\"error\" role=\"alert\">\(Self.html($0))</p>" } ?? "<p>\(Self.html(policy.note))</p>"
        let html = """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><title>\(Self.html(policy.heading))</title><link rel="icon" href="data:,">
            <style nonce="\(nonce)">body{font:15px system-ui,sans-serif;margin:2em}label{display:block;margin:.6em 0}.error{color:#b00}</style>
            </head><body><h1>\(Self.html(policy.heading))</h1>\(note)
            <form method="post" action="login">
            <input type="hidden" name="form" value="\(form)">
            <label>User name <input name="username" autocomplete="username" required autofocus></label>
            <label>Password <input name="password" type="password" autocomplete="current-password" required></label>
            <button type="submit">Log in</button>
            </form></body></html>

            """
        var headers = Self.pageHeaders(nonce: nonce, formAction: "'self'")
        // For the login's path as clients reach it (a proxy's prefix too).
        let path = (URL(string: root(request))?.path).map { $0.hasSuffix("/") ? $0 : $0 + "/" } ?? "/"
        headers[.setCookie] = "\(AccessPolicy.formCookieName)=\(form); Path=\(path)auth/; HttpOnly; SameSite=Strict; Max-Age=3600"
        return Self.response(status, headers: headers, body: ByteBuffer(string: html))
    }

    func login(_ policy: AccessPolicy, request: Request, client: String) async -> Response {
        // CSRF: the form's value must be the one its cookie holds (set by this server's form alone,
        // SameSite=Strict), and a browser's Origin, when sent, this server's.
        if let origin = request.headers[.origin], Self.origin(origin) != ownOrigin(request) {
            return Self.plain(.forbidden, "a login from another site's page is refused")
        }
        guard let body = try? await request.body.collect(upTo: 8192) else { return Self.plain(.contentTooLarge, "a login form is small") }
        let fields = Self.formFields(String(buffer: body))
        guard let form = fields["form"], let cookie = AccessPolicy.cookie(AccessPolicy.formCookieName, in: request.headers),
            AccessPolicy.isEqual(Array(form.utf8), Array(cookie.utf8))
        else { return loginForm(policy, request: request, message: "The form expired: try again.", status: .forbidden) }
        // Counted before the password is checked: attempts sent together are counted too.
        if let wait = policy.state.attempt(client) {
            var response = Self.plain(.tooManyRequests, "too many failed logins: try again in \(wait) s")
            response.headers[.retryAfter] = String(wait)
            return response
        }
        // A few checks at once, whoever asks, on the server's pool; a few more wait their turn; past those, 503.
        guard await policy.state.beginCheck() else {
            policy.state.giveBack(client)
            var response = Self.plain(.serviceUnavailable, "too many logins are being checked: try again in a few seconds")
            response.headers[.retryAfter] = "2"
            return response
        }
        let (user, password) = (fields["username"] ?? "", fields["password"] ?? "")
        let valid = (try? await catalog.threadPool.runIfActive { policy.verify(user: user, password: password) }) ?? false
        policy.state.endCheck()
        guard valid else { return loginForm(policy, request: request, message: "Wrong user name or password.", status: .unauthorized) }
        policy.state.giveBack(client)
        let claims = policy.claims(user: user, groups: policy.groups[user] ?? [], lifetime: policy.sessionLifetime)
        let nonce = ViewerPage.nonce()
        let html = """
            <!doctype html><html lang="en"><head><meta charset="utf-8"><title>Logged in</title></head><body>
            <p>Logged in as \(Self.html(user)). You may close this window.</p>
            <script nonce="\(nonce)">window.close()</script></body></html>

            """
        var headers = Self.pageHeaders(nonce: nonce)
        headers[.setCookie] = sessionCookie(policy.sign(claims, as: .session), maxAge: Int(policy.sessionLifetime.components.seconds), request)
        return Self.response(.ok, headers: headers, body: ByteBuffer(string: html))
    }

    /// The session cookie: HttpOnly, for the whole server; `Secure; SameSite=None` over https (a viewer
    /// on another site's page loads the tiles), `SameSite=Lax` over http (where None is refused).
    func sessionCookie(_ value: String, maxAge: Int, _ request: Request) -> String {
        let secure = root(request).hasPrefix("https:")
        return "\(AccessPolicy.cookieName)=\(value); Path=/; HttpOnly; Max-Age=\(maxAge); " + (secure ? "Secure; SameSite=None" : "SameSite=Lax")
    }

    func token(_ policy: AccessPolicy, request: Request, messageId: String?, origin: String?) -> Response {
        var message: [String: Any] = ["@context": Self.authContext, "messageId": messageId ?? ""]
        let target = origin.flatMap(Self.origin)
        if messageId == nil || target == nil {
            message["type"] = "AuthAccessTokenError2"
            message["profile"] = messageId == nil ? "invalidRequest" : "invalidOrigin"
        } else if let target, target != ownOrigin(request), !policy.viewerOrigins.contains(target) {
            // Only this server's pages and the configured viewers' get tokens (a token names its user).
            (message["type"], message["profile"]) = ("AuthAccessTokenError2", "invalidOrigin")
        } else if let viewer = AccessContext.viewer {
            let lifetime = min(policy.tokenLifetime, policy.sessionLifetime)
            let claims = policy.claims(user: viewer.user, groups: viewer.groups, lifetime: lifetime, session: viewer.session, until: viewer.expiry)
            message["type"] = "AuthAccessToken2"
            message["accessToken"] = policy.sign(claims, as: .token)
            message["expiresIn"] = max(0, claims.e - Int(Date().timeIntervalSince1970))
        } else {
            (message["type"], message["profile"]) = ("AuthAccessTokenError2", "missingAspect")
            message["heading"] = ["en": ["Not logged in"]]
        }
        let json = (try? JSONSerialization.data(withJSONObject: message, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
        // Inside a script: no `</script>` can end it early.
        let script = String(decoding: json, as: UTF8.self).replacingOccurrences(of: "<", with: "\\u003c")
        let nonce = ViewerPage.nonce()
        let destination = target.map { "\"\($0)\"" } ?? "null"
        let html = """
            <!doctype html><html><head><meta charset="utf-8"><title>token</title></head><body>
            <script nonce="\(nonce)">if (\(destination) !== null) window.parent.postMessage(\(script), \(destination));</script>
            </body></html>

            """
        var headers = Self.pageHeaders(nonce: nonce, frameAncestors: target ?? "'none'")
        headers[.cacheControl] = "no-store"
        headers[.vary] = "Cookie"
        return Self.response(.ok, headers: headers, body: ByteBuffer(string: html))
    }

    func probe(_ policy: AccessPolicy, id: String, request: Request) -> Response {
        let viewer = policy.viewer(bearer: request.headers[.authorization])
        var result: [String: Any] = ["@context": Self.authContext, "type": "AuthProbeResult2"]
        switch policy.grant(of: id, to: viewer) {
        case nil, .full?: result["status"] = 200
        case let grant?:
            result["status"] = 401
            result["heading"] = ["en": [policy.heading]]
            result["note"] = ["en": [policy.note]]
            if case .degraded(let tier) = grant {
                let encoded = ImageCatalog.urlSegment(id)
                result["substitute"] = [
                    [
                        "id": "\(base(request, .v3))/\(encoded)", "type": "ImageService3", "profile": "level2",
                        "label": ["en": ["at most \(tier.maxWidth ?? tier.maxHeight ?? 0) pixels"]]
                    ]
                ]
            }
        }
        let json = (try? JSONSerialization.data(withJSONObject: result, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
        var headers: HTTPFields = [.contentType: "application/json", .cacheControl: "no-store", .vary: "Authorization"]
        headers[.accessControlAllowOrigin] = "*"
        return Self.response(.ok, headers: headers, body: ByteBuffer(data: json))
    }

    func logout(_ policy: AccessPolicy, request: Request) -> Response {
        if let value = AccessPolicy.cookie(AccessPolicy.cookieName, in: request.headers), let claims = policy.read(value, as: .session) {
            policy.state.revoke(claims.n, until: Double(claims.e))
        }
        let nonce = ViewerPage.nonce()
        let html = """
            <!doctype html><html lang="en"><head><meta charset="utf-8"><title>Logged out</title></head><body>
            <p>Logged out.</p><script nonce="\(nonce)">window.close()</script></body></html>

            """
        var headers = Self.pageHeaders(nonce: nonce)
        headers[.setCookie] = sessionCookie("", maxAge: 0, request)
        return Self.response(.ok, headers: headers, body: ByteBuffer(string: html))
    }

    /// A page's headers: HTML, never stored, only its own script and style (and its `data:` icon); forms post to
    /// `formAction`, frames by `frameAncestors`.
    static func pageHeaders(nonce: String, formAction: String = "'none'", frameAncestors: String = "'none'") -> HTTPFields {
        let policy =
            "default-src 'none'; script-src 'nonce-\(nonce)'; style-src 'nonce-\(nonce)'; img-src data:; base-uri 'none'; "
            + "form-action \(formAction); frame-ancestors \(frameAncestors)"
        return [.contentType: "text/html; charset=utf-8", .contentSecurityPolicy: policy, .cacheControl: "no-store"]
    }

    /// `text` when it is an origin (`scheme://host[:port]`, http or https, nothing after), else nil. The
    /// host is a name of letters, digits, `-` and `.`, or an address (what ``RequestGuard`` takes in
    /// `Host`): the result goes into a script and a header, where nothing else may.
    static func origin(_ text: String) -> String? {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            url.path.isEmpty, url.query == nil, url.fragment == nil, url.user == nil, url.password == nil,
            let authority = text.split(separator: "/", omittingEmptySubsequences: false).dropFirst(2).first,
            text.lowercased() == "\(scheme)://\(authority.lowercased())", RequestGuard.hostName(ofAuthority: String(authority)) != nil
        else { return nil }
        return "\(scheme)://\(authority.lowercased())"
    }

    /// The fields of a form-encoded body (`a=1&b=2`, `+` a space, percent-decoded).
    static func formFields(_ body: String) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in body.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let decode = { (text: Substring) in text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "" }
            if let name = parts.first { fields[decode(name)] = parts.count > 1 ? decode(parts[1]) : "" }
        }
        return fields
    }
}
