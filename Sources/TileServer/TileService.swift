import Foundation
import NIOCore
import NIOPosix
public import TileCore
import TileActors

/// Reads, renders and encodes the images of a catalog for the server's answers: the one component
/// that does, with one cache of encoded images.
///
/// An image of a complete pyramid is cached under a key made of its source's version (its
/// fingerprint) and the request as written; its entity tag is derived from that key, so it changes
/// exactly when the pixels can, and stays the same across restarts while the source does. An image of
/// a pyramid still being built waits (a continuation, never a poll) until the rows it needs are
/// written, up to ``waitLimit``, and is never cached. Reads, renders and encodes run on the thread
/// pool, never on an event loop or Swift's cooperative pool.
public final class TileService: Sendable {
    public let catalog: ImageCatalog
    public let cache: EncodedTileCache
    /// Limits on rendered sizes (`ImageRequest.Limits`), also announced in `info.json`.
    public let limits: ImageRequest.Limits
    /// The quality of each format answers are encoded in (JPEG, WebP, AVIF).
    public let encoding: OutputEncoding
    /// How long an image request waits for rows still being decoded before it fails as `notReady`.
    public let waitLimit: Duration
    /// How long caches may keep the answers.
    public let cachePolicy: CachePolicy
    /// What the server counts (through swift-metrics; made with the service).
    public let metrics = ServerMetrics()
    /// Which renders run on the thread pool, and when (``RenderLimits``).
    let renders: RenderAdmission
    /// Each event loop's index of the cached answers it gave (``AnswerMemo``), a quarter of the cache's
    /// capacity at most for each.
    let memos: AnswerMemos
    /// `Cache-Control` of images of complete pyramids, made once.
    let imageCacheControl: String

    /// What is asked of an image.
    public enum Target: Sendable, Hashable {
        /// An IIIF image request (`{region}/{size}/{rotation}/{quality}.{format}`).
        case iiif(ImageRequest)
        /// A DeepZoom tile.
        case deepZoom(DeepZoomTileAddress)
    }

    /// - Parameters:
    ///   - catalog: the images served.
    ///   - cache: encoded images kept (default 64 MiB).
    ///   - limits: limits on rendered sizes (default `ImageRequest.Limits.default`).
    ///   - encoding: each format's quality (default: `OutputEncoding()`'s, chosen by measurement).
    ///   - waitLimit: how long a request waits for rows still being decoded (default 20 s).
    ///   - cachePolicy: how long caches may keep the answers (default ``CachePolicy/init(imageMaxAge:documentMaxAge:)``'s).
    ///   - renderLimits: renders running and waiting at most; nil (the default): ``RenderLimits/init(threads:waiting:perClient:pixelsPerClient:)``
    ///     for a pool of one thread a core, as NIO's shared pool has.
    public init(
        catalog: ImageCatalog, cache: EncodedTileCache = EncodedTileCache(), limits: ImageRequest.Limits = .default,
        encoding: OutputEncoding = OutputEncoding(), waitLimit: Duration = .seconds(20), cachePolicy: CachePolicy = CachePolicy(),
        renderLimits: RenderLimits? = nil
    ) {
        renders = RenderAdmission(limits: renderLimits ?? RenderLimits(threads: System.coreCount))
        self.cachePolicy = cachePolicy
        imageCacheControl = cachePolicy.imageCacheControl
        self.catalog = catalog
        self.cache = cache
        memos = AnswerMemos(byteLimit: cache.capacity / 4)
        self.limits = limits
        self.encoding = encoding
        self.waitLimit = waitLimit
    }

    var threadPool: NIOThreadPool { catalog.threadPool }

    /// The stored tile `resolved` asks for as it is, when the pyramid keeps it in the format asked
    /// for (a TIFF pyramid's JPEG or WebP tiles): a whole tile is sent as it is stored, a JPEG edge tile
    /// cropped from the stored one without decoding (``TileCore/TiledImage/exactJPEGTile(level:column:row:)``);
    /// a WebP edge tile, whose stored picture holds padding, is rendered, and so is every WebP tile of
    /// an image with a colour profile (stored WebP tiles carry none; rendered answers do).
    static func storedTile(_ resolved: ImageRequest.Resolved, of pyramid: TiledImage) -> PyramidLayout.Tile? {
        let layout = pyramid.geometry.layout
        guard resolved.format == .jpg || resolved.format == .webp, let tile = layout.tile(exactly: resolved),
            tile.level < pyramid.levelCount
        else { return nil }
        switch (resolved.format, pyramid.tileCoding(ofLevel: tile.level)) {
        case (.jpg, .jpeg): return tile
        case (.webp, .webp): return isWhole(tile, of: pyramid) && pyramid.colorProfile == nil ? tile : nil
        default: return nil
        }
    }

