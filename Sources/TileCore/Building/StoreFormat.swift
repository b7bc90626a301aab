/// What a build writes: raw RGBA level files, or a tiled pyramidal TIFF. Each case carries only the
/// parameters that format reads.
public enum StoreFormat: Sendable, Hashable {
    /// One file per level, each tile 256x256 RGBA (5.3 bytes a pixel over the whole pyramid): one
    /// `pread` a tile, no decode. ``BuildOptions/writer`` says how the files are written.
    case raw
    /// One tiled pyramidal (Big)TIFF in the layout libvips writes (full resolution first, then each
    /// half-size level as a reduced image), JPEG tiles: level 0 copied from the source's DCT
    /// coefficients (lossless) when the JPEG allows it and is upright, the lower levels encoded.
    /// About 1.4 times the source's bytes; readable by libtiff, libvips, IIPImage, OpenSlide, GDAL.
    /// A master with alpha gets WebP tiles instead, which keep it (``TIFFWriting/compression``).
    case tiff(TIFFWriting = TIFFWriting())
}

/// The TIFF format's parameters.
public struct TIFFWriting: Sendable, Hashable {
    /// When the file uses BigTIFF's 64-bit offsets.
    public enum BigTIFF: Sendable, Hashable {
        /// When the file could pass 4 GiB (estimated from the source's size and the pyramid's pixels).
        case automatic
        /// Always (as `vips tiffsave --bigtiff`).
        case always
        /// Never: a build whose file would pass 4 GiB fails as ``TileError/Code/io``.
        case never
    }

    /// The quantisation tables the encoded levels' quality scales.
    public enum Tables: String, Sendable, Hashable, CaseIterable, Codable {
        /// The tables of the JPEG standard's Annex K, scaled as libjpeg's `jpeg_set_quality` scales
        /// them: what a JPEG quality means to most encoders (`cjpeg -quality`, `vips --Q`).
        case annexK
        /// Annex K's tables with each entry's distance from the table's first (DC) entry halved on a
        /// log scale (an entry K over the first entry D becomes the geometric mean of K and D; entries
        /// at or under D are kept), then scaled the same way. At the same quality never coarser than
        /// ``annexK`` at any frequency and finer at the high ones: the detail a downsized level is
        /// full of, and that a mean-squared error (PSNR) counts as much as the low frequencies. The DC
        /// and the low frequencies are quantised exactly as ``annexK``'s at the same quality.
        case flattened
    }

    /// JPEG quality of the encoded levels (the lower levels; level 0 too when it cannot be copied),
    /// 1...100, scaling ``tables`` as libjpeg scales Annex K's. Default 74: with ``Tables/flattened``,
    /// the lowest at which every lower level of the benchmark image is at least as close (PSNR against
    /// a float box filter) as `vips tiffsave --Q 85`'s (Annex K at 85), the whole TIFF 1.40 times the
    /// source's bytes against vips' 1.46 (BENCHMARKS.md).
    public var quality: Int
    /// Default ``Tables/flattened``.
    public var tables: Tables
    /// Default ``BigTIFF/automatic``.
    public var bigTIFF: BigTIFF
    /// What a build asked for JPEG tiles (``Compression/jpeg``) does with a master that has alpha (a
    /// PNG's, a TIFF's), which JPEG tiles cannot keep. Default ``AlphaMasters/rawStore``.
    public var mastersWithAlpha: AlphaMasters
    /// The tiles' compression. Default ``Compression/automatic``.
    public var compression: Compression
    /// WebP tiles' quality, 1...100 (lossless: the effort spent on size). Default 85: lossy WebP at 85
    /// is within 1 dB (PSNR) of JPEG at 80 on the benchmark's regions, at 0.74 times the bytes.
    public var webpQuality: Int
    /// WebP tiles coded losslessly (their alpha always is). Default `false`.
    public var webpLossless: Bool

    /// How a TIFF store's tiles are compressed.
    public enum Compression: String, Sendable, Hashable, CaseIterable, Codable {
        /// JPEG tiles, unless the master has alpha: then WebP tiles, which keep it.
        case automatic
        /// JPEG tiles (level 0 copied losslessly from an upright JPEG's coefficients). A master with
        /// alpha goes as ``TIFFWriting/mastersWithAlpha`` says.
        case jpeg
        /// WebP tiles (libtiff's `COMPRESSION_WEBP`, 50001), RGB, with alpha (unassociated, stored
        /// losslessly) when the master has it, lossy at ``TIFFWriting/webpQuality`` or lossless. Read by
        /// libtiff 4.0.10+, libvips and IIPImage 1.2+. Every level is encoded: no level is copied.
        case webp
    }

    /// What becomes of a master with alpha.
    public enum AlphaMasters: Sendable, Hashable {
        /// It is built into a raw store instead (its manifest says so), whose RGBA tiles keep the alpha.
        case rawStore
        /// The build fails as ``TileError/Code/unsupported``.
        case refuse
    }

    /// - Parameters:
    ///   - quality: default 74.
    ///   - tables: default ``Tables/flattened``.
    ///   - bigTIFF: default ``BigTIFF/automatic``.
    ///   - mastersWithAlpha: default ``AlphaMasters/rawStore`` (for ``Compression/jpeg``).
    ///   - compression: default ``Compression/automatic``.
    ///   - webpQuality: default 85.
    ///   - webpLossless: default `false`.
    public init(
        quality: Int = 74, tables: Tables = .flattened, bigTIFF: BigTIFF = .automatic,
        mastersWithAlpha: AlphaMasters = .rawStore, compression: Compression = .automatic, webpQuality: Int = 85,
        webpLossless: Bool = false
    ) {
        self.quality = quality
        self.tables = tables
        self.bigTIFF = bigTIFF
        self.mastersWithAlpha = mastersWithAlpha
        self.compression = compression
        self.webpQuality = webpQuality
        self.webpLossless = webpLossless
    }

    /// Whether a master (`hasAlpha` or not) gets WebP tiles.
    func usesWebP(hasAlpha: Bool) -> Bool {
        compression == .webp || (compression == .automatic && hasAlpha)
    }

    /// The C shim's `cjs_quant_tables`.
    var tablesCode: Int32 {
        switch tables {
        case .annexK: 0
        case .flattened: 1
        }
    }
}
