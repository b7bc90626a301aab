import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Testing
import TestSupport
import TileCore
@testable import TileServer

/// Restricted images (issue 41, IIIF Authorization Flow 2.0) over HTTP on loopback: every rule of the
/// policy, asked for as a viewer would (AsyncHTTPClient, cookies carried by hand).
///
/// The users' hashes are Apache's `htpasswd -nbB` output (bcrypt, `$2y$`, cost 5): an outside tool's,
/// checked here by the server's bcrypt. The sizes a degraded tier allows are worked out below from the
/// tier alone (the pyramid's scale factors are powers of two), not read from the server.
@Suite("Restricted images (IIIF Auth 2.0)", .serialized)
struct AccessTests {
    /// `htpasswd -nbB alice wonderland-7`, `htpasswd -nbB bob builder-42`.
    static let htpasswd = """
        alice:$2y$05$ao1VyiSy1LpsK540fQfVdOyx3CoHGnKcFen6xpF6NGaorYwNHptJK
        bob:$2y$05$4aZOqt0hGespbKy4Uo/mreozh11z.QNbzUlsuKOvHhTGFm5.gdZc2

        """
    static let key = Array("a session key of at least thirty-two bytes".utf8)
    static let viewer = "http://viewer.test:9000"

    /// A folder of four copies of the 1300x900 test photo: `open` (no rule), `restricted-a` (alice in
    /// full, everyone else at most 400 pixels wide), `secret` (group staff, nothing for anyone else),
    /// `restricted-b` (any user who logged in, nothing for anyone else), and `archive/inside` (a folder
    /// any user who logged in may see).
    static func folder() throws -> String {
        let (folder, jpeg) = try TileServerTests.folder()
        for id in ["open", "restricted-a", "secret", "restricted-b"] { try jpeg.write(to: URL(fileURLWithPath: "\(folder)/\(id).jpg")) }
        try FileManager.default.createDirectory(atPath: "\(folder)/archive", withIntermediateDirectories: true)
        try jpeg.write(to: URL(fileURLWithPath: "\(folder)/archive/inside.jpg"))
        return folder
    }

    static func policy(key: [UInt8] = key) -> AccessPolicy {
        var policy = AccessPolicy(
            rules: [
                .init(match: "restricted-a", allow: ["alice"], degraded: .init(maxWidth: 400)),
                .init(match: "secret*", allow: ["group:staff"]),
                .init(match: "restricted*", allow: ["*"]),
                .init(match: "archive/*", allow: ["*"])
            ],
            users: AccessPolicy.users(htpasswd: htpasswd), groups: AccessPolicy.groups(groupFile: "staff: bob\n"), sessionKey: key)
        policy.viewerOrigins = [viewer]
        return policy
    }

    static func server(_ folder: String, cache: String? = nil, policy: AccessPolicy = policy()) throws -> TileServer {
        var server = try TileServer(root: folder, cache: cache ?? "\(folder)/.cache", storeFormat: .raw)
        server.routes.access = policy
        return server
    }

    static func get(_ client: HTTPClient, _ url: String, cookie: String? = nil, headers: [(String, String)] = []) async throws
        -> TileServerTests.Reply
    {
        let headers = headers + (cookie.map { [("Cookie", $0)] } ?? [])
        // An image's answers: once its build is done (`no-store` before); the others (pages, the
        // services, listings) are never stored.
        guard url.contains("/iiif/") || url.contains("/dzi/") else { return try await TileServerTests.get(client, url, headers: headers) }
        return try await TileServerTests.settled(client, url, headers: headers)
    }

