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
            tile.level < pyramid.levelCount && pyramid.tileCoding(ofLevel: tile.level) == "JPEG" ? self : nil
        }
        var isWhole: Bool { TileService.isWhole(tile, of: image.pyramid) }

        /// The fields of its 200 answer before `Content-Length`, as the routes give them.
        func fields(_ service: TileService) -> [(String, String)] {
            TileRoutes.imageFields(
                mediaType: ImageRequest.Format.jpg.mediaType, entityTag: tag.text, lastModified: image.lastModified,
                cacheControl: service.imageCacheControl, link: link)
        }
    }

    /// The stored tile an image request asks for (`path`: a DeepZoom tile, `/dzi/{id}_files/{level}/{column}_{row}.jpg`,
    /// or an IIIF image request, `/iiif/3/{id}/{region}/{size}/{rotation}/{quality}.{format}` or
    /// `/iiif/2/...`) of a ready, complete pyramid whose tiles there are JPEG: nil for anything else. A
    /// DeepZoom path is read byte by byte, nothing made of it.
    func storedTile(path: String) -> StoredTile? {
        var path = path
        // A DeepZoom tile: read from the path's bytes (nil: not a DeepZoom tile's path; .some(nil): no stored tile).
        let deepZoom: StoredTile?? = path.withUTF8 { bytes in
            guard let (idBytes, address, variant) = Self.deepZoomTile(bytes) else { return nil }
            let id = String(decoding: idBytes, as: UTF8.self)
            guard address.format == .jpg, let image = catalog.readyImage(id), let version = image.version, var tag = image.storedEntityTag,
                image.pyramid.isComplete, let tile = image.pyramid.geometry.layout.tile(address)
            else { return .some(nil) }
            // Within the sizes the server renders at most, as the routes check every request.
            let size = image.pyramid.geometry.layout.pixelSize(of: tile)
            guard limits.allows(size.width, size.height) else { return .some(nil) }
            tag.combine("dzi/".utf8)
            tag.combine(variant)
            return StoredTile(tile: tile, image: image, version: version, tag: tag, link: nil).ifJPEG
        }
        if let deepZoom { return deepZoom }
        guard let (id, target, variant, link) = Self.imageRequest(path: path), let image = catalog.readyImage(id),
            image.pyramid.isComplete, let version = image.version, var tag = image.storedEntityTag,
            let resolved = try? resolve(target, of: image.pyramid), let tile = Self.storedTile(resolved, of: image.pyramid)
        else { return nil }
        tag.combine(variant.utf8)
        return StoredTile(tile: tile, image: image, version: version, tag: tag, link: link).ifJPEG
    }

    /// The answer to the request for `path` (``storedTile(path:)``) when the page cache holds the
    /// stored tile, with the entity tag and fields the routes give it: a whole tile read without
    /// waiting (``TileCore/TiledImage/readStoredJPEGTileIfCached(_:into:)``), cached under `path` only
    /// when `keepsWhole` (the page cache holds it: the connection handler keeps a tile asked for again,
    /// ``EncodedTileCache/isRepeated(_:)``); an edge tile of 256 pixels or less cropped from the stored
    /// one (``TileCore/TiledImage/exactJPEGEdgeTileIfCached(level:column:row:)``: 0.1 ms of CPU, nothing
    /// waited for) and cached under `path`, as the routes cache it. Nil otherwise (the routes answer).
    func storedImage(path: String, keepsWhole: Bool = false) -> EncodedImage? {
        storedTile(path: path).flatMap { storedImage($0, path: path, keepsWhole: keepsWhole) }
    }

    /// ``storedImage(path:keepsWhole:)`` once the stored tile is looked up.
    func storedImage(_ stored: StoredTile, path: String, keepsWhole: Bool = false) -> EncodedImage? {
        let (tile, image) = (stored.tile, stored.image)
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
        let encoded = EncodedImage(
            body: body, mediaType: ImageRequest.Format.jpg.mediaType, entityTag: stored.tag.text, lastModified: image.lastModified,
            cacheControl: imageCacheControl, id: image.id, version: stored.version, link: stored.link)
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
        if stored.link == nil, let lastModified = stored.image.lastModified {
            storedHead.write(tag: stored.tag, lastModified: lastModified, contentLength: location.byteCount, into: &response)
        } else {
            Self.writeHead(fields: stored.fields(self), contentLength: location.byteCount, into: &response)
        }
        response.writeImmutableBuffer(dateLine)
        guard Self.read(location, of: stored.pyramid, into: &response) else { return nil }
        metrics.storedTile()
        return (response, location.byteCount)
    }

    /// The head of a stored tile's 200 answer without `Link` (a DeepZoom tile's), in pieces around what
    /// changes from answer to answer: made once from the routes' fields (``writeHead(fields:contentLength:into:)``
    /// with marks where the entity tag, `Last-Modified` and the length go), so the two stay the same.
    struct StoredHead: Sendable {
        private let pieces: [ByteBuffer]

        init(cacheControl: String) {
            let fields = TileRoutes.imageFields(
                mediaType: ImageRequest.Format.jpg.mediaType, entityTag: "\u{1}", lastModified: "\u{2}", cacheControl: cacheControl, link: nil)
            var head = ByteBuffer()
            TileService.writeHead(fields: fields, contentLength: 0, into: &head)
            let bytes = Array(head.readableBytesView)
            let length = Array("Content-Length: 0".utf8)
            let tag = bytes.firstIndex(of: 1)!, date = bytes.firstIndex(of: 2)!
            let count = bytes.indices.first { bytes[$0...].starts(with: length) }! + length.count - 1
            precondition(tag < date && date < count, "the fields' order changed")
            pieces = [bytes[..<tag], bytes[(tag + 1)..<date], bytes[(date + 1)..<count], bytes[(count + 1)...]].map { ByteBuffer(bytes: $0) }
        }

        /// Writes the head of an answer with these values.
        func write(tag: EntityTag, lastModified: String, contentLength: Int, into buffer: inout ByteBuffer) {
            buffer.writeImmutableBuffer(pieces[0])
            tag.write(into: &buffer)
            buffer.writeImmutableBuffer(pieces[1])
            buffer.writeString(lastModified)
            buffer.writeImmutableBuffer(pieces[2])
            buffer.writeString(String(contentLength))
            buffer.writeImmutableBuffer(pieces[3])
        }
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

    /// A DeepZoom tile's path, `/dzi/{id}_files/{level}/{column}_{row}.{format}` (exactly four `/`),
    /// as bytes: the identifier, the address, and the variant after `dzi/` that makes the entity tag
    /// (`{level}/{column}_{row}.{format}`). Nil for any other path, and for a path that is not ASCII.
    static func deepZoomTile(_ bytes: UnsafeBufferPointer<UInt8>)
        -> (id: UnsafeBufferPointer<UInt8>, address: DeepZoomTileAddress, variant: UnsafeBufferPointer<UInt8>)?
    {
        let slash = UInt8(ascii: "/")
        // ASCII only: bytes and characters are then the same (the routes compare characters, where a
        // combining mark after `/` or `_` makes another character). Others go to the routes.
        guard bytes.allSatisfy({ $0 < 0x80 }), bytes.starts(with: "/dzi/".utf8), let idEnd = bytes[5...].firstIndex(of: slash),
            let levelEnd = bytes[(idEnd + 1)...].firstIndex(of: slash), !bytes[(levelEnd + 1)...].contains(slash),
            idEnd - 5 > 6, bytes[(idEnd - 6)..<idEnd].elementsEqual("_files".utf8),
            let address = DeepZoomTileAddress(
                levelBytes: UnsafeBufferPointer(rebasing: bytes[(idEnd + 1)..<levelEnd]),
                tileBytes: UnsafeBufferPointer(rebasing: bytes[(levelEnd + 1)...]))
        else { return nil }
        return (UnsafeBufferPointer(rebasing: bytes[5..<(idEnd - 6)]), address, UnsafeBufferPointer(rebasing: bytes[(idEnd + 1)...]))
    }
}
