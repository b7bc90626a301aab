/// How a ``TileBuilder`` decodes and lays out a pyramid.
public struct BuildOptions: Sendable, Hashable {
    /// Tile side in pixels. Default 256.
    public var tileSize: Int = 256
    /// How many levels. Default: down to the level that fits in one tile.
    public var levels: LevelPolicy = .downToOneTile
    /// Display orientation. Default: the EXIF tag's.
    public var orientation: OrientationOption = .fromExif
    /// Ephemeral files (default) or a persistent store folder.
    public var storage: TileStorage = .ephemeral()
    /// Raw level files (the default) or a tiled pyramidal TIFF (``StoreFormat``).
    public var format: StoreFormat = .raw
    /// How rows reach the level files. Default: the band writer, writing behind with `O_DIRECT`
    /// (``LevelWriter/bands(_:)`` with ``BandWriting``'s defaults).
    public var writer: LevelWriter = .bands()
    /// Largest image accepted, in pixels, checked against the header before any file is sized.
    /// Default 2^30.
    public var maximumPixelCount: Int = 1 << 30
    /// Accept scan data that ends early: a stream that ends before its image does, or a scan cut short
    /// by a marker other than a restart marker (a cut file with an end-of-image marker appended).
    /// libjpeg fills the missing rows and a warning is counted, as `djpeg` does. Default `false`: such
    /// a stream fails as ``TileError/Code/truncated`` at the first sign, before anything more is
    /// decoded or written (a 824-byte file claiming 65500x16392 pixels fails at once instead of
    /// writing 5.5 GiB of grey tiles).
    public var allowTruncated: Bool = false
    /// Corrupt-data warnings tolerated before the build fails as ``TileError/Code/tooManyWarnings``;
    /// `nil` for no limit. Default 100 (as libvips). libjpeg recovers from damaged data by
    /// resynchronising, at some cost per warning: one damaged camera file in the corpus gives 17,268
    /// warnings (with ``allowTruncated``) and decodes as djpeg does only without a limit.
    public var warningLimit: Int? = 100
    /// Scans tolerated before the build fails as ``TileError/Code/tooManyScans`` (as `djpeg
    /// -maxscans`); `nil` for no limit. Default 500: real encoders write 1 to about 12 scans; a stream
    /// of thousands of empty refinement scans costs a pass over the whole image each. With a limit,
    /// the scans may also cover the image's blocks at most 16 times over (after the first 2^24
    /// block-scans): a few hundred empty scans of a large image are refused as soon as they pass that.
    public var maximumScanCount: Int? = 500

    /// Where a progressive (or multi-scan) JPEG's coefficients are kept while it is decoded: in a
    /// temporary file beside the level files, with a window of a few block rows in memory, when they
    /// take more than 32 MiB (``CoefficientStorage/default``). Baseline JPEGs need none.
    public var coefficientStorage: CoefficientStorage = .default
    /// Memory for each component's window of coefficient rows on disk (`nil`: 1 MiB). Tests make it
    /// tiny, so that small images move the window at every access.
    var coefficientWindowBytes: Int?

    /// The page of a multi-page TIFF master to build, 0 the first: the directories of its main chain
    /// counted without reduced-resolution copies and masks (``ImageInfo/TIFFDetails/pageCount``). Default 0.
    /// Other formats hold one image.
    public var page: Int = 0

    /// Whole-image previews of a progressive JPEG while its bytes arrive (``PreviewPolicy``). Default
    /// ``PreviewPolicy/automatic``: on for sources that stream over a network, off for local files.
    public var preview: PreviewPolicy = .automatic

    /// The defaults.
    public init() {}
}

/// Whether a build makes whole-image previews of a progressive JPEG before its last byte.
///
/// A progressive JPEG's first scan (usually every DC coefficient) is a coarse picture of the whole
/// image. After each of the first scans, the builder decodes the bytes so far (the stream cut at the
/// end of that scan) at 1/8 scale and writes the levels at 1/8 and below from it: a viewer can show
/// the whole image, blurred, long before the rest arrives. Those levels stay
/// ``TiledImage/TileQuality/preliminary(scan:)`` until the complete image rewrites them. A preview
/// decodes the scans so far again (their entropy decoding, at 1/8 scale), so for a local file, whose
/// bytes all arrive at once, it only costs time.
public enum PreviewPolicy: Sendable, Hashable {
    /// Previews after the first two scans for sources that stream over a network (`ImageLoader`
    /// and the HTTP source decide), none for local files or a `TileBuilder` fed directly.
    case automatic
    /// No previews.
    case off
    /// A preview after each of the first `count` scans (once the scan has fully arrived; when several
    /// arrive together, only the last of them).
    case afterScans(Int)

    /// How many scans get a preview, for a source that streams (`true`) or not.
    public func scanCount(streaming: Bool) -> Int {
        switch self {
        case .automatic: return streaming ? 2 : 0
        case .off: return 0
        case .afterScans(let count): return max(0, count)
        }
    }
}
