public import Hummingbird
import HTTPTypes
import Foundation
import Logging
import NIOCore
public import TileCore

/// The HTTP routes of a tile server, to mount on any Hummingbird router:
///
/// - `GET /iiif/3/{id}` (303 to its `info.json`), `GET /iiif/3/{id}/info.json`,
///   `GET /iiif/3/{id}/{region}/{size}/{rotation}/{quality}.{format}`: IIIF Image API 3.0, level 2.
/// - `GET /dzi/{id}.dzi`, `GET /dzi/{id}_files/{level}/{column}_{row}.{jpg|png}`: DeepZoom, 256-pixel
///   tiles, no overlap.
///
/// Every response carries `Access-Control-Allow-Origin: *`; image requests for rows still being
/// decoded wait for them (up to ``waitLimit``), then answer 503 with `Retry-After`.
public struct TileRoutes: Sendable {
    public let catalog: ImageCatalog
    /// The base URL `info.json` ids start with (`https://example.org/iiif/3`); nil: from the request's
    /// `Host` header.
    public var publicBaseURL: String?
    /// Limits on rendered sizes (`ImageRequest.Limits`), also announced in `info.json`.
    public var limits = ImageRequest.Limits.default
    /// JPEG quality of rendered images and tiles.
    public var jpegQuality = 80
    /// How long an image request waits for rows still being decoded.
    public var waitLimit: Duration = .seconds(20)
    /// Encoded images of complete pyramids, kept for repeated requests.
    public var cache = EncodedTileCache()
    /// Uploads (`PUT /images/{id}`): nil, the default, refuses them.
    public var uploads: UploadPolicy?

    public init(catalog: ImageCatalog, publicBaseURL: String? = nil) {
        self.catalog = catalog
        self.publicBaseURL = publicBaseURL
    }

    static let iiifContext = "http://iiif.io/api/image/3/context.json"
    static let link = HTTPField.Name("Link")!
    static let profileLink = "<http://iiif.io/api/image/3/level2.json>;rel=\"profile\""

    /// Adds the routes to `router`.
    public func register<Context: RequestContext>(on router: Router<Context>) {
        // Every route answers GET and HEAD (HeadMiddleware drops the body).
        func route(_ path: String, _ handler: @escaping @Sendable (Request, Context) async throws -> Response) {
            router.on(RouterPath(path), method: .get, use: handler)
            router.on(RouterPath(path), method: .head, use: handler)
        }
        route("iiif/3/:id") { request, context in
            let id = context.parameters.get("id") ?? ""
            var headers = HTTPFields()
            headers[.location] = "\(base(request))/\(id)/info.json"
            return Self.response(.seeOther, headers: headers)
        }
        route("iiif/3/:id/info.json") { request, context in
            await info(id: context.parameters.get("id") ?? "", base: base(request))
        }
        route("iiif/3/:id/:region/:size/:rotation/:file") { request, context in
            let p = context.parameters
            return await image(
                id: p.get("id") ?? "", path: [p.get("region"), p.get("size"), p.get("rotation"), p.get("file")].map { $0 ?? "" },
                ifNoneMatch: request.headers[.ifNoneMatch])
        }
        route("dzi/:name") { _, context in
            await deepZoomDescriptor(name: context.parameters.get("name") ?? "")
        }
        route("dzi/:name/:level/:tile") { request, context in
            let p = context.parameters
            return await deepZoomTile(
                files: p.get("name") ?? "", level: p.get("level") ?? "", tile: p.get("tile") ?? "",
                ifNoneMatch: request.headers[.ifNoneMatch])
        }
    }

    private func base(_ request: Request) -> String {
        if let publicBaseURL { return publicBaseURL.hasSuffix("/") ? String(publicBaseURL.dropLast()) : publicBaseURL }
        return "http://\(request.head.authority ?? "localhost")/iiif/3"
    }

    // MARK: - IIIF

