internal import CJpegShim
#if canImport(Glibc)
import Glibc
import Synchronization
#endif

/// One level of a TIFF being written: its size and the coding of its tiles (JPEG, or WebP).
struct TIFFLevelCoding: Sendable, Hashable {
    var width: Int
    var height: Int
    /// TIFF's number: 1 gray (MinIsBlack), 6 YCbCr (JPEG tiles); 2 RGB (WebP tiles).
    var photometric: Int32
    var horizontalSubsampling: Int
    var verticalSubsampling: Int
    /// JPEGTables: SOI, DQT, DHT, EOI (empty for WebP tiles).
    var tables: [UInt8]
    /// TIFF's `Compression`: 7 JPEG, 50001 WebP.
    var compression = Int32(CJS_COMPRESSION_JPEG.rawValue)
    /// WebP tiles: 3 samples, or 4 with alpha.
    var samples = 3
    var webpQuality = 0
    var webpLossless = false

    var isWebP: Bool { compression == Int32(CJS_COMPRESSION_WEBP.rawValue) }

    /// A level of WebP tiles, RGB or RGBA (`alpha`), as `coding` says.
    init(webp coding: TIFFWriting, width: Int, height: Int, alpha: Bool) {
        self.width = width
        self.height = height
        photometric = Int32(CJS_PHOTOMETRIC_RGB.rawValue)
        horizontalSubsampling = 1
        verticalSubsampling = 1
        tables = []
        compression = Int32(CJS_COMPRESSION_WEBP.rawValue)
        samples = alpha ? 4 : 3
        webpQuality = coding.webpQuality
        webpLossless = coding.webpLossless
    }

    /// A coding whose tables are made later (``init(encodedAs:width:height:like:)``).
    init(photometric: Int32, horizontalSubsampling: Int, verticalSubsampling: Int) {
        width = 0
        height = 0
        self.photometric = photometric
        self.horizontalSubsampling = horizontalSubsampling
        self.verticalSubsampling = verticalSubsampling
        tables = []
    }

    init(_ level: cjs_tiff_level, tables: [UInt8]) {
        width = Int(level.width)
        height = Int(level.height)
        photometric = level.photometric
        horizontalSubsampling = Int(level.h_subsampling)
        verticalSubsampling = Int(level.v_subsampling)
        self.tables = tables
    }

    /// A level encoded as `coding` says (`cjs_jpeg_tables`), with `like`'s colour and sampling.
    init(encodedAs coding: TIFFWriting, width: Int, height: Int, like: TIFFLevelCoding) throws(TileError) {
        var pointer: UnsafeMutableRawPointer?
        var length = 0
        let gray: Int32 = like.photometric == Int32(CJS_PHOTOMETRIC_GRAY.rawValue) ? 1 : 0
        guard cjs_jpeg_tables(Int32(coding.quality), coding.tablesCode, gray, &pointer, &length) == CJS_OK, let pointer else {
            throw TileError(.invalidArgument, "no JPEG tables for quality \(coding.quality)")
        }
        defer { cjs_free(pointer) }
        self = like
        self.width = width
        self.height = height
        tables = [UInt8](UnsafeRawBufferPointer(start: pointer, count: length))
    }
}

/// The one Swift owner of a `cjs_tiff_writer`: the TIFF file of a pyramid being built, through libtiff.
///
/// `@unchecked Sendable`: the C writer serializes `put_tile`, `locate` and its counters with its own
/// lock; ``finish()`` is called once, by the builder, after every tile is in; its files (the TIFF and
/// the spool) and progress counters are kept here until the C writer is destroyed.
final class TIFFPyramidWriter: @unchecked Sendable {
    let handle: OpaquePointer
    /// The TIFF, then the spool file the lower levels wait in until ``finish()``.
    let files: LevelFiles
    let levels: [TIFFLevelCoding]
    let tileSize: Int
    let progress: TileRowCounters
    let isBigTIFF: Bool
    /// The source's ICC profile, written as the InterColorProfile of every directory when it describes
    /// the tiles' colours (an RGB profile for YCbCr tiles, a gray one for gray tiles).
    let colorProfile: ColorProfile?
    /// Set once ``finish()`` has written every directory: no tile moves any more (until then the
    /// lower levels are copied from the spool under the writer's lock, which a read would wait for).
    private let finished = Atomic<Bool>(false)
    var isFinished: Bool { finished.load(ordering: .acquiring) }

    /// Creates the writer (`cjs_tiff_writer_create`) over `files` (the TIFF's descriptor, then the
    /// spool's), which it keeps until it is released.
    /// - Throws: ``TileError/Code/io`` when libtiff refuses the file, ``TileError/Code/invalidArgument``
    ///   for levels that do not make a pyramid.
    init(
        files: LevelFiles, levels: [TIFFLevelCoding], tileSize: Int, bigTIFF: Bool, info: ImageInfo?,
        progress: TileRowCounters
    ) throws(TileError) {
        precondition(files.descriptors.count == 2, "a TIFF writer writes a TIFF and a spool")
        var options = cjs_tiff_options()
        options.tile_size = UInt32(tileSize)
        options.big_tiff = bigTIFF ? 1 : 0
        if let (unit, x, y) = Self.resolution(info) {
            options.resolution_unit = unit
            options.x_resolution = x
            options.y_resolution = y
        }
        let channels = levels.first?.photometric == Int32(CJS_PHOTOMETRIC_GRAY.rawValue) ? 1 : 3
        let colorProfile = info?.colorProfile.flatMap { $0.describes(channels: channels) ? $0 : nil }
        let profile = colorProfile?.bytes ?? []
        var handle: OpaquePointer?
        let status = profile.withUnsafeBytes { icc in
            options.icc_profile = icc.baseAddress
            options.icc_profile_length = icc.count
            return Self.create(files, levels, &options, progress, &handle)
        }
        guard status == CJS_OK, let handle else {
            switch status {
            case CJS_ERR_NOMEM: throw TileError(.io, "out of memory for the TIFF writer", errno: ENOMEM)
            case CJS_ERR_IO: throw TileError(.io, "libtiff cannot write the TIFF")
            default: throw TileError(.invalidArgument, "the TIFF writer refuses these levels")
            }
        }
        self.handle = handle
        self.colorProfile = colorProfile
        self.files = files
        self.levels = levels
        self.tileSize = tileSize
        self.progress = progress
        isBigTIFF = bigTIFF
    }