    /// Whether `tile` is a whole stored tile (not an edge tile, whose stored JPEG holds padding).
    static func isWhole(_ tile: PyramidLayout.Tile, of pyramid: TiledImage) -> Bool {
        let layout = pyramid.geometry.layout
        return layout.pixelSize(of: tile) == (layout.tileSize, layout.tileSize)
    }

    /// The cached answer to the request for `path` (without a query), without waiting or blocking (the
    /// event loop's path); nil when it is not cached, its image's source changed, or was not checked
    /// lately. `remembered` is the caller's own (a connection's): its last look at the ready images
    /// (``ImageCatalog/isReady(_:version:remembered:)``).
    func cachedImage(path: String, remembered: inout ImageCatalog.ReadyLookup?) -> EncodedImage? {
        guard let cached = cache.image(for: path), catalog.isReady(cached.id, version: cached.version, remembered: &remembered) else { return nil }
        metrics.cacheHit()
        return cached
    }

    /// The request of `target` resolved against `image`, or nil for a DeepZoom tile the pyramid does not
    /// have.
    /// - Throws: the request's errors (``TileCore/TileError/Code/invalidArgument``, `.unsupported`, `.tooLarge`).
    public func resolve(_ target: Target, of image: TiledImage) throws(TileError) -> ImageRequest.Resolved? {
        try resolve(target, layout: image.geometry.layout)
    }

    /// The request of `target` resolved against a pyramid laid out as `layout` (``resolve(_:of:)``), within
    /// `narrower` limits than the service's when given (a restricted image's degraded tier).
    func resolve(_ target: Target, layout: PyramidLayout, limits narrower: ImageRequest.Limits? = nil) throws(TileError)
        -> ImageRequest.Resolved?
    {
        let limits = narrower ?? limits
        switch target {
        case .iiif(let request):
            return try request.resolve(width: layout.width, height: layout.height, limits: limits)
        case .deepZoom(let address):
            guard let tile = layout.tile(address) else { return nil }
            return try layout.iiifRequest(of: tile, format: address.format).resolve(width: layout.width, height: layout.height, limits: limits)
        }
    }

    /// The encoded answer to `resolved` (``resolve(_:of:)``): from the cache (under `path`, the request's
    /// path as written), or read, rendered and encoded on the thread pool (once the rows it needs are
    /// written, for an image still being built). `variant` (the request after the identifier) and the
    /// source's version make the entity tag; `link` is sent as the answer's `Link` (an IIIF profile).
    /// - Throws: ``TileCore/TileError/Code/notReady`` when the rows are not written within
    ///   ``waitLimit``; what renders and encodes throw.
    public func encoded(_ resolved: ImageRequest.Resolved, path: String, variant: String, link: String? = nil, of image: ImageCatalog.Image)
        async throws(TileError) -> EncodedImage
    {
        try await encoded(resolved, path: path, variant: variant, link: link, of: image, for: nil)
    }

    /// ``encoded(_:path:variant:link:of:)`` for `client` (nil: one unnamed client): a render waits its
    /// turn in ``renders``, is dropped when the client leaves before it, and stops when it leaves during it.
    func encoded(
        _ resolved: ImageRequest.Resolved, path: String, variant: String, link: String? = nil, of image: ImageCatalog.Image,
        for client: RenderAdmission.Client?
    ) async throws(TileError) -> EncodedImage {
        let pyramid = image.pyramid
        let version = pyramid.isComplete ? image.version : nil
        if let version, let cached = cache.image(for: path), cached.version == version {
            metrics.cacheHit()
            return cached
        }
        let stored = Self.storedTile(resolved, of: pyramid)
        if !pyramid.isComplete, !pyramid.canRender(resolved) {
            // The wait ends when the client hangs up, too.
            let (catalog, deadline) = (self.catalog, ContinuousClock.now + waitLimit)
            let written = await renders.untilHangUp(of: client) { await catalog.waitUntil(image.id, deadline: deadline) { $0.canRender(resolved) } }
            guard written || pyramid.canRender(resolved) else {
                if renders.hasGone(client) { throw TileError(.cancelled, "the client closed the connection while its rows were being built") }
                throw TileError(.notReady, "the rows this request needs are not written yet")
            }
        }
        // The stored tile's bytes when the pyramid has them in the format asked for (a JPEG edge tile
        // cropped), else a render.
        var storedBytes: Data?
        if let stored {
            let webp = resolved.format == .webp
            storedBytes = try await renders.read(for: client) { () throws(TileError) in
                try await threadPool.blocking { () throws(TileError) in
                    webp
                        ? try pyramid.storedWebPTile(level: stored.level, column: stored.column, row: stored.row)
                        : try pyramid.exactJPEGTile(level: stored.level, column: stored.column, row: stored.row)
                }
            }
        }
        let sentStored = storedBytes != nil
        let data = if let storedBytes { storedBytes } else { try await render(resolved, of: pyramid, for: client) }
        if sentStored { metrics.storedTile() } else { metrics.cacheMiss() }
        let body = ByteBuffer(bytes: data)
        guard let version else {
            let head = ImageHead(mediaType: resolved.format.mediaType, link: link, cacheControl: imageCacheControl)
            return EncodedImage(body: body, head: head, cacheable: false)
        }
        let whole = sentStored && stored.map { Self.isWhole($0, of: pyramid) } == true
        return kept(body, resolved, stored: sentStored, caches: !whole, path: path, variant: variant, link: link, of: image, version: version)
    }

