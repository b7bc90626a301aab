public import Hummingbird
import Foundation
import HTTPTypes
import NIOCore
import NIOFoundationCompat
import TileCore

/// The HTTP routes of a tile server, to mount on any Hummingbird router: thin handlers over a
/// ``TileService``.
///
/// - `GET /iiif/3/{id}` (303 to its `info.json`), `GET /iiif/3/{id}/info.json`,
///   `GET /iiif/3/{id}/{region}/{size}/{rotation}/{quality}.{format}`: IIIF Image API 3.0, level 2;
///   `/iiif/2/...` the same in Image API 2.1.
/// - `GET /iiif/3/{id}/manifest`, `GET /iiif/2/{id}/manifest`: the image's IIIF Presentation
///   manifest (3.0, 2.1), what viewers such as Mirador open; `GET /iiif/3/collection` (and `/iiif/2/`):
///   the folder's images as a collection of their manifests, and of its sub-folders' collections
///   (`GET /iiif/3/{folder}/collection`), paged past ``collectionPageSize``.
/// - `GET /dzi/{id}.dzi`, `GET /dzi/{id}_files/{level}/{column}_{row}.{jpg|png}`: DeepZoom, no overlap.
/// - `GET /download/{id}`: the image's master file, where ``downloads`` allows it.
///
/// `HEAD` of an image has routes of its own: an image that would be rendered is answered with the
/// `GET`'s validators and no length, without rendering; the other `HEAD`s where the router generates
/// them (`Router(options: .autoGenerateHeadEndpoints)`, as ``TileServer/router()`` makes it). Every
/// response carries `Access-Control-Allow-Origin: *`;
/// image requests for rows still being decoded wait for them (up to ``TileService/waitLimit``), then
/// answer 503 with `Retry-After`.
public struct TileRoutes: Sendable {
    public let service: TileService
    public var catalog: ImageCatalog { service.catalog }
    /// The server's public URL (`https://example.org/images`): `info.json` ids start with it and
    /// `/iiif/3/` or `/iiif/2/`; nil: from a trusted proxy's headers or the request's `Host` header.
    public var publicBaseURL: String?
    /// Uploads (`PUT /images/{id}`): nil, the default, refuses them.
    public var uploads: UploadPolicy?
    /// The admin API (`/admin/...`): nil, the default, turns it off.
    public var admin: AdminPolicy?
    /// Restricted images and who may see them (IIIF Authorization Flow 2.0, ``registerAccess(on:)``):
    /// nil, the default, serves every image to everyone. With symlinks followed, a link (a master's or a
    /// folder's on the way) names an image only when the rule that decides its target decides it too.
    public var access: AccessPolicy? { didSet { catalog.follow(rules: access?.rules ?? []) } }
    /// Images a page of the listing (`GET /`) shows at most (default 100): a page costs a look at
    /// each one's file, and a thumbnail request each in the browser.
    public var listingPageSize = 100
    /// Manifests a IIIF collection (`GET /iiif/3/collection`) lists at most (default 1000): a
    /// larger folder's collection lists its pages, each a collection of this many.
    public var collectionPageSize = 1000
    /// The rights of every image, stated in its manifest (``IIIFManifest/rights``); nil: none.
    public var rights: String?
    /// The text every manifest shows as its required statement (``IIIFManifest/requiredStatement``).
    public var requiredStatement: String?
    /// Whether masters may be downloaded (`GET /download/{id}`, and each manifest's `rendering`
    /// links to it); false, the default: 404.
    public var downloads = false
    /// Downloads sent at once at most (default 16); more are answered 503 with `Retry-After`.
    public var downloadLimit = 16
    /// Downloads sent at once to one client address at most (the last `X-Forwarded-For` address
    /// behind a trusted proxy; default 4, as many parts as a download manager fetches at once); more
    /// are answered 503 with `Retry-After`, so that a client that reads slowly cannot hold every slot.
    public var downloadsPerClient = 4
    /// The downloads being sent, shared by copies of the routes.
    let downloadSlots = DownloadSlots()

    public init(service: TileService, publicBaseURL: String? = nil) {
        self.service = service
        self.publicBaseURL = publicBaseURL
    }

