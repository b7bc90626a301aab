import HTTPTypes
import Hummingbird
import NIOCore
import TileActors
import TileCore

// Images whose store is being copied from the shelf: their stored tiles answered from where it lies.
extension TileRoutes {
    /// What an image request's lookup gave: the image, or the whole answer (a refusal, or a stored tile
    /// of a store still being copied from the shelf, read from there).
    enum ImageLookup {
        case image(ImageCatalog.Image)
        case answer(Response)
    }

    /// The image `address` names (a ready one without waiting for the catalog); while its store is
    /// being copied from the shelf, a whole stored JPEG tile is answered from the shelf at once, and
    /// any other request waits for the copy.
    func lookUp(_ address: ImageAddress, target: TileService.Target, request: Request, client: String?) async -> ImageLookup {
        if let ready = catalog.readyImage(address.id) { return .image(ready) }
        guard let id = Self.identifier(address.id) else { return .answer(Self.notAnIdentifier) }
        do throws(ImageCatalog.LookupError) {
            let found: ImageCatalog.Found =
                if let shelved = catalog.shelvedImage(id) { .shelved(shelved) } else { try await catalog.imageOrShelved(id, for: client) }
            switch found {
            case .image(let image): return .image(image)
            case .shelved(let shelved):
                // A degraded grant's request is checked against the tier once the image is open: not
                // answered from the shelf.
                if case .degraded = AccessContext.grant { return .image(try await catalog.image(id, for: client)) }
                if let encoded = await service.shelvedTile(target, of: shelved, path: request.uri.path, variant: address.variant, link: address.link)
                {
                    return .answer(Self.conditional(request, headers: encoded.head.fields, body: encoded.body))
                }
                return .image(try await catalog.image(id, for: client))
            }
        } catch {
            return .answer(Self.refusal(error, id: id))
        }
    }
}

extension TileService {
    /// The answer to `target` of an image being copied from the shelf, when it is a whole stored JPEG
    /// tile: its bytes read from the shelf (one ranged read, at most ``ImageCatalog/shelfLookLimit`` or the bucket timeout),
    /// with the entity tag, dates and fields the same request gets once the copy is done; kept in the
    /// cache under `path` while the copy runs (a tile asked for again is not read from the shelf again).
    /// Nil for anything else, or when the read fails: the request waits for the copy.
    func shelvedTile(_ target: Target, of shelved: ImageCatalog.ShelvedImage, path: String, variant: String, link: String?) async
        -> EncodedImage?
    {
        let pyramid = shelved.pyramid
        let layout = pyramid.geometry.layout
        guard let resolved = try? resolve(target, layout: layout), resolved.format == .jpg, let tile = layout.tile(exactly: resolved),
            tile.level < pyramid.geometry.levels.count, pyramid.isJPEG(level: tile.level),
            layout.pixelSize(of: tile) == (layout.tileSize, layout.tileSize)
        else { return nil }
        if let cached = cache.image(for: path), cached.version == shelved.cacheVersion { return cached }
        let bytes: [UInt8]
        do {
            let read = try await ImageCatalog.within(shelved.readLimit, "a tile's read from the shelf") {
                try await pyramid.storedJPEGTile(level: tile.level, column: tile.column, row: tile.row)
            }
            guard let read else { return nil }
            bytes = read
        } catch {
            ServerMetrics.recordShelf("tile", outcome: "failed")
            return nil
        }
        ServerMetrics.recordShelf("tile", outcome: "read")
        metrics.storedTile()
        var tag = shelved.storedEntityTag
        tag.combine(variant.utf8)
        let head = ImageHead(
            mediaType: resolved.format.mediaType, link: link, entityTag: tag, lastModified: shelved.lastModified, cacheControl: imageCacheControl)
        let encoded = EncodedImage(body: ByteBuffer(bytes: bytes), head: head, id: shelved.id, version: shelved.cacheVersion)
        cache.insert(encoded, for: path)
        return encoded
    }
}
