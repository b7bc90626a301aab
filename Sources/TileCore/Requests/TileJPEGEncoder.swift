internal import CJpegShim
public import Foundation

/// A JPEG encoder for tiles (or any small RGBA image), its libjpeg compressor set up once and reused
/// from image to image: YCbCr 4:2:0 (or one gray component), no EXIF, no ICC profile. The one JPEG
/// compressor of everything a server or an export encodes. Encoding a 256x256 tile costs about a third of
/// a millisecond here; creating a compressor for each would add to that.
///
/// Not thread-safe: one thread uses an encoder at a time (``TiledImage/renderEncoded(_:quality:lossless:effort:waitingUntil:isCancelled:)``
/// keeps a pool of them).
public final class TileJPEGEncoder {
    /// The quality every JPEG the library encodes has unless told otherwise: tiles, renders, exports,
    /// resized copies. 80, as `vips dzsave`'s tiles and most image servers'.
    public static let defaultQuality = 80

    /// The JPEG quality, 1...100.
    public let quality: Int
    /// Whether it encodes one gray component (the luma of the rows given) instead of YCbCr.
    public let isGray: Bool
    private let handle: OpaquePointer
    /// Tile bytes read for this encoder (``TiledImage/encodedTile(_:quality:)``), kept for the next tile.
    private var scratch = UnsafeMutableRawBufferPointer(start: nil, count: 0)

    /// - Parameters:
    ///   - quality: 1...100 (default ``defaultQuality``).
    ///   - gray: encode one gray component, the luma of the pixels (default false).
    /// - Throws: ``TileError/Code/invalidArgument`` for a quality out of range; ``TileError/Code/io``
    ///   when libjpeg cannot set up (out of memory).
    public init(quality: Int = TileJPEGEncoder.defaultQuality, gray: Bool = false) throws(TileError) {
        guard (1...100).contains(quality) else { throw TileError(.invalidArgument, "JPEG quality \(quality) is not within 1...100") }
        var handle: OpaquePointer?
        let status = cjs_tile_encoder_create(Int32(quality), gray ? 1 : 0, &handle)
        guard status == CJS_OK, let handle else { throw TileError(.io, "libjpeg could not create a compressor (status \(status.rawValue))") }
        self.quality = quality
        self.isGray = gray
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
        BlockingCallCheck.check("JPEG encode \(width)x\(height)")
        var output: UnsafeRawPointer?
        var length = 0
        let status = cjs_tile_encoder_encode(handle, rows.baseAddress, stride, UInt32(width), UInt32(height), &output, &length)
        guard status == CJS_OK, let output else {
            throw TileError(.io, "libjpeg could not encode a \(width)x\(height) tile (status \(status.rawValue))")
        }
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

    func withEncoder<R>(quality: Int, gray: Bool = false, _ body: (TileJPEGEncoder) throws(TileError) -> R) throws(TileError) -> R {
        let key = gray ? -quality : quality
        lock.lock()
        let reused = free[key]?.popLast()
        lock.unlock()
        let encoder: TileJPEGEncoder
        if let reused { encoder = reused } else { encoder = try TileJPEGEncoder(quality: quality, gray: gray) }
        defer {
            lock.lock()
            if free[key, default: []].count < 16 { free[key, default: []].append(encoder) }
            lock.unlock()
        }
        return try body(encoder)
    }
}

extension TiledImage {
    /// Whether `tile` (of ``TileGeometry/layout``) is one of this store's tiles, readable now.
    package func isStoredTileReady(_ tile: PyramidLayout.Tile) -> Bool {
        tile.level < levelCount && isTileReady(level: tile.level, column: tile.column, row: tile.row)
    }

    /// A stored tile (``isStoredTileReady(_:)``) encoded as a JPEG of `quality` by a pooled encoder: one
    /// `pread` into the encoder's own buffer (``readTile(level:column:row:into:)``) and one encode.
    ///
    /// Not through the level's mapping (``withTile(level:column:row:_:)``): dropping a tile's mapped
    /// pages after each read splits huge mappings and flushes the TLB of every core running the
    /// process, about 25 us a tile on two cores; keeping them mapped grows the resident set by up to a
    /// level. The copy into a buffer that stays in the core's cache costs less than either.
    /// - Throws: ``TileError/Code/invalidArgument`` for a tile the store does not have, what
    ///   ``readTile(level:column:row:into:)`` and the encoder throw.
    package func encodedTile(_ tile: PyramidLayout.Tile, quality: Int) throws(TileError) -> Data {
        let layout = geometry.layout
        guard tile.level < levelCount, layout.contains(tile) else {
            throw TileError(.invalidArgument, "the store has no tile \(tile.column),\(tile.row) at level \(tile.level)")
        }
        let (width, height) = layout.pixelSize(of: tile)
        return try TileJPEGEncoderPool.shared.withEncoder(quality: quality) { encoder throws(TileError) in
            try encoder.withScratch(byteCount: geometry.tileByteCount) { buffer throws(TileError) in
                try readTile(level: tile.level, column: tile.column, row: tile.row, into: buffer)
                return try encoder.encode(UnsafeRawBufferPointer(buffer), stride: geometry.tileSize * 4, width: width, height: height)
            }
        }
    }
}