    private static func create(
        _ files: LevelFiles, _ levels: [TIFFLevelCoding], _ options: inout cjs_tiff_options, _ progress: TileRowCounters,
        _ handle: inout OpaquePointer?
    ) -> cjs_status {
        // Every level's tables must stay put while the C levels point at them: nest the borrows.
        func build(_ index: Int, _ built: [cjs_tiff_level]) -> cjs_status {
            guard index < levels.count else {
                return built.withUnsafeBufferPointer {
                    cjs_tiff_writer_create(
                        files.descriptors[0], files.descriptors[1], &options, $0.baseAddress, UInt32($0.count),
                        progress.entries, &handle)
                }
            }
            let l = levels[index]
            return l.tables.withUnsafeBytes { tables in
                var level = cjs_tiff_level()
                level.width = UInt32(l.width)
                level.height = UInt32(l.height)
                level.photometric = l.photometric
                level.h_subsampling = UInt16(l.horizontalSubsampling)
                level.v_subsampling = UInt16(l.verticalSubsampling)
                level.jpeg_tables = tables.count > 0 ? tables.baseAddress : nil
                level.jpeg_tables_length = tables.count
                level.compression = l.compression
                level.samples = Int32(l.samples)
                level.webp_quality = Int32(l.webpQuality)
                level.webp_lossless = l.webpLossless ? 1 : 0
                return build(index + 1, built + [level])
            }
        }
        return build(0, [])
    }

    deinit { cjs_tiff_writer_destroy(handle) }

    /// ResolutionUnit and resolutions from the JFIF density (units 1 dpi, 2 dpcm), else EXIF's
    /// XResolution, YResolution and ResolutionUnit.
    static func resolution(_ info: ImageInfo?) -> (Int32, Double, Double)? {
        guard let info else { return nil }
        if let d = info.density, d.unit == 1 || d.unit == 2, d.x > 0, d.y > 0 {
            return (d.unit == 1 ? 2 : 3, Double(d.x), Double(d.y))
        }
        if case .rationals(let x)? = info.exif["XResolution"], case .rationals(let y)? = info.exif["YResolution"],
            let xv = x.first?.value, let yv = y.first?.value, xv > 0, yv > 0
        {
            var unit: Int32 = 2
            if case .integers(let u)? = info.exif["ResolutionUnit"], let first = u.first, first == 3 { unit = 3 }
            return (unit, xv, yv)
        }
        return nil
    }

    /// Where a written tile's bytes are: a descriptor (the TIFF's or the spool's), an offset and a
    /// length; `nil` when it is not written yet (`cjs_tiff_writer_locate`).
    func locate(level: Int, column: Int, row: Int) -> (descriptor: Int32, offset: Int, length: Int)? {
        var spool: Int32 = 0
        var offset: UInt64 = 0
        var length: UInt64 = 0
        let status = cjs_tiff_writer_locate(handle, UInt32(level), UInt32(column), UInt32(row), &spool, &offset, &length)
        guard status == CJS_OK else { return nil }
        return (files.descriptors[spool != 0 ? 1 : 0], Int(offset), Int(length))
    }

    /// Bytes of tiles written so far.
    var bytesWritten: Int { Int(cjs_tiff_writer_bytes_written(handle)) }

    /// Stores one encoded tile (`cjs_tiff_writer_put_tile`).
    func putTile(level: Int, column: Int, row: Int, _ bytes: UnsafeRawBufferPointer) throws(TileError) {
        let status = cjs_tiff_writer_put_tile(handle, UInt32(level), UInt32(column), UInt32(row), bytes.baseAddress, bytes.count)
        if status != CJS_OK { throw failure("cannot write a tile") }
    }

    /// Writes every directory, lower levels copied in from the spool (`cjs_tiff_writer_finish`).
    func finish() throws(TileError) {
        if cjs_tiff_writer_finish(handle) != CJS_OK { throw failure("cannot finish the TIFF") }
        finished.store(true, ordering: .releasing)
    }

    /// The writer's failure as a typed error: its errno when a write failed, libtiff's message.
    func failure(_ what: String) -> TileError {
        let number = cjs_tiff_writer_errno(handle)
        var text = [CChar](repeating: 0, count: 256)
        cjs_tiff_writer_copy_message(handle, &text, text.count)
        let message = String(cMessage: text)
        return TileError(.io, "\(what): \(message.isEmpty ? "the TIFF writer failed" : message)", errno: number == 0 ? nil : number)
    }
}
