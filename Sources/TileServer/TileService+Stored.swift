import NIOCore
import TileCore

/// The stored tiles of TIFF pyramids, answered by the connection handler on the event loop: nothing
/// here waits for the disk (the page cache holds the bytes, or the routes answer).
extension TileService {
    /// What a request for a stored tile names, once looked up: the tile, its ready image, and the
    /// entity tag and `Link` its answer has.
    struct StoredTile {
        let tile: PyramidLayout.Tile
        let image: ImageCatalog.Image
        let version: String
        let tag: EntityTag
        let link: String?

        var pyramid: TiledImage { image.pyramid }
        /// Itself when its level's tiles are JPEG.
        var ifJPEG: StoredTile? {
            pyramid.tileCoding(ofLevel: tile.level) == .jpeg ? self : nil
        }
        var isWhole: Bool { TileService.isWhole(tile, of: image.pyramid) }

        /// The fields of its 200 answer other than the length, as the routes give them.
        func head(_ service: TileService) -> ImageHead {
            ImageHead(
                mediaType: ImageRequest.Format.jpg.mediaType, link: link, entityTag: tag, lastModified: image.lastModified,
                cacheControl: service.imageCacheControl)
        }
    }

    /// The stored tile `address` asks for, of a ready, complete pyramid whose tiles there are JPEG: nil
    /// for anything else. A DeepZoom tile is looked up as the pyramid's tile, nothing resolved.
    func storedTile(_ address: ImageAddress) -> StoredTile? {
        guard let image = catalog.readyImage(address.id), image.pyramid.isComplete, let version = image.version,
            var tag = image.storedEntityTag
        else { return nil }
        let layout = image.pyramid.geometry.layout
        let tile: PyramidLayout.Tile
        switch address.kind {
        case .deepZoom(let deepZoom, _, _):
            guard deepZoom.format == .jpg, let found = layout.tile(deepZoom) else { return nil }
            // Within the sizes the server renders at most, as the routes check every request.
            let size = layout.pixelSize(of: found)
            guard limits.allows(size.width, size.height) else { return nil }
            tile = found
        case .iiif:
            guard let target = try? address.target(), let resolved = try? resolve(target, of: image.pyramid),
                let found = Self.storedTile(resolved, of: image.pyramid)
            else { return nil }
            tile = found
        }
        address.addVariant(to: &tag)
        return StoredTile(tile: tile, image: image, version: version, tag: tag, link: address.link).ifJPEG
    }

    /// The answer to the request for `path` (``storedTile(_:)``) when the page cache holds the
    /// stored tile, with the entity tag and fields the routes give it: a whole tile read without
    /// waiting (``TileCore/TiledImage/readStoredJPEGTileIfCached(_:into:)``), cached under `path` only
    /// when `keepsWhole` (the page cache holds it: the connection handler keeps a tile asked for again,
    /// ``EncodedTileCache/isRepeated(_:)``); an edge tile of 256 pixels or less cropped from the stored
    /// one (``TileCore/TiledImage/exactJPEGEdgeTileIfCached(level:column:row:)``: 0.1 ms of CPU, nothing
    /// waited for) and cached under `path`, as the routes cache it. Nil otherwise (the routes answer).
    func storedImage(_ stored: StoredTile, path: String, keepsWhole: Bool = false) -> EncodedImage? {
        let tile = stored.tile
        let body: ByteBuffer
        if stored.isWhole {
            guard let location = try? stored.pyramid.storedJPEGTileLocation(level: tile.level, column: tile.column, row: tile.row) else {
                return nil
            }
            var buffer = ByteBufferAllocator().buffer(capacity: location.byteCount)
            guard Self.read(location, of: stored.pyramid, into: &buffer) else { return nil }
            body = buffer
        } else {
            guard stored.pyramid.geometry.tileSize <= 256,
                let bytes = try? stored.pyramid.exactJPEGEdgeTileIfCached(level: tile.level, column: tile.column, row: tile.row)
            else { return nil }
            body = ByteBuffer(bytes: bytes)
        }
        metrics.storedTile()
        let encoded = EncodedImage(body: body, head: stored.head(self), id: stored.image.id, version: stored.version)
        if keepsWhole || !stored.isWhole { cache.insert(encoded, for: path) }
        return encoded
    }

    /// A plain `GET`'s whole 200 answer for a whole stored tile the page cache holds: the head
    /// (``storedImage(_:path:keepsWhole:)``'s fields), `dateLine` (the `Date` field and the blank line)
    /// and the tile, in one buffer written once; and the body's byte count. Nil otherwise (an edge tile,
    /// a tile not in the page cache: ``storedImage(_:path:keepsWhole:)`` or the routes).
    func storedResponse(_ stored: StoredTile, dateLine: ByteBuffer) -> (response: ByteBuffer, bodyBytes: Int)? {
        guard stored.isWhole,
            let location = try? stored.pyramid.storedJPEGTileLocation(level: stored.tile.level, column: stored.tile.column, row: stored.tile.row)
        else { return nil }
        var response = ByteBufferAllocator().buffer(capacity: 384 + dateLine.readableBytes + location.byteCount)
        stored.head(self).write(contentLength: location.byteCount, into: &response)
        response.writeImmutableBuffer(dateLine)
        guard Self.read(location, of: stored.pyramid, into: &response) else { return nil }
        metrics.storedTile()
        return (response, location.byteCount)
    }

    /// Appends the complete JPEG of a stored tile to `buffer` when the page cache holds it.
    private static func read(_ location: TiledImage.StoredJPEGTileLocation, of pyramid: TiledImage, into buffer: inout ByteBuffer) -> Bool {
        let length = location.byteCount
        let read = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: length) { space in
            let target = UnsafeMutableRawBufferPointer(rebasing: space[..<length])
            return (try? pyramid.readStoredJPEGTileIfCached(location, into: target)) == true ? length : 0
        }
        return read == length
    }
}
