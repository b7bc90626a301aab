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
///   `GET /iiif/3/{id}/{region}/{size}/{rotation}/{quality}.{format}`: IIIF Image API 3.0, level 2.
/// - `GET /dzi/{id}.dzi`, `GET /dzi/{id}_files/{level}/{column}_{row}.{jpg|png}`: DeepZoom, no overlap.
///
/// `HEAD` is answered where the router generates it (`Router(options: .autoGenerateHeadEndpoints)`,
/// as ``TileServer/router()`` makes it). Every response carries `Access-Control-Allow-Origin: *`;
/// image requests for rows still being decoded wait for them (up to ``TileService/waitLimit``), then
/// answer 503 with `Retry-After`.
public struct TileRoutes: Sendable {
    public let service: TileService
    public var catalog: ImageCatalog { service.catalog }
    /// The base URL `info.json` ids start with (`https://example.org/iiif/3`); nil: from the request's
    /// `Host` header.
    public var publicBaseURL: String?
    /// Uploads (`PUT /images/{id}`): nil, the default, refuses them.
    public var uploads: UploadPolicy?

    public init(service: TileService, publicBaseURL: String? = nil) {
        self.service = service
        self.publicBaseURL = publicBaseURL
    }

    static let profileLink = "<http://iiif.io/api/image/3/level2.json>;rel=\"profile\""
    static let extras = (features: ["mirroring", "sizeUpscaling", "profileLinkHeader", "canonicalLinkHeader"], qualities: ["gray", "bitonal"])

    /// Adds the routes to `router`.
    public func register<Context: RequestContext>(on router: Router<Context>) {
        router.get("iiif/3/:id") { request, context in
            Self.response(.seeOther, headers: [.location: "\(base(request))/\(context.parameters.get("id") ?? "")/info.json"])
        }
        router.get("iiif/3/:id/info.json") { request, context in
            await info(id: context.parameters.get("id") ?? "", base: base(request), request: request)
        }
        router.get("iiif/3/:id/:region/:size/:rotation/:file") { request, context in
            let p = context.parameters
            let segments = [p.get("region"), p.get("size"), p.get("rotation"), p.get("file")].map { $0 ?? "" }
            let path = segments.joined(separator: "/")
            let target: TileService.Target
            do throws(TileError) { target = .iiif(try ImageRequest(path: path)) } catch { return Self.failure(error, iiif: true) }
            return await image(id: p.get("id") ?? "", target: target, variant: path, request: request)
        }
        router.get("dzi/:name") { request, context in
            await deepZoomDescriptor(name: context.parameters.get("name") ?? "", request: request)
        }
        router.get("dzi/:name/:level/:tile") { request, context in
            let p = context.parameters
            let (files, level, tile) = (p.get("name") ?? "", p.get("level") ?? "", p.get("tile") ?? "")
            guard files.hasSuffix("_files"), let address = DeepZoomTileAddress(level: level, tile: tile) else {
                return Self.plain(.notFound, "no such DeepZoom tile")
            }
            return await image(id: String(files.dropLast(6)), target: .deepZoom(address), variant: "dzi/\(level)/\(tile)", request: request)
        }
    }

    private func base(_ request: Request) -> String {
        if let publicBaseURL { return publicBaseURL.hasSuffix("/") ? String(publicBaseURL.dropLast()) : publicBaseURL }
        return "http://\(request.head.authority ?? "localhost")/iiif/3"
    }

    func info(id encoded: String, base: String, request: Request) async -> Response {
        guard let id = encoded.removingPercentEncoding else { return Self.plain(.badRequest, "not an image identifier") }
        let outline: ImageCatalog.Outline
        do throws(ImageCatalog.LookupError) { outline = try await catalog.outline(id) } catch { return Self.refusal(error, id: id) }
        let info = outline.geometry.layout.iiifInformation(id: "\(base)/\(encoded)", limits: service.limits, extras: Self.extras)
        let headers: HTTPFields = [.contentType: "application/ld+json;profile=\"\(IIIFImageInformation.context)\"", .link: Self.profileLink]
        return Self.document(ByteBuffer(data: info.encoded()), headers: headers, version: outline.version, variant: "info.json|\(base)", request: request)
    }

    func deepZoomDescriptor(name: String, request: Request) async -> Response {
        guard name.hasSuffix(".dzi"), let id = String(name.dropLast(4)).removingPercentEncoding else {
            return Self.plain(.notFound, "not a DeepZoom descriptor: \(name)")
        }
        let outline: ImageCatalog.Outline
        do throws(ImageCatalog.LookupError) { outline = try await catalog.outline(id) } catch { return Self.refusal(error, id: id) }
        let xml = outline.geometry.layout.deepZoomDescriptor().xml
        return Self.document(ByteBuffer(string: xml), headers: [.contentType: "application/xml"], version: outline.version, variant: "dzi", request: request)
    }