    /// Logs in through the access service's form as a browser would: the form (its CSRF cookie and
    /// field), then the post. Returns the answer and the session cookie it set (`tiler_session=...`).
    static func logIn(_ client: HTTPClient, _ base: String, user: String, password: String) async throws -> (TileServerTests.Reply, String?) {
        let form = try await TileServerTests.get(client, "\(base)/auth/login")
        #expect(form.status == 200 && form.headers["content-type"] == "text/html; charset=utf-8")
        let html = String(decoding: form.body, as: UTF8.self)
        let field = try #require(html.firstMatch(of: /name="form" value="([^"]+)"/)?.1)
        let formCookie = try #require(form.headers["set-cookie"]?.split(separator: ";").first)
        #expect(form.headers["set-cookie"]?.contains("SameSite=Strict") == true && form.headers["set-cookie"]?.contains("HttpOnly") == true)
        let body = "form=\(field)&username=\(user)&password=\(password.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)"
        let reply = try await TileServerTests.get(
            client, "\(base)/auth/login", method: .POST,
            headers: [("Cookie", String(formCookie)), ("Content-Type", "application/x-www-form-urlencoded"), ("Origin", base)],
            body: Data(body.utf8))
        let session = reply.headers["set-cookie"].flatMap { $0.split(separator: ";").first.map(String.init) }
        return (reply, session.flatMap { $0.hasPrefix("tiler_session=v1.") ? $0 : nil })
    }

    /// The token service's message, read from its page: the JSON given to `postMessage` and its target origin.
    static func token(_ client: HTTPClient, _ base: String, cookie: String?, origin: String = viewer) async throws -> ([String: Any], String) {
        let reply = try await get(client, "\(base)/auth/token?messageId=m-1&origin=\(origin)", cookie: cookie)
        #expect(reply.status == 200)
        let html = String(decoding: reply.body, as: UTF8.self)
        let call = try #require(html.firstMatch(of: /postMessage\((\{.*\}), "([^"]*)"\)/), "\(html)")
        let message = try #require(try JSONSerialization.jsonObject(with: Data(call.1.utf8)) as? [String: Any])
        #expect(message["@context"] as? String == "http://iiif.io/api/auth/2/context.json" && message["messageId"] as? String == "m-1")
        return (message, String(call.2))
    }

    static func probe(_ client: HTTPClient, _ base: String, _ id: String, token: String?) async throws -> [String: Any] {
        let reply = try await get(client, "\(base)/auth/probe/\(id)", headers: token.map { [("Authorization", "Bearer \($0)")] } ?? [])
        #expect(reply.status == 200)
        let result = try #require(try JSONSerialization.jsonObject(with: reply.body) as? [String: Any])
        #expect(result["type"] as? String == "AuthProbeResult2" && result["@context"] as? String == "http://iiif.io/api/auth/2/context.json")
        return result
    }

    /// The scale factors a tier of `maxWidth` allows over a `width` x `height` image: those whose whole
    /// image (each side divided, rounded up) is within it (maxHeight is maxWidth, IIIF's default).
    static func allowedFactors(width: Int, height: Int, maxWidth: Int) -> [Int] {
        [1, 2, 4, 8, 16, 32].filter { s in (width + s - 1) / s <= maxWidth && (height + s - 1) / s <= maxWidth }
    }

