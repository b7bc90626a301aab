import Foundation
import NIOCore
import NIOPosix
public import TileCore

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
    /// JPEG quality of every image encoded.
    public let jpegQuality: Int
    /// How long an image request waits for rows still being decoded before it fails as `notReady`.
    public let waitLimit: Duration
    /// How long caches may keep the answers.
    public let cachePolicy: CachePolicy
    /// What the server counts (through swift-metrics; made with the service).
    public let metrics = ServerMetrics()
    /// `Cache-Control` of images of complete pyramids, made once.
    private let imageCacheControl: String

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
    ///   - jpegQuality: 1...100 (default `TileJPEGEncoder.defaultQuality`).
    ///   - waitLimit: how long a request waits for rows still being decoded (default 20 s).
    ///   - cachePolicy: how long caches may keep the answers (default ``CachePolicy/init(imageMaxAge:documentMaxAge:)``'s).
    public init(
        catalog: ImageCatalog, cache: EncodedTileCache = EncodedTileCache(), limits: ImageRequest.Limits = .default,
        jpegQuality: Int = TileJPEGEncoder.defaultQuality, waitLimit: Duration = .seconds(20), cachePolicy: CachePolicy = CachePolicy()
    ) {
        self.cachePolicy = cachePolicy
        imageCacheControl = cachePolicy.imageCacheControl
        self.catalog = catalog
        self.cache = cache
        self.limits = limits
        self.jpegQuality = min(100, max(1, jpegQuality))
        self.waitLimit = waitLimit
    }

    var threadPool: NIOThreadPool { catalog.threadPool }

    /// The stored tile `resolved` asks for as it is, when the pyramid keeps it as a JPEG (a TIFF
    /// pyramid's JPEG tiles): a whole tile is sent as it is stored, an edge tile cropped from the stored
    /// one without decoding (``TileCore/TiledImage/exactJPEGTile(level:column:row:)``).
    static func storedTile(_ resolved: ImageRequest.Resolved, of pyramid: TiledImage) -> PyramidLayout.Tile? {
        let layout = pyramid.geometry.layout
        guard resolved.format == .jpg, let tile = layout.tile(exactly: resolved), tile.level < pyramid.levelCount,
            pyramid.tileCoding(ofLevel: tile.level) == "JPEG"
        else { return nil }
        return tile
    }

    /// Whether `tile` is a whole stored tile (not an edge tile, whose stored JPEG holds padding).
    static func isWhole(_ tile: PyramidLayout.Tile, of pyramid: TiledImage) -> Bool {
        let layout = pyramid.geometry.layout
        return layout.pixelSize(of: tile) == (layout.tileSize, layout.tileSize)
    }

    /// The head of a 200 answer of `image` as NIO's encoder writes the routes' answer, up to the `Date`
    /// field (which ``TileConnectionHandler`` adds with the blank line that ends the head): made once,
    /// kept with the image in the cache; written field by field, nothing formatted on the way.
    static func responseHead(body: ByteBuffer, fields: [(String, String)]) -> ByteBuffer {
        var head = ByteBufferAllocator().buffer(capacity: 384)
        head.writeStaticString("HTTP/1.1 200 OK\r\n")
        for (name, value) in fields {
            head.writeString(name)
            head.writeStaticString(": ")
            head.writeString(value)
            head.writeStaticString("\r\n")
        }
        head.writeStaticString("Content-Length: ")
        head.writeString(String(body.readableBytes))
        head.writeStaticString("\r\nServer: ")
        head.writeString(TileServer.serverName)
        head.writeStaticString("\r\n")
        return head
    }

    /// A strong entity tag for a text naming what an answer shows (64-bit FNV-1a, hex).
    static func entityTag(_ key: String) -> String {
        var tag = EntityTag()
        tag.combine(key.utf8)
        return tag.text
    }

    /// An entity tag made as the text naming what an answer shows is read, part by part, without the
    /// text itself being made (64-bit FNV-1a; ``text`` is `"` and its hex and `"`).
    struct EntityTag {
        private var hash: UInt64 = 0xcbf2_9ce4_8422_2325

        mutating func combine(_ bytes: some Sequence<UInt8>) {
            for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        }

        var text: String { "\"\(String(hash, radix: 16))\"" }
    }

    /// The cached answer to the request for `path` (without a query), without waiting or blocking (the
    /// event loop's path); nil when it is not cached, its image's source changed, or was not checked
    /// lately.
    func cachedImage(path: String) -> EncodedImage? {
        guard let cached = cache.image(for: path), let image = catalog.readyImage(cached.id), image.version == cached.version else { return nil }
        metrics.cacheHit()
        return cached
    }

    /// The request of `target` resolved against `image`, or nil for a DeepZoom tile the pyramid does not
    /// have.
    /// - Throws: the request's errors (``TileCore/TileError/Code/invalidArgument``, `.unsupported`, `.tooLarge`).
    public func resolve(_ target: Target, of image: TiledImage) throws(TileError) -> ImageRequest.Resolved? {
        let layout = image.geometry.layout
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
        let pyramid = image.pyramid
        let version = pyramid.isComplete ? image.version : nil
        if let version, let cached = cache.image(for: path), cached.version == version {
            metrics.cacheHit()
            return cached
        }
        let stored = Self.storedTile(resolved, of: pyramid)
        if !pyramid.isComplete, !pyramid.canRender(resolved) {
            let written = await catalog.waitUntil(image.id, deadline: .now + waitLimit) { $0.canRender(resolved) }
            guard written || pyramid.canRender(resolved) else {
                throw TileError(.notReady, "the rows this request needs are not written yet")
            }
        }
        let quality = jpegQuality
        // The stored tile's bytes when the pyramid has them as JPEG (an edge tile cropped), else a render.
        let (data, sentStored) = try await threadPool.blocking { () throws(TileError) -> (Data, Bool) in
            if let stored, let bytes = try pyramid.exactJPEGTile(level: stored.level, column: stored.column, row: stored.row) {
                return (bytes, true)
            }
            return (try pyramid.renderEncoded(resolved, quality: quality), false)
        }
        if sentStored { metrics.storedTile() } else { metrics.cacheMiss() }
        let body = ByteBuffer(bytes: data)
        guard let version else { return EncodedImage(body: body, mediaType: resolved.format.mediaType, link: link) }
        let whole = sentStored && stored.map { Self.isWhole($0, of: pyramid) } == true
        return kept(body, resolved, stored: sentStored, caches: !whole, path: path, variant: variant, link: link, of: image, version: version)
    }

    /// A complete pyramid's answer, made with its entity tag and kept in the cache under `path` when
    /// `caches` (not a whole stored tile: those are read again, from the page cache, which already holds
    /// their bytes).
    private func kept(
        _ body: ByteBuffer, _ resolved: ImageRequest.Resolved, stored: Bool, caches: Bool, path: String, variant: String, link: String?,
        of image: ImageCatalog.Image, version: String
    ) -> EncodedImage {
        var tag = entityTag(version: version, stored: stored, of: image)
        tag.combine(variant.utf8)
        let encoded = EncodedImage(
            body: body, mediaType: resolved.format.mediaType, entityTag: tag.text, lastModified: image.lastModified,
            cacheControl: imageCacheControl, id: image.id, version: version, link: link)
        if caches { cache.insert(encoded, for: path) }
        return encoded
    }

    /// The entity tag of an answer of `image`, made up to the request's variant (which the caller adds):
    /// the source's version, then how the answer was made. Stored tiles keep the store's own quality;
    /// answers of an image with a colour profile carry it (their bytes differ from those of the releases
    /// before profiles were kept: another tag).
    private func entityTag(version: String, stored: Bool, of image: ImageCatalog.Image) -> EntityTag {
        var tag = EntityTag()
        tag.combine(version.utf8)
        tag.combine(stored ? "|stored".utf8 : "|\(jpegQuality)".utf8)
        if image.pyramid.colorProfile != nil { tag.combine("|icc".utf8) }
        tag.combine("|".utf8)
        return tag
    }

    /// The answer to an image request (`path`: a DeepZoom tile, `/dzi/{id}_files/{level}/{column}_{row}.jpg`,
    /// or an IIIF image request, `/iiif/3/{id}/{region}/{size}/{rotation}/{quality}.{format}` or `/iiif/2/...`)
    /// of a ready, complete pyramid when it asks for a stored JPEG tile whose bytes the page cache
    /// holds, with the entity tag and fields the routes give it. A whole tile is read without waiting
    /// (``TileCore/TiledImage/readStoredJPEGTileIfCached(level:column:row:into:)``) into the answer's
    /// buffer and not cached (the page cache holds it); an edge tile of 256 pixels or less is cropped
    /// from the stored one (``TileCore/TiledImage/exactJPEGEdgeTileIfCached(level:column:row:)``: 0.1 ms
    /// of CPU, nothing waited for) and cached. Nil otherwise (the routes answer). Never blocks: the
    /// event loop's path for tiles not yet cached. A DeepZoom path is read byte by byte, nothing made
    /// of it but the answer.
    func storedImage(path: String) -> EncodedImage? {
        if let (id, address, variant) = Self.deepZoomTile(path: path) {
            guard address.format == .jpg, let image = catalog.readyImage(id), let version = image.version, image.pyramid.isComplete,
                let tile = image.pyramid.geometry.layout.tile(address)
            else { return nil }
            var tag = entityTag(version: version, stored: true, of: image)
            tag.combine("dzi/".utf8)
            tag.combine(variant.utf8)
            return storedImage(tile, of: image, version: version, tag: tag, link: nil, path: path)
        }
        guard let (id, target, variant, link) = Self.imageRequest(path: path), let image = catalog.readyImage(id),
            image.pyramid.isComplete, let version = image.version, let resolved = try? resolve(target, of: image.pyramid),
            let tile = Self.storedTile(resolved, of: image.pyramid)
        else { return nil }
        var tag = entityTag(version: version, stored: true, of: image)
        tag.combine(variant.utf8)
        return storedImage(tile, of: image, version: version, tag: tag, link: link, path: path)
    }

    /// ``storedImage(path:)``'s answer once the tile is known: nil unless it is a JPEG tile of the
    /// pyramid whose bytes the page cache holds. A whole tile is read into the answer's buffer and not
    /// cached; an edge tile of 256 pixels or less is cropped (cached under `path`, as the routes cache it).
    private func storedImage(_ tile: PyramidLayout.Tile, of image: ImageCatalog.Image, version: String, tag: EntityTag, link: String?, path: String)
        -> EncodedImage?
    {
        let pyramid = image.pyramid
        guard tile.level < pyramid.levelCount, pyramid.tileCoding(ofLevel: tile.level) == "JPEG" else { return nil }
        guard Self.isWhole(tile, of: pyramid) else {
            // An edge tile: cropped here when small enough (0.1 ms for 256 pixels), and cached.
            guard pyramid.geometry.tileSize <= 256,
                let bytes = try? pyramid.exactJPEGEdgeTileIfCached(level: tile.level, column: tile.column, row: tile.row)
            else { return nil }
            metrics.storedTile()
            let encoded = EncodedImage(
                body: ByteBuffer(bytes: bytes), mediaType: ImageRequest.Format.jpg.mediaType, entityTag: tag.text,
                lastModified: image.lastModified, cacheControl: imageCacheControl, id: image.id, version: version, link: link)
            cache.insert(encoded, for: path)
            return encoded
        }
        guard let length = try? pyramid.storedJPEGTileLength(level: tile.level, column: tile.column, row: tile.row), length > 0 else { return nil }
        var body = ByteBufferAllocator().buffer(capacity: length)
        let read = body.writeWithUnsafeMutableBytes(minimumWritableBytes: length) { space in
            let target = UnsafeMutableRawBufferPointer(rebasing: space[..<length])
            return (try? pyramid.readStoredJPEGTileIfCached(level: tile.level, column: tile.column, row: tile.row, into: target)) == true ? length : 0
        }
        guard read == length else { return nil }
        metrics.storedTile()
        return EncodedImage(
            body: body, mediaType: ImageRequest.Format.jpg.mediaType, entityTag: tag.text, lastModified: image.lastModified,
            cacheControl: imageCacheControl, id: image.id, version: version, link: link)
    }

    /// A DeepZoom tile's path, `/dzi/{id}_files/{level}/{column}_{row}.{format}` (exactly four `/`),
    /// read byte by byte: the identifier, the address, and the variant after `dzi/` that makes the
    /// entity tag (`{level}/{column}_{row}.{format}`). Nil for any other path.
    static func deepZoomTile(path: String) -> (id: Substring, address: DeepZoomTileAddress, variant: Substring)? {
        let bytes = path.utf8
        let slash = UInt8(ascii: "/")
        guard bytes.starts(with: "/dzi/".utf8) else { return nil }
        let idStart = bytes.index(bytes.startIndex, offsetBy: 5)
        guard let idEnd = bytes[idStart...].firstIndex(of: slash) else { return nil }
        let levelStart = bytes.index(after: idEnd)
        guard let levelEnd = bytes[levelStart...].firstIndex(of: slash) else { return nil }
        let tileStart = bytes.index(after: levelEnd)
        guard !bytes[tileStart...].contains(slash), bytes[idStart..<idEnd].reversed().starts(with: "selif_".utf8),
            let address = DeepZoomTileAddress(level: path[levelStart..<levelEnd], tile: path[tileStart...])
        else { return nil }
        let id = path[idStart..<idEnd].dropLast(6)
        return (id, address, path[levelStart...])
    }

    /// An image request's path parsed as the routes parse it: the identifier as written, the target,
    /// the variant that makes the entity tag, and the IIIF profile `Link`. Nil for any other path.
    static func imageRequest(path: String) -> (id: Substring, target: Target, variant: String, link: String?)? {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        if parts.count == 5, parts[0].isEmpty, parts[1] == "dzi", parts[2].hasSuffix("_files"),
            let address = DeepZoomTileAddress(level: parts[3], tile: parts[4])
        {
            return (parts[2].dropLast(6), .deepZoom(address), "dzi/\(parts[3])/\(parts[4])", nil)
        }
        if parts.count == 8, parts[0].isEmpty, parts[1] == "iiif",
            let version = TileRoutes.IIIFVersion.allCases.first(where: { $0.path.hasSuffix("/\(parts[2])") })
        {
            let request = parts[4...].joined(separator: "/")
            guard let parsed = try? version.request(request) else { return nil }
            return (parts[3], .iiif(parsed), version == .v3 ? request : "iiif2/\(request)", version.profileLink)
        }
        return nil
    }
}