    /// A document describing an image (info.json, .dzi): with an entity tag derived from its source's
    /// version and `variant`, and 304 when `If-None-Match` names it.
    static func document(_ body: ByteBuffer, headers: HTTPFields, version: String?, variant: String, request: Request) -> Response {
        var headers = headers
        if let version {
            let tag = TileService.entityTag("\(version)|\(variant)")
            headers[.eTag] = tag
            if let match = request.headers[.ifNoneMatch], matches(match, tag) {
                headers[.contentLength] = String(body.readableBytes)
                return response(.notModified, headers: headers)
            }
        }
        return response(.ok, headers: headers, body: body)
    }

    /// An image request: the image looked up, the request resolved against it, the answer from the
    /// service (304 when `If-None-Match` names its entity tag).
    func image(id encoded: String, target: TileService.Target, variant: String, request: Request) async -> Response {
        let iiif: Bool
        if case .iiif = target { iiif = true } else { iiif = false }
        let image: ImageCatalog.Image
        if let ready = catalog.readyImage(encoded) {
            image = ready
        } else {
            guard let id = encoded.removingPercentEncoding else { return Self.plain(.badRequest, "not an image identifier") }
            do throws(ImageCatalog.LookupError) { image = try await catalog.image(id) } catch { return Self.refusal(error, id: id) }
        }
        do {
            guard let resolved = try service.resolve(target, of: image.pyramid) else {
                return Self.plain(.notFound, "no tile \(variant) of \(image.id)")
            }
            let encoded = try await service.encoded(resolved, path: request.uri.path, variant: variant, of: image)
            var headers = HTTPFields()
            for (name, value) in Self.imageFields(mediaType: encoded.mediaType, entityTag: encoded.entityTag, iiif: iiif) {
                headers[HTTPField.Name(name)!] = value
            }
            if let tag = encoded.entityTag, let match = request.headers[.ifNoneMatch], Self.matches(match, tag) {
                headers[.contentLength] = String(encoded.body.readableBytes)  // the 200's length (RFC 9110, 8.6)
                return Self.response(.notModified, headers: headers)
            }
            return Self.response(.ok, headers: headers, body: encoded.body)
        } catch {
            return Self.failure(error, iiif: iiif)
        }
    }

    /// The header fields of an image answer, in the order both the routes and the cached-tile handler
    /// send them.
    static func imageFields(mediaType: String, entityTag: String?, iiif: Bool) -> [(String, String)] {
        var fields = [("Content-Type", mediaType)]
        if iiif { fields.append(("Link", profileLink)) }
        if let tag = entityTag {
            fields.append(("ETag", tag))
            fields.append(("Cache-Control", "public, max-age=86400"))
        } else {
            fields.append(("Cache-Control", "no-store"))  // a pyramid still being built
        }
        fields.append(("Access-Control-Allow-Origin", "*"))
        fields.append(("X-Content-Type-Options", "nosniff"))
        return fields
    }

    /// Whether an `If-None-Match` value names `tag` (or is `*`).
    static func matches(_ ifNoneMatch: String, _ tag: String) -> Bool {
        ifNoneMatch.split(separator: ",").contains {
            let candidate = $0.trimmingCharacters(in: .whitespaces)
            return candidate == tag || candidate == "*" || candidate == "W/\(tag)"
        }
    }

    /// The response to a failed lookup: 400, 404, 503 (not ready yet, or too many builds waiting) or
    /// 500 (the build failed).
    static func refusal(_ error: ImageCatalog.LookupError, id: String) -> Response {
        switch error {
        case .invalidIdentifier: return plain(.badRequest, "not an image identifier")
        case .notFound: return plain(.notFound, "no image named \(id)")
        case .busy: return failure(TileError(.notReady, "too many images are waiting to be built; try again shortly"))
        case .failed(let failure) where failure.code == .cancelled:
            return Self.failure(TileError(.notReady, "the build of \(id) was stopped: \(failure.message)"))
        case .failed(let failure) where failure.code == .notReady: return Self.failure(failure)
        case .failed(let failure): return plain(.internalServerError, "the image could not be built: \(failure.message)")
        }
    }

    static func failure(_ error: TileError, iiif: Bool = false) -> Response {
        var response: Response
        switch error.code {
        case .invalidArgument, .tooLarge: response = plain(.badRequest, error.message)
        case .unsupported: response = plain(.notImplemented, error.message)
        case .notReady:
            response = plain(.serviceUnavailable, error.message)
            response.headers[.retryAfter] = "2"
        default: response = plain(.internalServerError, error.message)
        }
        if iiif { response.headers[.link] = profileLink }
        return response
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

extension HTTPField.Name {
    static let link = Self("Link")!
}