    /// The head of the 200 answer ``encoded(_:path:variant:link:of:for:)`` would give, when it is known
    /// without rendering: a render of a complete pyramid that is not in the cache. Its entity tag,
    /// `Last-Modified` and `Cache-Control` do not depend on the bytes; only the length does, which a
    /// `HEAD` answer may leave out (RFC 9110, 9.3.2). Nil otherwise (a stored tile, read at once; a
    /// cached answer; a pyramid still being built).
    func renderHead(_ resolved: ImageRequest.Resolved, path: String, variant: String, link: String?, of image: ImageCatalog.Image)
        -> ImageHead?
    {
        let pyramid = image.pyramid
        guard pyramid.isComplete, let version = image.version, Self.storedTile(resolved, of: pyramid) == nil,
            cache.image(for: path)?.version != version
        else { return nil }
        var tag = entityTag(version: version, stored: false, format: resolved.format, of: image)
        tag.combine(variant.utf8)
        return ImageHead(
            mediaType: resolved.format.mediaType, link: link, entityTag: tag, lastModified: image.lastModified, cacheControl: imageCacheControl)
    }

    /// The memory a render holds for each pixel it writes, in RGBA pixels (``RenderLimits/runningFootprint``):
    /// what its encode was measured to hold (`tiler serve`'s peak RSS for a 4096x4096 `full/max`: JPEG
    /// 4 bytes a pixel, WebP 7.5, AVIF 20.5, libaom's frames mostly), and one more for a turned copy.
    /// The rows it reads are resampled as they come (a band at a time).
    static func footprint(of format: ImageRequest.Format) -> Int {
        switch format {
        case .avif: 6
        case .webp: 3
        default: 2
        }
    }

    /// `resolved` rendered and encoded on the thread pool once ``renders`` admits it.
    private func render(_ resolved: ImageRequest.Resolved, of pyramid: TiledImage, for client: RenderAdmission.Client?) async throws(TileError)
        -> Data
    {
        let source = try pyramid.sourceRect(for: resolved)
        let (read, written) = ((source.x1 - source.x0) * (source.y1 - source.y0), resolved.scaledWidth * resolved.scaledHeight)
        let footprint = written * Self.footprint(of: resolved.format)
        let (quality, lossless, effort, renders) = (encoding.quality(of: resolved.format), encoding.webpLossless, encoding.effort, self.renders)
        return try await renders.run(for: client, pixels: read + written, footprint: footprint) { () throws(TileError) in
            try await threadPool.blocking { () throws(TileError) in
                try pyramid.renderEncoded(resolved, quality: quality, lossless: lossless, effort: effort, isCancelled: { renders.hasGone(client) })
            }
        }
    }

    /// A complete pyramid's answer, made with its entity tag and kept in the cache under `path` when
    /// `caches` (not a whole stored tile: those are read again, from the page cache, which already holds
    /// their bytes).
    private func kept(
        _ body: ByteBuffer, _ resolved: ImageRequest.Resolved, stored: Bool, caches: Bool, path: String, variant: String, link: String?,
        of image: ImageCatalog.Image, version: String
    ) -> EncodedImage {
        var tag = entityTag(version: version, stored: stored, format: resolved.format, of: image)
        tag.combine(variant.utf8)
        let head = ImageHead(
            mediaType: resolved.format.mediaType, link: link, entityTag: tag, lastModified: image.lastModified, cacheControl: imageCacheControl)
        let encoded = EncodedImage(body: body, head: head, id: image.id, version: version)
        if caches { cache.insert(encoded, for: path) }
        return encoded
    }

    /// The entity tag of an answer of `image`, made up to the request's variant (which the caller adds):
    /// the source's version, then how the answer was made (``OutputEncoding/label(of:)`` of `format`).
    /// Stored tiles keep the store's own quality.
    func entityTag(version: String, stored: Bool, format: ImageRequest.Format, of image: ImageCatalog.Image) -> EntityTag {
        if stored, let made = image.storedEntityTag, image.version == version { return made }
        return EntityTag(version: version, made: stored ? "stored" : encoding.label(of: format), profile: image.pyramid.colorProfile != nil)
    }
}
