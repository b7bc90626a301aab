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
    /// How rows reach the files. Default ``TileWriterKind/stripWrite`` (the faster here; see BENCHMARKS.md).
    public var writer: TileWriterKind = .stripWrite
    /// Tile and write on a thread of the writer's own while the caller's thread decodes, so decoding
    /// overlaps tiling and writing (``TileWriterKind/stripWrite`` only). Default `true`.
    public var overlapsWriting: Bool = true
    /// With ``overlapsWriting``: a further thread writes each level's completed tile row while the
    /// next one fills, so each level keeps two tile rows in memory (the design's two-row window)
    /// instead of one. Default `true`: on the 18000x18000 benchmark it is 1.4x faster for 27 MiB more.
    public var writesBehind: Bool = true
    /// Write tile rows with `O_DIRECT` where the file system allows it (not tmpfs), bypassing the page
    /// cache: filling fresh page-cache pages is the single largest cost of a build on ext4 here (see
    /// BENCHMARKS.md). The first read of a tile then comes from the disk. Default `true`.
    public var bypassesPageCache: Bool = true
    /// Largest image accepted, in pixels, checked against the header before any file is sized.
    /// Default 2^30.
    public var maximumPixelCount: Int = 1 << 30
    /// Accept a stream that ends before its image does: libjpeg fills the missing rows and a warning
    /// is counted. Default `false`: such a stream fails as ``TileError/Code/truncated``.
    public var allowTruncated: Bool = false
    /// Corrupt-data warnings tolerated before the build fails as ``TileError/Code/corrupt``; `nil` (the
    /// default) for no limit. libjpeg recovers from damaged data by resynchronising, and one damaged
    /// camera file in the corpus gives 17,268 warnings yet decodes as djpeg does; set a limit to refuse
    /// such files early.
    public var warningLimit: Int? = nil

    /// The defaults.
    public init() {}
}