    static let extras = (
        features: ["mirroring", "sizeUpscaling", "profileLinkHeader"], qualities: ["gray", "bitonal"],
        formats: ImageRequest.Format.offered.filter { $0 != .jpg && $0 != .png }.map(\.rawValue)
    )
    static let supports2 = ["mirroring", "regionSquare", "profileLinkHeader"]

    /// Adds the routes to `router`.
    public func register<Context: RequestContext>(on router: Router<Context>) {
        // IIIF images and DeepZoom tiles: one handler reads either address.
        let imageRoute: @Sendable (Request, Context) async -> Response = { request, context in
            await image(request, client: client(request, context))
        }
        for version in IIIFVersion.allCases {
            router.get("\(version.path)/:id") { request, context in
                await baseURI(id: context.parameters.get("id") ?? "", version: version, request: request)
            }
            router.get("\(version.path)/:id/info.json") { request, context in
                await info(
                    id: context.parameters.get("id") ?? "", version: version, base: base(request, version), request: request,
                    client: client(request, context)?.address)
            }
            router.get("\(version.path)/collection") { request, _ in
                await collection(version: version, page: request.uri.queryParameters.get("page"), base: base(request, version), request: request)
            }
            router.get("\(version.path)/:id/collection") { request, context in
                await collection(
                    version: version, folder: context.parameters.get("id") ?? "", page: request.uri.queryParameters.get("page"),
                    base: base(request, version), request: request)
            }
            router.get("\(version.path)/:id/manifest") { request, context in
                await manifest(
                    id: context.parameters.get("id") ?? "", version: version, base: base(request, version), request: request,
                    client: client(request, context)?.address)
            }
            // HEAD has its own handler: a render's head is answered without rendering.
            router.get("\(version.path)/:id/:region/:size/:rotation/:file", use: imageRoute)
            router.head("\(version.path)/:id/:region/:size/:rotation/:file") { Self.head(await imageRoute($0, $1)) }
        }
        router.get("download/:id") { request, context in
            await download(id: context.parameters.get("id") ?? "", request: request, client: client(request, context)?.address)
        }
        router.head("download/:id") { request, context in
            await download(id: context.parameters.get("id") ?? "", request: request, client: client(request, context)?.address)
        }
        router.get("dzi/:name") { request, context in
            await deepZoomDescriptor(name: context.parameters.get("name") ?? "", request: request, client: client(request, context)?.address)
        }
        router.get("dzi/:name/:level/:tile", use: imageRoute)
        router.head("dzi/:name/:level/:tile") { Self.head(await imageRoute($0, $1)) }
    }

    /// What answers naming the server's URL vary on: nothing when ``publicBaseURL`` names it, else
    /// the headers a trusted proxy names it with (a cache in front must not give one client's answer,
    /// made for the URL its headers named, to another).
    var originVary: String {
        publicBaseURL != nil ? "Accept" : "Accept, Forwarded, X-Forwarded-Host, X-Forwarded-Proto, X-Forwarded-Port, X-Forwarded-Prefix"
    }

    /// Whom a request's render is admitted for (``RenderAdmission``): its peer's address, or the
    /// client's as a trusted proxy appended it to `X-Forwarded-For` (the request guard removes the
    /// header from other peers), and whether it is still there: its connection open, and its side of
    /// it not closed (a client that hung up has closed only its side as the server sees it).
    func client(_ request: Request, _ context: some RequestContext) -> RenderAdmission.Client? {
        guard let channel = (context as? any ChannelRequestContext)?.channel else { return nil }
        var address = channel.remoteAddress?.ipAddress ?? ""
        if let forwarded = request.headers[values: .xForwardedFor].last?.split(separator: ",").last {
            address = forwarded.trimmingCharacters(in: .whitespaces)
        }
        let (renders, connection) = (service.renders, ObjectIdentifier(channel))
        return RenderAdmission.Client(
            address: address, isConnected: { channel.isActive && !renders.hasHungUp(connection) }, connection: connection)
    }

    /// The base URI of `version`'s image services: the server's public URL (`publicBaseURL`, else from
    /// a trusted proxy's headers or the request's `Host`) and `/iiif/3` or `/iiif/2`.
    func base(_ request: Request, _ version: IIIFVersion) -> String {
        if var configured = publicBaseURL {
            while configured.hasSuffix("/") { configured.removeLast() }
            return configured + "/" + version.path
        }
        return ForwardedOrigin(request.headers, authority: request.head.authority).base + "/" + version.path
    }

