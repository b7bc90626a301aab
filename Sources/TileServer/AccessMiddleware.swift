import Foundation
import HTTPTypes
import Hummingbird

/// What the request being answered may see, for the routes to read (``AccessMiddleware`` sets it).
enum AccessContext {
    /// The request's viewer (nil: anonymous) and the policy, when the server has one.
    @TaskLocal static var viewer: Viewer?
    /// What the request may have of the image it names; nil when no rule matches it (everything).
    @TaskLocal static var grant: AccessPolicy.Grant?
}

/// Applies an ``AccessPolicy`` to every request: finds the image a path names, the rule that matches
/// it and what the request's session allows; refuses 401 what an anonymous client may not have at all
/// (tiles, a DeepZoom descriptor, the master, the build state of an image without a degraded tier; the
/// master whenever the access is not full), leaves the rest to the routes (which read
/// ``AccessContext``), and makes every answer about a restricted image private.
struct AccessMiddleware<Context: ChannelRequestContext>: RouterMiddleware {
    let policy: AccessPolicy

    /// What a path asks of an image, as far as access goes.
    enum Use {
        /// info.json, the base URI, the manifest, the viewer page: answered to anyone (the routes
        /// shape what the grant allows).
        case description
        /// An image or tile, a DeepZoom descriptor, the build state: nothing without a grant.
        case pixels
        /// The master file: only in full.
        case master
    }

    /// The identifier (percent-encoded, as written) a path names and its use, or nil for no image.
    static func image(ofPath path: Substring) -> (id: Substring, use: Use)? {
        // Split at the bytes, as TileAddress and the connection handler read a path. The router splits
        // characters: where the two differ (a `/` a combining mark follows), its identifier holds a
        // `/` and a byte past ASCII, which no identifier may (refused), and TileAddress names no image.
        let s = path.utf8.split(separator: UInt8(ascii: "/")).map { Substring($0) }
        guard let first = s.first, s.count >= 2 else { return nil }
        switch first {
        case "iiif" where s.count >= 3 && (s[1] == "3" || s[1] == "2"):
            if s.count == 7 { return (s[2], .pixels) }
            if s.count == 3 { return s[2] == "collection" ? nil : (s[2], .description) }
            return s.count == 4 && (s[3] == "info.json" || s[3] == "manifest") ? (s[2], .description) : nil
        case "dzi":
            if s.count == 2, s[1].hasSuffix(".dzi") { return (s[1].dropLast(4), .pixels) }
            if s.count == 4, s[1].hasSuffix("_files") { return (s[1].dropLast(6), .pixels) }
            return nil
        case "download" where s.count == 2: return (s[1], .master)
        case "images" where s.count == 2: return (s[1], .pixels)
        case "view" where s.count == 2: return (s[1], .description)
        default: return nil
        }
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let viewer = policy.viewer(cookies: request.headers, peer: context.channel.remoteAddress?.ipAddress)
        let named = Self.image(ofPath: request.uri.path[...])
        guard let named, let id = TileAddress.percentDecoded(named.id), let rule = policy.rule(for: id) else {
            var response = try await AccessContext.$viewer.withValue(viewer) { try await next(request, context) }
            // A listing shows a logged-in viewer's restricted images: theirs alone.
            if viewer != nil, named == nil { markPrivate(&response, request) }
            return response
        }
        let grant = policy.grant(rule, to: viewer)
        // Uploads and their state, with the upload token: not a viewer's request.
        let isRead = request.method == .get || request.method == .head
        var response: Response
        if isRead, grant == .none && named.use != .description || grant != .full && named.use == .master {
            response = Self.unauthorized(id: id)
        } else {
            response = try await AccessContext.$viewer.withValue(viewer) {
                try await AccessContext.$grant.withValue(grant) { try await next(request, context) }
            }
        }
        markPrivate(&response, request)
        return response
    }

    /// 401 for a restricted image's pixels: what the client needs is a session (IIIF Auth 2.0's
    /// access service, named in the image's info.json).
    static func unauthorized(id: String) -> Response {
        TileRoutes.plain(.unauthorized, "\(id) is restricted: log in through the access service its info.json names")
    }

    /// Makes `response` one no shared cache keeps and a browser revalidates, varying on the session;
    /// a configured viewer origin may read it with credentials.
    func markPrivate(_ response: inout Response, _ request: Request) {
        // An error (401 above all) or what is not to be stored: stored by no one.
        let isKept = response.status.code < 400 && response.headers[.cacheControl] != "no-store"
        response.headers[.cacheControl] = isKept ? "private, no-cache" : "private, no-store"
        var vary = response.headers[values: .vary].flatMap { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }
        vary.append(contentsOf: ["Cookie", "Origin"])
        var seen = Set<String>()
        response.headers[.vary] = vary.filter { seen.insert($0.lowercased()).inserted }.joined(separator: ", ")
        if let origin = request.headers[.origin], policy.viewerOrigins.contains(origin) {
            response.headers[.accessControlAllowOrigin] = origin
            response.headers[.accessControlAllowCredentials] = "true"
        }
    }
}
