internal import CJpegShim
public import Foundation

/// A JPEG encoder for tiles (or any small RGBA image), its libjpeg compressor set up once and reused
/// from image to image: 4:2:0, no EXIF, no ICC profile. Encoding a 256x256 tile costs about a third of
/// a millisecond here; creating a compressor for each would add to that.
///
/// Not thread-safe: one thread uses an encoder at a time (``TiledImage/renderEncoded(_:quality:iccProfile:waitingUntil:)``
/// keeps a pool of them).
public final class TileJPEGEncoder {
    /// The JPEG quality, 1...100.
    public let quality: Int
    private let handle: OpaquePointer
    /// Tile bytes read for this encoder (``TiledImage/encodedTile(_:quality:)``), kept for the next tile.
    private var scratch = UnsafeMutableRawBufferPointer(start: nil, count: 0)

    /// - Parameter quality: 1...100 (default 80).
    /// - Throws: ``TileError/Code/invalidArgument`` for a quality out of range; ``TileError/Code/io``
    ///   when libjpeg cannot set up (out of memory).
    public init(quality: Int = 80) throws(TileError) {
        guard (1...100).contains(quality) else { throw TileError(.invalidArgument, "JPEG quality \(quality) is not within 1...100") }
        var handle: OpaquePointer?
        let status = cjs_tile_encoder_create(Int32(quality), &handle)
        guard status == CJS_OK, let handle else { throw TileError(.io, "libjpeg could not create a compressor (status \(status.rawValue))") }
        self.quality = quality
        self.handle = handle
    }

    deinit {
        cjs_tile_encoder_destroy(handle)
        scratch.deallocate()
    }

    /// `body` given this encoder's own buffer of at least `byteCount` bytes (made or grown on demand).
    func withScratch<R>(byteCount: Int, _ body: (UnsafeMutableRawBufferPointer) throws(TileError) -> R) throws(TileError) -> R {
        if scratch.count < byteCount {
            scratch.deallocate()
            scratch = .allocate(byteCount: byteCount, alignment: 64)
        }
        return try body(UnsafeMutableRawBufferPointer(rebasing: scratch[0..<byteCount]))
    }

    /// Encodes `height` rows of `width` RGBA pixels (alpha ignored), `stride` bytes apart.
    /// Calls `jpeg_start_compress`, `jpeg_write_scanlines` and `jpeg_finish_compress`.
    /// - Precondition: `rows` holds at least `stride * (height - 1) + width * 4` bytes; `stride >= width * 4`.
    /// - Throws: ``TileError/Code/invalidArgument`` for an empty or too large size, ``TileError/Code/io``
    ///   when libjpeg fails.
    public func encode(_ rows: UnsafeRawBufferPointer, stride: Int, width: Int, height: Int) throws(TileError) -> Data {
        guard width > 0, height > 0, width <= 65500, height <= 65500 else {
            throw TileError(.invalidArgument, "a \(width)x\(height) image cannot be a JPEG")
        }
        precondition(stride >= width * 4 && rows.count >= stride * (height - 1) + width * 4, "rows too short for \(width)x\(height)")
        var output: UnsafeRawPointer?
        var length = 0
        let status = cjs_tile_encoder_encode(handle, rows.baseAddress, stride, UInt32(width), UInt32(height), &output, &length)
        guard status == CJS_OK, let output else { throw TileError(.io, "libjpeg could not encode a \(width)x\(height) tile (status \(status.rawValue))") }
        return Data(bytes: output, count: length)
    }
}

/// Encoders kept for reuse, per quality: taken by one caller at a time, given back after.
final class TileJPEGEncoderPool: @unchecked Sendable {
    // Safe to share: `free` is read and written only under `lock`, and an encoder taken out is used by
    // that one caller until it is given back.
    private let lock = NSLock()
    private var free: [Int: [TileJPEGEncoder]] = [:]

    static let shared = TileJPEGEncoderPool()