    func info(id: String, base: String) async -> Response {
        let g: TileGeometry
        switch await lookupGeometry(id) {
        case .success(let found): g = found
        case .failure(let refusal): return refusal.response
        }
        let scaleFactors = g.levels.indices.map { 1 << $0 }
        let sizes = g.levels.reversed().filter { $0.width <= g.tileSize && $0.height <= g.tileSize }
            .map { ["width": $0.width, "height": $0.height] }
        var info: [String: Any] = [
            "@context": Self.iiifContext, "id": "\(base)/\(id)", "type": "ImageService3",
            "protocol": "http://iiif.io/api/image", "profile": "level2", "width": g.width, "height": g.height,
            "tiles": [["width": g.tileSize, "scaleFactors": scaleFactors]], "sizes": sizes,
            "extraFeatures": ["mirroring", "sizeUpscaling", "profileLinkHeader", "canonicalLinkHeader"],
            "extraQualities": ["gray", "bitonal"],
        ]
        if let maxWidth = limits.maxWidth { info["maxWidth"] = maxWidth }
        if let maxHeight = limits.maxHeight { info["maxHeight"] = maxHeight }
        if let maxArea = limits.maxArea { info["maxArea"] = maxArea }
        let data = (try? JSONSerialization.data(withJSONObject: info, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
        var headers = HTTPFields()
        headers[.contentType] = "application/ld+json;profile=\"\(Self.iiifContext)\""
        headers[Self.link] = Self.profileLink
        return Self.response(.ok, headers: headers, body: data)
    }

    /// An image request. A complete pyramid's images never change: they carry an `ETag` (answered
    /// with 304 on `If-None-Match`) and `Cache-Control`, and are kept in ``cache``, keyed by the store
    /// and the request as written (`variant`: the path after the identifier), so that a repeated request
    /// is answered before it is even parsed.
    func image(id: String, path: [String], ifNoneMatch: String? = nil, variant: String? = nil) async -> Response {
        let image: TiledImage
        switch await lookup(id) {
        case .success(let found): image = found
        case .failure(let refusal):
            // A bad request is a bad request whether or not the image exists.
            if let error = Self.parseError(path) { return Self.failure(error) }
            return refusal.response
        }
        let complete = image.isComplete
        var headers = HTTPFields()
        var key = ""
        if complete {
            key = cacheKey(image: image, id: id, variant: variant ?? path.joined(separator: "/"))
            let format = path.last?.split(separator: ".").last.flatMap { ImageRequest.Format(rawValue: String($0)) }
            headers = cachedImageHeaders(key: key, mediaType: format?.mediaType)
            if let ifNoneMatch, Self.matches(ifNoneMatch, headers[.eTag] ?? "") { return Self.response(.notModified, headers: headers) }
            if let bytes = cache.buffer(for: key) { return Self.response(.ok, headers: headers, bytes: bytes) }
        } else {
            headers[Self.link] = Self.profileLink
            headers[.cacheControl] = "no-store"  // preliminary or still being built
        }
        do {
            let request = try ImageRequest(path: path.joined(separator: "/"))
            let resolved = try request.resolve(width: image.geometry.width, height: image.geometry.height, limits: limits)
            headers[.contentType] = resolved.format.mediaType
            let (quality, deadline) = (jpegQuality, ContinuousClock.now + waitLimit)
            let render = { @Sendable () throws(TileError) -> Data in try image.renderEncoded(resolved, quality: quality, waitingUntil: deadline) }
            // A render of an image still being built may wait for its rows (up to waitLimit): on a thread
            // of its own, never holding one of the render threads meanwhile.
            let data = complete ? try await Self.blocking(render) : try await Self.waiting(render)
            if complete { cache.insert(data, for: key) }
            return Self.response(.ok, headers: headers, body: data)
        } catch {
            headers[.eTag] = nil
            headers[.cacheControl] = nil
            var failure = Self.failure(error)
            failure.headers[Self.link] = Self.profileLink
            return failure
        }
    }

    /// The key of an image of a complete pyramid in ``cache``: the store, the JPEG quality and the
    /// request as written after the identifier.
    func cacheKey(image: TiledImage, id: String, variant: String) -> String {
        "\(image.storePath ?? id)|\(jpegQuality)|\(variant)"
    }

    /// The headers of an image of a complete pyramid (it never changes): its entity tag, a day of
    /// caching, the profile link, CORS.
    func cachedImageHeaders(key: String, mediaType: String?) -> HTTPFields {
        var headers = HTTPFields()
        if let mediaType { headers[.contentType] = mediaType }
        headers[Self.link] = Self.profileLink
        headers[.eTag] = Self.entityTag(key)
        headers[.cacheControl] = "public, max-age=86400"
        headers[.accessControlAllowOrigin] = "*"
        return headers
    }

    /// Whether an `If-None-Match` value names `tag` (or is `*`).
    static func matches(_ ifNoneMatch: String, _ tag: String) -> Bool {
        ifNoneMatch.split(separator: ",").contains { $0.trimmingCharacters(in: .whitespaces) == tag || $0.trimmingCharacters(in: .whitespaces) == "*" }
    }

    /// Why an image request's path does not parse, if it does not.
    static func parseError(_ path: [String]) -> TileError? {
        do { _ = try ImageRequest(path: path.joined(separator: "/")) } catch { return error }
        return nil
    }

    // MARK: - DeepZoom

    func deepZoomDescriptor(name: String) async -> Response {
        guard name.hasSuffix(".dzi") else { return Self.plain(.notFound, "not a DeepZoom descriptor: \(name)") }
        let image: TiledImage
        switch await lookup(String(name.dropLast(4))) {
        case .success(let found): image = found
        case .failure(let refusal): return refusal.response
        }
        let xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <Image xmlns="http://schemas.microsoft.com/deepzoom/2008" Format="jpg" Overlap="0" TileSize="\(image.geometry.tileSize)">
              <Size Height="\(image.geometry.height)" Width="\(image.geometry.width)"/>
            </Image>

            """
        var headers = HTTPFields()
        headers[.contentType] = "application/xml"
        return Self.response(.ok, headers: headers, body: Data(xml.utf8))
    }

    /// DeepZoom level L is the store's level (top - L), where top is DeepZoom's full-size level;
    /// levels below the store's smallest are rendered from it.
    func deepZoomTile(files: String, level: String, tile: String, ifNoneMatch: String? = nil) async -> Response {
        let parts = tile.split(separator: ".")
        guard files.hasSuffix("_files"), parts.count == 2, let format = ImageRequest.Format(rawValue: String(parts[1])),
            format == .jpg || format == .png
        else { return Self.plain(.notFound, "no such DeepZoom tile") }
        let indices = parts[0].split(separator: "_").compactMap { Int($0) }
        guard indices.count == 2, let number = Int(level), number >= 0 else { return Self.plain(.notFound, "no such DeepZoom tile") }
        let found: TiledImage
        switch await lookup(String(files.dropLast(6))) {
        case .success(let image): found = image
        case .failure(let refusal): return refusal.response
        }
        guard let path = Self.deepZoomRequest(found.geometry, level: number, column: indices[0], row: indices[1], format: format) else {
            return Self.plain(.notFound, "no tile \(indices[0])_\(indices[1]) at DeepZoom level \(number)")
        }
        return await image(id: String(files.dropLast(6)), path: path, ifNoneMatch: ifNoneMatch, variant: "dzi/\(level)/\(tile)")
    }

    /// The IIIF request (region, size, rotation, quality.format) of DeepZoom tile (column, row) at
    /// DeepZoom level `level`, or nil when there is no such tile. DeepZoom's level L is the store's
    /// level (top - L), where top is DeepZoom's full-size level; the request engine reads the tile
    /// from that level exactly (its region is on that level's grid), or renders it from the smallest
    /// level for the DeepZoom levels below the store's.
    static func deepZoomRequest(_ g: TileGeometry, level: Int, column c: Int, row r: Int, format: ImageRequest.Format) -> [String]? {
        let top = g.deepZoomTopLevel
        guard level >= 0, level <= top else { return nil }
        let k = top - level, side = g.tileSize
        let (levelWidth, levelHeight) = ((g.width + (1 << k) - 1) >> k, (g.height + (1 << k) - 1) >> k)
        // Compared as tile counts: c * side overflows for a column from a hostile path.
        guard c >= 0, r >= 0, c < (levelWidth + side - 1) / side, r < (levelHeight + side - 1) / side else { return nil }
        let x = c * side << k, y = r * side << k
        let w = min(side << k, g.width - x), h = min(side << k, g.height - y)
        let (sw, sh) = (min(side, levelWidth - c * side), min(side, levelHeight - r * side))
        return ["\(x),\(y),\(w),\(h)", "\(sw),\(sh)", "0", "default.\(format.rawValue)"]
    }

    // MARK: - Shared

    /// A strong entity tag for `key` (64-bit FNV-1a, hex).
    static func entityTag(_ key: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in key.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return "\"\(String(hash, radix: 16))\""
    }

    /// A response that ends a request early.
    struct Refusal: Error {
        var response: Response
    }

    /// The geometry of an identifier (``ImageCatalog/geometry(_:)``: from a JPEG's header at once).
    private func lookupGeometry(_ encoded: String) async -> Result<TileGeometry, Refusal> {
        if let ready = catalog.readyImage(encoded) { return .success(ready.geometry) }
        guard let id = encoded.removingPercentEncoding, ImageCatalog.isValidIdentifier(id) else {
            return .failure(Refusal(response: Self.plain(.badRequest, "not an image identifier")))
        }
        do throws(ImageCatalog.LookupError) {
            return .success(try await catalog.geometry(id))
        } catch {
            return .failure(Self.refusal(error, id: id))
        }
    }

    /// The image of an identifier as it appears in a path (percent-encoded: `%2D` is `-`; an encoded
    /// slash decodes to a `/`, which no identifier has).
    private func lookup(_ encoded: String) async -> Result<TiledImage, Refusal> {
        if let ready = catalog.readyImage(encoded) { return .success(ready) }  // a plain name, seen within a second
        guard let id = encoded.removingPercentEncoding else {
            return .failure(Refusal(response: Self.plain(.badRequest, "not an image identifier")))
        }
        do throws(ImageCatalog.LookupError) {
            return .success(try await catalog.image(id))
        } catch {
            return .failure(Self.refusal(error, id: id))
        }
    }

    /// The response to a failed lookup: 400, 404, 503 (not ready yet, or too many builds waiting) or
    /// 500 (the build failed).
    static func refusal(_ error: ImageCatalog.LookupError, id: String) -> Refusal {
        switch error {
        case .invalidIdentifier: return Refusal(response: plain(.badRequest, "not an image identifier"))
        case .notFound: return Refusal(response: plain(.notFound, "no image named \(id)"))
        case .busy:
            return Refusal(response: failure(TileError(.notReady, "too many images are waiting to be built; try again shortly")))
        case .failed(let failure) where failure.code == .cancelled:
            return Refusal(response: Self.failure(TileError(.notReady, "the build of \(id) was stopped: \(failure.message)")))
        case .failed(let failure) where failure.code == .notReady: return Refusal(response: Self.failure(failure))
        case .failed(let failure):
            return Refusal(response: plain(.internalServerError, "the image could not be built: \(failure.message)"))
        }
    }

    /// Runs blocking work (reads, resampling, encoding) off Swift's cooperative pool, on the render
    /// threads (one per core).
    static func blocking<T: Sendable>(_ work: @escaping @Sendable () throws(TileError) -> T) async throws(TileError) -> T {
        try await RenderThreads.shared.run(work)
    }

    /// Runs blocking work that may wait (for rows still being decoded) on a dispatch thread.
    static func waiting<T: Sendable>(_ work: @escaping @Sendable () throws(TileError) -> T) async throws(TileError) -> T {
        let result: Result<T, TileError> = await withCheckedContinuation { continuation in
            DispatchQueue.global(qos: .userInitiated).async {
                do throws(TileError) { continuation.resume(returning: .success(try work())) } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        return try result.get()
    }

    static func failure(_ error: TileError) -> Response {
        switch error.code {
        case .invalidArgument, .tooLarge: return plain(.badRequest, error.message)
        case .unsupported: return plain(.notImplemented, error.message)
        case .notReady:
            var response = plain(.serviceUnavailable, error.message)
            response.headers[.retryAfter] = "2"
            return response
        default: return plain(.internalServerError, error.message)
        }
    }

    static func plain(_ status: HTTPResponse.Status, _ message: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "text/plain; charset=utf-8"
        return response(status, headers: headers, body: Data((message + "\n").utf8))
    }

    static func response(_ status: HTTPResponse.Status, headers: HTTPFields = [:], body: Data = Data()) -> Response {
        response(status, headers: headers, bytes: ByteBuffer(bytes: body))
    }

    static func response(_ status: HTTPResponse.Status, headers: HTTPFields = [:], bytes: ByteBuffer) -> Response {
        var headers = headers
        headers[.accessControlAllowOrigin] = "*"
        return Response(status: status, headers: headers, body: .init(byteBuffer: bytes))
    }
}
