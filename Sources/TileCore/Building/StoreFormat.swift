/// What a build writes: raw RGBA level files, or a tiled pyramidal TIFF. Each case carries only the
/// parameters that format reads.
public enum StoreFormat: Sendable, Hashable {
    /// One file per level, each tile 256x256 RGBA (5.3 bytes a pixel over the whole pyramid): one
    /// `pread` a tile, no decode. ``BuildOptions/writer`` says how the files are written.
    case raw
    /// One tiled pyramidal (Big)TIFF in the layout libvips writes (full resolution first, then each
    /// half-size level as a reduced image), JPEG tiles: level 0 copied from the source's DCT
    /// coefficients (lossless) when the JPEG allows it and is upright, the lower levels encoded.
    /// About 1.45 times the source's bytes; readable by libtiff, libvips, IIPImage, OpenSlide, GDAL.
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

    /// JPEG quality of the encoded levels (the lower levels; level 0 too when it cannot be copied),
    /// 1...100, libjpeg's scaling of the Annex K tables. Default 85: the lowest at which every lower
    /// level of the benchmark image is at least as close (PSNR against a float box filter) as
    /// `vips tiffsave --Q 85`'s (BENCHMARKS.md).
    public var quality: Int
    /// Default ``BigTIFF/automatic``.
    public var bigTIFF: BigTIFF

    /// - Parameters:
    ///   - quality: default 85.
    ///   - bigTIFF: default ``BigTIFF/automatic``.
    public init(quality: Int = 85, bigTIFF: BigTIFF = .automatic) {
        self.quality = quality
        self.bigTIFF = bigTIFF
    }
}