    func withEncoder<R>(quality: Int, _ body: (TileJPEGEncoder) throws(TileError) -> R) throws(TileError) -> R {
        lock.lock()
        let reused = free[quality]?.popLast()
        lock.unlock()
        let encoder: TileJPEGEncoder
        if let reused { encoder = reused } else { encoder = try TileJPEGEncoder(quality: quality) }
        defer {
            lock.lock()
            if free[quality, default: []].count < 16 { free[quality, default: []].append(encoder) }
            lock.unlock()
        }
        return try body(encoder)
    }
}

extension TiledImage {
    /// The stored tile a request asks for exactly (its region is tile (column, row) of level k, at that
    /// level's size, upright, in colour), when that tile is ready: such a request needs no resampling.
    package func exactTile(for request: ImageRequest.Resolved) -> (level: Int, column: Int, row: Int, width: Int, height: Int)? {
        guard request.quarterTurns == 0, !request.mirrored, request.quality == .default || request.quality == .color else {
            return nil
        }
        let side = geometry.tileSize
        for (k, level) in geometry.levels.enumerated() {
            let span = side << k
            guard request.x % span == 0, request.y % span == 0 else { continue }
            let (column, row) = (request.x / span, request.y / span)
            guard request.width == min(span, geometry.width - request.x), request.height == min(span, geometry.height - request.y),
                column < level.columns, row < level.rows
            else { continue }
            let (width, height) = (min(side, level.width - column * side), min(side, level.height - row * side))
            guard request.scaledWidth == width, request.scaledHeight == height else { continue }
            guard isTileReady(level: k, column: column, row: row) else { return nil }
            return (k, column, row, width, height)
        }
        return nil
    }

    /// The stored tile that is tile (`column`, `row`) of DeepZoom level `deepZoomLevel` (DeepZoom numbers
    /// levels up from 1x1; its tiles are this store's tiles, overlap 0, wherever a DeepZoom level is one
    /// of the store's levels), when that tile is ready: the same answer as ``exactTile(for:)`` for the
    /// request of that DeepZoom tile, found with integers only (no request text is made or parsed).
    package func exactTile(deepZoomLevel: Int, column: Int, row: Int) -> (level: Int, column: Int, row: Int, width: Int, height: Int)? {
        let g = geometry, top = g.deepZoomTopLevel
        // Checked before any arithmetic: the numbers come from a request path (Int.min parses).
        guard (0...top).contains(deepZoomLevel), column >= 0, row >= 0 else { return nil }
        let k = top - deepZoomLevel
        guard k < g.levels.count else { return nil }
        // DeepZoom's level k halves k times rounding up; a store level of another size is no match.
        let level = g.levels[k]
        guard level.width == (g.width + (1 << k) - 1) >> k, level.height == (g.height + (1 << k) - 1) >> k,
            column < level.columns, row < level.rows
        else { return nil }
        let side = g.tileSize
        guard isTileReady(level: k, column: column, row: row) else { return nil }
        return (k, column, row, min(side, level.width - column * side), min(side, level.height - row * side))
    }

    /// A stored tile (``exactTile(for:)``) encoded as a JPEG of `quality` by a pooled encoder: one
    /// `pread` into the encoder's own buffer (``readTile(level:column:row:into:)``) and one encode.
    ///
    /// Not through the level's mapping (``withTile(level:column:row:_:)``): dropping a tile's mapped
    /// pages after each read splits huge mappings and flushes the TLB of every core running the
    /// process, about 25 us a tile on two cores; keeping them mapped grows the resident set by up to a
    /// level. The copy into a buffer that stays in the core's cache costs less than either.
    package func encodedTile(_ tile: (level: Int, column: Int, row: Int, width: Int, height: Int), quality: Int) throws(TileError) -> Data {
        try TileJPEGEncoderPool.shared.withEncoder(quality: quality) { encoder throws(TileError) in
            try encoder.withScratch(byteCount: geometry.tileByteCount) { buffer throws(TileError) in
                try readTile(level: tile.level, column: tile.column, row: tile.row, into: buffer)
                return try encoder.encode(UnsafeRawBufferPointer(buffer), stride: geometry.tileSize * 4, width: tile.width, height: tile.height)
            }
        }
    }
}