    func deepZoomDescriptor(name: String, request: Request, client: String? = nil) async -> Response {
        guard name.hasSuffix(".dzi"), let id = TileAddress.percentDecoded(name.dropLast(4)) else {
            return Self.plain(.notFound, "not a DeepZoom descriptor: \(name)")
        }
        let outline: ImageCatalog.Outline
        do throws(ImageCatalog.LookupError) { outline = try await catalog.outline(id, for: client) } catch { return Self.refusal(error, id: id) }
        let xml = outline.geometry.layout.deepZoomDescriptor().xml
        return document(ByteBuffer(string: xml), headers: [.contentType: "application/xml"], outline: outline, variant: "dzi", request: request)
    }

    /// A document describing an image (info.json, .dzi): with an entity tag derived from its source's
    /// version and `variant`, the source's `Last-Modified`, kept by caches for
    /// ``CachePolicy/documentMaxAge``, and 304 when the request's conditions say the client has it.
    /// An upload still arriving has no version yet: `no-store`.
    func document(_ body: ByteBuffer, headers: HTTPFields, outline: ImageCatalog.Outline, variant: String, request: Request) -> Response {
        var headers = headers
        guard let version = outline.version else {
            headers[.cacheControl] = "no-store"
            return Self.response(.ok, headers: headers, body: body)
        }
        let tag = EntityTag("\(version)|\(variant)").text
        headers[.eTag] = tag
        headers[.lastModified] = outline.lastModified
        headers[.cacheControl] = service.cachePolicy.documentCacheControl
        return Self.conditional(request, headers: headers, body: body)
    }

    /// 200 with `body`, or 304 (with the 200's length: RFC 9110, 8.6) when the request's conditions
    /// say the client has it (by the `ETag` and `Last-Modified` among `headers`).
    static func conditional(_ request: Request, headers: HTTPFields, body: ByteBuffer) -> Response {
        guard isNotModified(request, headers: headers) else { return response(.ok, headers: headers, body: body) }
        var headers = headers
        headers[.contentLength] = String(body.readableBytes)
        return response(.notModified, headers: headers)
    }

    /// ``isNotModified(_:ifModifiedSince:entityTag:lastModified:)`` of `request`'s conditions against the
    /// `ETag` and `Last-Modified` among `headers`.
    static func isNotModified(_ request: Request, headers: HTTPFields) -> Bool {
        isNotModified(
            request.headers[values: .ifNoneMatch], ifModifiedSince: request.headers[.ifModifiedSince], entityTag: headers[.eTag],
            lastModified: headers[.lastModified])
    }

    /// An image request (a DeepZoom tile or an IIIF image, ``TileAddress``): the image looked up, the
    /// request resolved against it, the answer from the service (304 when the request's conditions say
    /// the client has it).
    func image(_ request: Request, client: RenderAdmission.Client? = nil) async -> Response {
        guard let address = TileAddress(path: request.uri.path[...]).image else { return Self.plain(.notFound, "no such image request") }
        let (link, variant) = (address.link, address.variant)
        let target: TileService.Target
        do throws(TileError) { target = try address.target() } catch { return Self.failure(error, link: link) }
        let image: ImageCatalog.Image
        switch await lookUp(address, target: target, request: request, client: client?.address) {
        case .image(let found): image = found
        case .answer(let response): return response
        }
        do {
            // A degraded grant: `max` is the tier's largest, and a request past the tier 401.
            let layout = image.pyramid.geometry.layout
            var tier: AccessPolicy.Tier?
            if case .degraded(let degraded) = AccessContext.grant { tier = degraded }
            let resolution: ImageRequest.Resolved?
            do throws(TileError) {
                resolution = try service.resolve(target, layout: layout, limits: tier.map { Self.narrowed(service.limits, to: $0) })
            } catch  where error.code == .tooLarge && tier != nil && (try? service.resolve(target, layout: layout)) != nil {
                return AccessMiddleware<TileRequestContext>.unauthorized(id: image.id)  // past the tier, not the server's limits
            }
            guard let resolved = resolution else { return Self.plain(.notFound, "no tile \(variant) of \(image.id)") }
            if let tier, !Self.permits(resolved, layout: layout, tier: tier) {
                return AccessMiddleware<TileRequestContext>.unauthorized(id: image.id)
            }
            if request.method == .head,
                let head = service.renderHead(resolved, path: request.uri.path, variant: variant, link: link, of: image)
            {
                return Self.bodilessHead(head.fields, request: request)
            }
            let encoded = try await service.encoded(resolved, path: request.uri.path, variant: variant, link: link, of: image, for: client)
            return Self.conditional(request, headers: encoded.head.fields, body: encoded.body)
        } catch {
            // The build's own failure (its master no image): as a failed lookup answers it; a store's
            // (a damaged file in the cache) is the server's.
            if image.pyramid.hasFailed { return Self.refusal(ImageCatalog.LookupError.failed(error), id: image.id) }
            return Self.failure(error, link: link)
        }
    }