    @Test("anonymous: open images as before; a tiered image's degraded sizes and tiles only; a restricted one's info.json only; nothing listed")
    func anonymous() async throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await TileServerTests.withServer(try Self.server(folder)) { base, client in
            // No rule: public, as without a policy (twice: the second from the connection's fast path).
            for _ in 0..<2 {
                let tile = try await Self.get(client, "\(base)/iiif/3/open/0,0,256,256/256,/0/default.jpg")
                #expect(tile.status == 200 && tile.headers["cache-control"]?.contains("public") == true, "\(tile.headers)")
            }
            // The tiered image's info.json: its limits, the allowed levels, the four services.
            let reply = try await Self.get(client, "\(base)/iiif/3/restricted-a/info.json")
            #expect(reply.status == 200 && reply.headers["cache-control"] == "private, no-cache", "\(reply.headers)")
            #expect(reply.headers["vary"]?.contains("Cookie") == true)
            let info = try #require(try JSONSerialization.jsonObject(with: reply.body) as? [String: Any])
            #expect(info["width"] as? Int == 1300 && info["maxWidth"] as? Int == 400)
            let factors = Self.allowedFactors(width: 1300, height: 900, maxWidth: 400)
            #expect(factors == [4, 8, 16, 32])
            let tiles = try #require((info["tiles"] as? [[String: Any]])?.first)
            #expect((tiles["scaleFactors"] as? [Int]).map { Set($0).isSubset(of: factors) && $0.contains(4) } == true, "\(tiles)")
            for size in info["sizes"] as? [[String: Int]] ?? [] { #expect(size["width"]! <= 400 && size["height"]! <= 400) }
            let probe = try #require((info["service"] as? [[String: Any]])?.first)
            #expect(probe["type"] as? String == "AuthProbeService2" && probe["id"] as? String == "\(base)/auth/probe/restricted-a")
            let access = try #require((probe["service"] as? [[String: Any]])?.first)
            #expect(access["type"] as? String == "AuthAccessService2" && access["profile"] as? String == "active")
            #expect(access["id"] as? String == "\(base)/auth/login" && access["label"] is [String: [String]])
            let inner = try #require(access["service"] as? [[String: Any]])
            #expect(Set(inner.compactMap { $0["type"] as? String }) == ["AuthAccessTokenService2", "AuthLogoutService2"])

            // Every tile of an allowed level (edge tiles too); none of the level below; sizes within the tier.
            for factor in factors.prefix(2) {
                let span = 256 * factor
                for y in stride(from: 0, to: 900, by: span) {
                    for x in stride(from: 0, to: 1300, by: span) {
                        let (w, h) = (min(span, 1300 - x), min(span, 900 - y))
                        let url = "\(base)/iiif/3/restricted-a/\(x),\(y),\(w),\(h)/\((w + factor - 1) / factor),/0/default.jpg"
                        let tile = try await Self.get(client, url)
                        #expect(tile.status == 200 && tile.headers["cache-control"] == "private, no-cache", "\(url): \(tile.status)")
                    }
                }
            }
            // (A stretched request has its finer axis's detail: 40 wide, but the whole height at full size.)
            for path in [
                "0,0,512,512/256,/0/default.jpg", "full/401,/0/default.jpg", "0,0,10,10/10,/0/default.jpg", "full/40,900/0/default.jpg",
                "0,0,1300,100/400,100/0/default.jpg", "0,0,1300,1/400,1/0/default.jpg", "0,0,4,1/1,1/0/default.jpg"
            ] {
                let refused = try await Self.get(client, "\(base)/iiif/3/restricted-a/\(path)")
                #expect(refused.status == 401, "\(path): \(refused.status)")
            }
            // (`max`: the tier's largest.)
            for path in ["full/400,/0/default.jpg", "full/!400,400/0/default.png", "0,0,650,450/200,/0/default.jpg", "full/max/0/default.jpg"] {
                let allowed = try await Self.get(client, "\(base)/iiif/3/restricted-a/\(path)")
                #expect(allowed.status == 200 && allowed.headers["cache-control"] == "private, no-cache", "\(path): \(allowed.status)")
            }
            #expect(try await Self.get(client, "\(base)/iiif/2/restricted-a/0,0,512,512/512,/0/default.jpg").status == 401)
            let largest = try await Self.get(client, "\(base)/iiif/3/restricted-a/full/max/0/default.png")
            // Its size, from the PNG's header (IHDR: width and height, big-endian, at bytes 16 and 20).
            let size =
                largest.body.count > 24
                ? (largest.body[16..<20].reduce(0) { $0 << 8 | Int($1) }, largest.body[20..<24].reduce(0) { $0 << 8 | Int($1) }) : (0, 0)
            #expect(largest.status == 200 && size.0 == 400 && (276...277).contains(size.1), "max: \(size)")
            #expect(try await Self.get(client, "\(base)/iiif/2/restricted-a/full/400,/0/default.jpg").status == 200)

            // Nothing for anyone else: the info.json (its services, no sizes or tiles), and 401 for the rest.
            for id in ["secret", "restricted-b"] {
                let document = try await Self.get(client, "\(base)/iiif/3/\(id)/info.json")
                let described = try #require(try JSONSerialization.jsonObject(with: document.body) as? [String: Any])
                #expect((described["sizes"] as? [Any])?.isEmpty != false && (described["tiles"] as? [Any])?.isEmpty != false, "\(described)")
                #expect((described["service"] as? [[String: Any]])?.first?["type"] as? String == "AuthProbeService2")
                for path in [
                    "iiif/3/\(id)/full/8,/0/default.jpg", "iiif/2/\(id)/full/8,/0/default.jpg", "dzi/\(id).dzi", "dzi/\(id)_files/0/0_0.jpg",
                    "images/\(id)"
                ] {
                    let refused = try await Self.get(client, "\(base)/\(path)")
                    #expect(refused.status == 401 && refused.headers["cache-control"]?.contains("private") == true, "\(path): \(refused.status)")
                }
            }
            // HEAD as GET; and no answer about a restricted image is public, whatever route gives it.
            let head = try await TileServerTests.get(client, "\(base)/iiif/3/restricted-a/0,0,512,512/512,/0/default.jpg", method: .HEAD)
            #expect(head.status == 401)
            for path in [
                "iiif/3/restricted-a", "iiif/3/restricted-a/info.json", "iiif/3/restricted-a/manifest", "iiif/2/restricted-a/info.json",
                "dzi/restricted-a.dzi", "view/restricted-a", "download/restricted-a", "iiif/3/restricted%2Da/full/max/0/default.jpg"
            ] {
                let reply = try await Self.get(client, "\(base)/\(path)")
                let control = reply.headers["cache-control"] ?? ""
                #expect(control.hasPrefix("private") && !control.contains("public"), "\(path): \(reply.status) \(control)")
            }
            // Listings and collections show the open images alone, and no folder a rule covers.
            let listing = String(decoding: try await Self.get(client, "\(base)/").body, as: UTF8.self)
            #expect(listing.contains("view/open") && !listing.contains("secret") && !listing.contains("restricted") && !listing.contains("archive"))
            let collection = String(decoding: try await Self.get(client, "\(base)/iiif/3/collection").body, as: UTF8.self)
            #expect(collection.contains("/open/manifest") && !collection.contains("secret") && !collection.contains("restricted"))
            #expect(!collection.contains("archive"))
            #expect(try await Self.get(client, "\(base)/?folder=archive").status == 404)
            #expect(try await Self.get(client, "\(base)/iiif/3/archive/collection").status == 404)
            // The probe without a token: 401 with the degraded image as substitute; 401 without one; 200 for an open image.
            let tiered = try await Self.probe(client, base, "restricted-a", token: nil)
            #expect(tiered["status"] as? Int == 401)
            #expect((tiered["substitute"] as? [[String: Any]])?.first?["id"] as? String == "\(base)/iiif/3/restricted-a")
            let closed = try await Self.probe(client, base, "secret", token: nil)
            #expect(closed["status"] as? Int == 401 && closed["substitute"] == nil)
            #expect(try await Self.probe(client, base, "open", token: nil)["status"] as? Int == 200)
            // No session: the token service says so (to the asking origin alone).
            let (missing, target) = try await Self.token(client, base, cookie: nil)
            #expect(
                missing["type"] as? String == "AuthAccessTokenError2" && missing["profile"] as? String == "missingAspect" && target == Self.viewer)
        }
    }

    @Test("a login: full tiles, a token to the asking origin alone, probe 200; other users and groups by rule; logout ends it")
    func login() async throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await TileServerTests.withServer(try Self.server(folder)) { base, client in
            let (wrong, none) = try await Self.logIn(client, base, user: "alice", password: "wonderland-8")
            #expect(wrong.status == 401 && none == nil)
            let (ok, session) = try await Self.logIn(client, base, user: "alice", password: "wonderland-7")
            let cookie = try #require(session, "\(ok.status) \(ok.headers)")
            let attributes = try #require(ok.headers["set-cookie"])
            #expect(attributes.contains("HttpOnly") && attributes.contains("Path=/") && attributes.contains("SameSite=Lax"), "\(attributes)")
            #expect(String(decoding: ok.body, as: UTF8.self).contains("window.close()"))

            let full = try await Self.get(client, "\(base)/iiif/3/restricted-a/full/max/0/default.jpg", cookie: cookie)
            #expect(full.status == 200 && full.headers["cache-control"] == "private, no-cache")
            let info = try JSONSerialization.jsonObject(
                with: try await Self.get(client, "\(base)/iiif/3/restricted-a/info.json", cookie: cookie).body)
            #expect((info as? [String: Any])?["maxWidth"] as? Int != 400)
            // A viewer origin reads with credentials; another origin gets no credentials.
            let credentialed = try await Self.get(client, "\(base)/iiif/3/restricted-a/info.json", cookie: cookie, headers: [("Origin", Self.viewer)])
            #expect(
                credentialed.headers["access-control-allow-origin"] == Self.viewer
                    && credentialed.headers["access-control-allow-credentials"] == "true")
            let foreign = try await Self.get(
                client, "\(base)/iiif/3/restricted-a/info.json", cookie: cookie, headers: [("Origin", "http://evil.test")])
            #expect(foreign.headers["access-control-allow-origin"] == "*" && foreign.headers["access-control-allow-credentials"] == nil)

            // The token: posted to the asking origin alone; refused for an origin not configured.
            let (message, target) = try await Self.token(client, base, cookie: cookie)
            #expect(message["type"] as? String == "AuthAccessToken2" && target == Self.viewer && (message["expiresIn"] as? Int ?? 0) > 0)
            let token = try #require(message["accessToken"] as? String)
            let (refused, other) = try await Self.token(client, base, cookie: cookie, origin: "http://evil.test")
            #expect(refused["type"] as? String == "AuthAccessTokenError2" && refused["profile"] as? String == "invalidOrigin")
            #expect(refused["accessToken"] == nil && other == "http://evil.test")
            #expect(try await Self.probe(client, base, "restricted-a", token: token)["status"] as? Int == 200)
            #expect(try await Self.probe(client, base, "restricted-b", token: token)["status"] as? Int == 200)  // "*"
            #expect(try await Self.probe(client, base, "secret", token: token)["status"] as? Int == 401)  // staff only
            // The session is no token, nor the token a session.
            #expect(
                try await Self.probe(client, base, "restricted-a", token: String(cookie.dropFirst("tiler_session=".count)))["status"] as? Int == 401)
            #expect(try await Self.get(client, "\(base)/iiif/3/restricted-b/full/8,/0/default.jpg", cookie: "tiler_session=\(token)").status == 401)
            #expect(try await Self.get(client, "\(base)/iiif/3/secret/full/8,/0/default.jpg", cookie: cookie).status == 401)
            let listing = String(decoding: try await Self.get(client, "\(base)/", cookie: cookie).body, as: UTF8.self)
            #expect(listing.contains("view/restricted-a") && listing.contains("view/restricted-b") && !listing.contains("secret"))
            #expect(listing.contains("?folder=archive"))
            #expect(try await Self.get(client, "\(base)/?folder=archive", cookie: cookie).status == 200)
            // This server's own pages get tokens, listed among the origins or not.
            let (own, ownTarget) = try await Self.token(client, base, cookie: cookie, origin: base)
            #expect(own["type"] as? String == "AuthAccessToken2" && ownTarget == base)

            // bob is in group staff.
            let (_, bob) = try await Self.logIn(client, base, user: "bob", password: "builder-42")
            #expect(try await Self.get(client, "\(base)/iiif/3/secret/full/8,/0/default.jpg", cookie: try #require(bob)).status == 200)
            #expect(try await Self.get(client, "\(base)/iiif/3/restricted-a/0,0,512,512/512,/0/default.jpg", cookie: bob).status == 401)

            // Logout: the cookie cleared; the session and its tokens refused from now on.
            let out = try await Self.get(client, "\(base)/auth/logout", cookie: cookie)
            #expect(
                out.status == 200 && out.headers["set-cookie"]?.hasPrefix("tiler_session=;") == true
                    && out.headers["set-cookie"]?.contains("Max-Age=0") == true)
            #expect(try await Self.get(client, "\(base)/iiif/3/restricted-a/0,0,512,512/512,/0/default.jpg", cookie: cookie).status == 401)
            #expect(try await Self.probe(client, base, "restricted-a", token: token)["status"] as? Int == 401)
        }
    }

    @Test(
        "forged, altered and expired sessions refused; another instance with the same key takes the session and its token, one with another key does not"
    )
    func signatures() async throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let policy = Self.policy()
        var session: String?
        var token: String?
        try await TileServerTests.withServer(try Self.server(folder, policy: policy)) { base, client in
            session = try await Self.logIn(client, base, user: "alice", password: "wonderland-7").1
            token = try await Self.token(client, base, cookie: session).0["accessToken"] as? String
        }
        let cookie = try #require(session)
        let value = cookie.dropFirst("tiler_session=".count)
        let parts = value.split(separator: ".")
        // The claims rewritten (bob for alice) under the same code; the code changed; an expired session
        // signed with the right key; a value signed with another key.
        let claims = String(decoding: try #require(AccessPolicy.bytes(base64URL: parts[1])), as: UTF8.self)
        let bob = AccessPolicy.base64URL(Array(claims.replacingOccurrences(of: "\"alice\"", with: "\"bob\"").utf8))
        // (The code's first character, and its last: base64's spare bits there must not let another text pass.)
        let flipped = parts[2].last == "A" ? "B" : "A"
        let changed = (parts[2].first == "A" ? "B" : "A") + parts[2].dropFirst()
        let expired = policy.sign(AccessClaims(u: "alice", g: [], e: Int(Date().timeIntervalSince1970) - 1, n: "x"), as: .session)
        let other = Self.policy(key: Array("another key of at least thirty-two bytes".utf8))
        let foreign = other.sign(AccessClaims(u: "alice", g: [], e: Int(Date().timeIntervalSince1970) + 600, n: "y"), as: .session)
        // A second instance: its own cache, the same key.
        try await TileServerTests.withServer(try Self.server(folder, cache: "\(folder)/.cache-2")) { (base, client) async throws in
            let url = "\(base)/iiif/3/restricted-b/full/8,/0/default.jpg"
            #expect(try await Self.get(client, url, cookie: cookie).status == 200)
            #expect(try await Self.probe(client, base, "restricted-a", token: token)["status"] as? Int == 200)
            for forged in [
                "v1.\(bob).\(parts[2])", "v1.\(parts[1]).\(parts[2].dropLast())\(flipped)", "v1.\(parts[1]).\(changed)", expired, foreign, "v1..",
                "v2.\(parts[1]).\(parts[2])"
            ] {
                #expect(try await Self.get(client, url, cookie: "tiler_session=\(forged)").status == 401, "\(forged)")
            }
        }
        try await TileServerTests.withServer(try Self.server(folder, cache: "\(folder)/.cache-3", policy: other)) { (base, client) async throws in
            #expect(try await Self.get(client, "\(base)/iiif/3/restricted-b/full/8,/0/default.jpg", cookie: cookie).status == 401)
            #expect(try await Self.probe(client, base, "restricted-a", token: token)["status"] as? Int == 401)
        }
    }

    @Test("the login form: CSRF (its cookie and field, the Origin), failed logins limited per client")
    func loginForm() async throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await TileServerTests.withServer(try Self.server(folder)) { base, client in
            let form = ("Content-Type", "application/x-www-form-urlencoded")
            let body = Data("form=abc&username=alice&password=wonderland-7".utf8)
            // No form cookie, or another value: refused (a page elsewhere cannot log a browser in).
            for cookie in ["", "tiler_login=abd"] {
                let reply = try await TileServerTests.get(
                    client, "\(base)/auth/login", method: .POST, headers: [form, ("Cookie", cookie)], body: body)
                #expect(reply.status == 403 && reply.headers["set-cookie"]?.contains("tiler_session") != true)
            }
            let crossSite = try await TileServerTests.get(
                client, "\(base)/auth/login", method: .POST, headers: [form, ("Cookie", "tiler_login=abc"), ("Origin", "http://evil.test")],
                body: body)
            #expect(crossSite.status == 403)
            // Wrong passwords sent together: counted before any is checked, so no more than five are.
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<8 { group.addTask { try await Self.logIn(client, base, user: "alice", password: "guess").0.status } }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == 401 }.count == AccessState.failuresAllowed && statuses.filter { $0 == 429 }.count == 3, "\(statuses)")
            let (limited, session) = try await Self.logIn(client, base, user: "alice", password: "wonderland-7")
            #expect(limited.status == 429 && session == nil && Int(limited.headers["retry-after"] ?? "") ?? 0 > 0)
            // An unknown user: 401 as a wrong password (from another client address it would not wait).
        }
    }

    @Test("the token service's origin: an origin alone, nothing that could leave its string or header")
    func origins() {
        #expect(TileRoutes.origin("https://Viewer.example:8443") == "https://viewer.example:8443")
        #expect(TileRoutes.origin("http://127.0.0.1:9000") == "http://127.0.0.1:9000")
        #expect(TileRoutes.origin("http://[::1]:9000") == "http://[::1]:9000")
        for refused in [
            "javascript:alert(1)", "http://a;b", "http://a b", "http://x\"y", "http://x'y", "http://a/b", "http://a?b", "http://a#b",
            "http://user@a", "ftp://a", "http://", "http://a:99999", "null", "http://a<b", "http://a\nb"
        ] {
            #expect(TileRoutes.origin(refused) == nil, "\(refused)")
        }
    }

    @Test("a trusted proxy's user header: taken from the trusted peer alone")
    func proxyHeader() async throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var policy = Self.policy()
        policy.userHeader = "X-Remote-User"
        policy.groupsHeader = "X-Remote-Groups"
        policy.trustedProxies = [try #require(AddressRange("127.0.0.1"))]
        let url = "/iiif/3/secret/full/8,/0/default.jpg"
        try await TileServerTests.withServer(try Self.server(folder, policy: policy)) { base, client in
            #expect(try await Self.get(client, base + url, headers: [("X-Remote-User", "carol"), ("X-Remote-Groups", "staff")]).status == 200)
            #expect(try await Self.get(client, base + url, headers: [("X-Remote-User", "bob")]).status == 200)  // the group file's
            #expect(try await Self.get(client, base + url, headers: [("X-Remote-User", "alice")]).status == 401)
            let (message, _) = try await Self.token(client, base, cookie: nil, origin: Self.viewer)
            #expect(message["type"] as? String == "AuthAccessTokenError2")
        }
        policy.trustedProxies = [try #require(AddressRange("10.0.0.0/8"))]
        try await TileServerTests.withServer(try Self.server(folder, policy: policy)) { (base, client) async throws in
            #expect(try await Self.get(client, base + url, headers: [("X-Remote-User", "carol"), ("X-Remote-Groups", "staff")]).status == 401)
        }
    }
}