    /// `response` as the answer to a `HEAD`: without its body and with its length (as Hummingbird's
    /// generated `HEAD` routes answer), or as it is when it has no length (``bodilessHead(_:request:)``'s).
    static func head(_ response: Response) -> Response {
        response.headers[.contentLength] == nil ? response : response.createHeadResponse()
    }

    /// A `HEAD` answer with `headers` and no `Content-Length` (the length is known only once the image
    /// is rendered): 200, or 304 when the request's conditions say the client has it.
    static func bodilessHead(_ headers: HTTPFields, request: Request) -> Response {
        let notModified = isNotModified(request, headers: headers)
        // A body of unknown length with no bytes: NIO's encoder frames it as chunked, and the connection's
        // handler does not pass on its end (``TileConnectionHandler``), whose terminator would be a body.
        return Response(
            status: notModified ? .notModified : .ok, headers: headers, body: ResponseBody(contentLength: nil) { try await $0.finish(nil) })
    }

    /// The entity tags (or `*`) of `If-Match` or `If-None-Match` fields: each field's comma-separated
    /// list, spaces trimmed, read lazily (a cached tile's revalidation stops at the first match).
    static func listedTags(_ values: [String]) -> some Sequence<String> {
        values.lazy.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces) }
    }

    /// Whether a `GET` or `HEAD` with these conditions is answered 304 (RFC 9110, 13.2.2): by
    /// `If-None-Match` when the request has one (weak comparison, `*` for any), else by
    /// `If-Modified-Since` (not modified since that date).
    static func isNotModified(_ ifNoneMatch: [String], ifModifiedSince: String?, entityTag: String?, lastModified: String?) -> Bool {
        if !ifNoneMatch.isEmpty {
            guard let entityTag else { return false }
            return listedTags(ifNoneMatch).contains { $0 == entityTag || $0 == "*" || $0 == "W/\(entityTag)" }
        }
        guard let ifModifiedSince, let lastModified else { return false }
        if ifModifiedSince == lastModified { return true }  // what caches send back
        guard let since = HTTPDate.parse(ifModifiedSince), let modified = HTTPDate.parse(lastModified) else { return false }
        // A date past the server's clock is not one the server sent (RFC 9110 13.1.3): ignored.
        guard since.timeIntervalSinceNow <= 1 else { return false }
        return modified <= since
    }

    /// The response to a failed lookup: 400, 403 (the file may not be read), 404, 422 (the master is no
    /// image this server reads), 503 (not ready yet, or too many builds waiting) or 500 (the build failed).
    static func refusal(_ error: ImageCatalog.LookupError, id: String) -> Response {
        switch error {
        case .invalidIdentifier: return notAnIdentifier
        case .notFound: return plain(.notFound, "no image named \(id)")
        case .forbidden: return plain(.forbidden, "the server may not read the file of \(id) (its log says which)")
        case .busy: return failure(TileError(.notReady, "too many images are waiting to be built; try again shortly"))
        case .failed(let failure) where failure.code == .cancelled:
            return Self.failure(TileError(.notReady, "the build of \(id) was stopped: \(failure.message)"))
        case .failed(let failure) where failure.code == .notReady: return Self.failure(failure)
        case .failed(let failure) where ImageCatalog.isDiskFull(failure):
            return plain(insufficientStorage, "the image could not be built: the disk is full")
        case .failed(let failure) where failure.code == .overBudget:
            return plain(insufficientStorage, "the image could not be built: \(failure.message)")
        case .failed(let failure) where isNotAnImage(failure):
            return plain(unprocessable, "\(id) is not an image this server can read: \(failure.message)")
        case .failed(let failure): return plain(.internalServerError, "the image could not be built: \(failure.message)")
        }
    }

    /// 499, nginx's "Client Closed Request": what the access log and the metrics record for work given
    /// up because its client hung up (nobody reads the answer).
    static let clientClosedRequest = HTTPResponse.Status(code: 499, reasonPhrase: "Client Closed Request")

    /// 422 (RFC 9110, 15.5.21): the master's bytes are not an image the server can read (not one of its
    /// formats, corrupt, cut short, too large): the same answer until the master is replaced.
    static let unprocessable = HTTPResponse.Status(code: 422, reasonPhrase: "Unprocessable Content")

    /// Whether a build's `failure` says its master's bytes are not an image it can read (``unprocessable``),
    /// rather than something of the server (its disk, its files).
    static func isNotAnImage(_ failure: TileError) -> Bool {
        [.corrupt, .truncated, .unsupported, .tooLarge, .tooManyScans, .tooManyWarnings].contains(failure.code)
    }

    /// 507 (RFC 4918, 11.5): past the disk budget, or the disk is full.
    static let insufficientStorage = HTTPResponse.Status(code: 507, reasonPhrase: "Insufficient Storage")

    static func failure(_ error: TileError, link: String? = nil) -> Response {
        var response: Response
        switch error.code {
        case .invalidArgument, .tooLarge: response = plain(.badRequest, error.message)
        case .unsupported: response = plain(.notImplemented, error.message)
        case .notReady:
            response = plain(.serviceUnavailable, error.message)
            response.headers[.retryAfter] = "2"
        case .cancelled: response = plain(clientClosedRequest, error.message)
        default: response = plain(.internalServerError, error.message)
        }
        if let link { response.headers[.link] = link }
        return response
    }

    /// The identifier a path segment names (percent-decoded), or nil when it names none
    /// (``ImageCatalog/isValidIdentifier(_:)``): answered ``notAnIdentifier``.
    static func identifier(_ encoded: some StringProtocol) -> String? {
        guard let id = TileAddress.percentDecoded(encoded), ImageCatalog.isValidIdentifier(id) else { return nil }
        return id
    }

    /// The answer to a path segment that names no image (``identifier(_:)``).
    static var notAnIdentifier: Response { plain(.badRequest, "not an image identifier") }

    /// A JSON answer of `value` (keys sorted), never stored by caches: an image's state, the admin listing.
    static func json(_ value: some Encodable) -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let body = (try? encoder.encode(value)) ?? Data()
        return response(.ok, headers: [.contentType: "application/json", .cacheControl: "no-store"], body: ByteBuffer(data: body))
    }

    /// 401 with `message`, asking for a bearer token (uploads, the admin API).
    static func unauthorized(_ message: String) -> Response {
        var response = plain(.unauthorized, message)
        response.headers[.wwwAuthenticate] = "Bearer"
        return response
    }

    /// Whether an `Authorization` value presents `token`: the scheme `Bearer` in any case (RFC 9110,
    /// 11.1), the token compared in constant time.
    static func presents(_ authorization: String?, token: String) -> Bool {
        guard let authorization, authorization.count > 7, authorization.prefix(7).lowercased() == "bearer " else { return false }
        let given = Array(authorization.dropFirst(7).drop { $0 == " " }.utf8), expected = Array(token.utf8)
        var difference = given.count ^ expected.count
        for i in 0..<expected.count { difference |= Int(expected[i] ^ (i < given.count ? given[i] : 0)) }
        return difference == 0
    }

    static func plain(_ status: HTTPResponse.Status, _ message: String) -> Response {
        response(status, headers: [.contentType: "text/plain; charset=utf-8"], body: ByteBuffer(string: message + "\n"))
    }

    static func response(_ status: HTTPResponse.Status, headers: HTTPFields = [:], body: ByteBuffer = ByteBuffer()) -> Response {
        var headers = headers
        headers[.accessControlAllowOrigin] = "*"
        return Response(status: status, headers: headers, body: .init(byteBuffer: body))
    }
}
