public import Foundation

/// Makes resized copies and thumbnails (JPEGs) of a JPEG, PNG, TIFF or JPEG 2000 master: for a JPEG, the
/// cheapest path in the package.
///
/// One synchronous routine does the whole job for one image: the header is read without decoding;
/// the image is decoded once (a JPEG with libjpeg's DCT-domain scaling at the largest factor, 1/2,
/// 1/4 or 1/8, that keeps it at or above the largest target; another format at full size, a TIFF or
/// JPEG 2000 from its own file or from a spool file once all of it has come), streamed row by row
/// through an area-averaging resampler per target (memory: O(width) for the source, plus each
/// target's own pixels), turned upright, and encoded; each file is written under a temporary name and renamed into place. A master with alpha
/// is composited onto white (JPEG keeps no alpha). The source's ICC profile is kept when it is an
/// RGB one (``Options/keepsICCProfile``).
public enum ImageResizer {
    /// One output: the longest edge of the upright result, and where it goes.
    public struct Target: Sendable, Hashable {
        public var maxEdge: Int
        /// The file to write; `nil` to get only the pixels (see ``Result/pixels``).
        public var path: String?
        public init(maxEdge: Int, path: String?) {
            self.maxEdge = maxEdge
            self.path = path
        }
    }

    /// How outputs are made.
    public struct Options: Sendable, Hashable {
        /// JPEG quality, default 80.
        public var quality = TileJPEGEncoder.defaultQuality
        public var progressive = false
        /// Default: the EXIF tag's orientation; the output is upright and carries no orientation tag.
        public var orientation: OrientationOption = .fromExif
        /// Keep the source's ICC profile (default `true`) when it describes the RGB output (a gray or
        /// CMYK profile does not; see ``ColorProfile/describes(channels:)``).
        public var keepsICCProfile = true
        /// Keep the source's EXIF block (default `false`: other metadata is dropped). The copy's
        /// Orientation is set to 1, since the pixels are written upright; its other tags (pixel
        /// dimensions, thumbnail) are copied as they are.
        public var keepsEXIF = false
        /// An image already within a target is copied through byte for byte (default); `true`
        /// re-encodes it upright instead.
        public var reencodesSmallImages = false
        /// Keep the decoded pixels of each target in its ``Result`` (default `false`).
        public var returnsPixels = false
        public var maximumPixelCount = 1 << 30
        /// Corrupt-data warnings tolerated (as ``BuildOptions/warningLimit``); `nil` for no limit.
        public var warningLimit: Int? = 100
        /// Scans tolerated (as ``BuildOptions/maximumScanCount``); `nil` for no limit.
        public var maximumScanCount: Int? = 500
        /// Where a progressive JPEG's coefficients are kept while it is decoded (see
        /// ``CoefficientStorage``); on disk they go to `$TMPDIR` (else `/tmp`). DCT-domain scaling
        /// does not shrink them: libjpeg holds every coefficient of a progressive image at any scale.
        public var coefficientStorage: CoefficientStorage = .default
        public init() {}
    }

    /// What one target came out as.
    public struct Result: Sendable, Hashable {
        public var target: Target
        /// Upright size of the output.
        public var width: Int
        public var height: Int
        /// Whether the source was copied through unchanged.
        public var wasCopied: Bool
        /// The size libjpeg decoded at (smaller than the source when DCT scaling was used).
        public var decodedWidth: Int
        public var decodedHeight: Int
        /// The upright pixels, when ``Options/returnsPixels`` is set.
        public var pixels: RGBAPixels?
    }

    /// The upright output size for a longest edge: the longest side becomes `maxEdge`, the other is
    /// scaled by the same ratio and rounded to nearest (at least 1). Sizes already within `maxEdge` stay.
    public static func outputSize(width: Int, height: Int, maxEdge: Int) -> (width: Int, height: Int) {
        let longest = max(width, height)
        guard longest > maxEdge else { return (width, height) }
        let short = max(1, Int((Double(min(width, height)) * Double(maxEdge) / Double(longest)).rounded()))
        return width >= height ? (maxEdge, short) : (short, maxEdge)
    }

    /// The largest DCT scaling denominator (1, 2, 4, 8) that keeps `width x height` at or above the target.
    public static func scaleDenominator(width: Int, height: Int, targetWidth: Int, targetHeight: Int) -> Int {
        for d in [8, 4, 2] where (width + d - 1) / d >= targetWidth && (height + d - 1) / d >= targetHeight {
            return d
        }
        return 1
    }

    /// Resizes the image file at `path` (JPEG, PNG, TIFF, its first page, or JPEG 2000) to every target in one decode.
    /// - Throws: ``TileError`` (corrupt or truncated input, `.io` with the path and errno when an output
    ///   cannot be written); no output file is left behind on failure.
    ///
    /// The input is opened once: a regular file is read for its header, then from the start again
    /// through the same descriptor; a FIFO or standard input (`-`) is read once into memory.
    /// - Throws: also ``TileError/Code/invalidArgument`` when a target's path is the input itself
    ///   (the same file, also through a link), before anything is written.
    public static func resize(contentsOfFile path: String, to targets: [Target], options: Options = Options())
        throws(TileError) -> [Result]
    {
        let file = try InputFile(path: path)
        for target in targets {
            if let output = target.path, file.isSameFile(as: output) {
                throw TileError(.invalidArgument, "\(output) is the input file; it would be overwritten")
            }
        }
        guard file.isRegularFile else { return try resize(data: try file.readAll(), to: targets, options: options) }
        let info = try ImageInfo.read(file)
        try file.rewind()
        return try ResizeJob(source: .file(file), sourcePath: path, info: info, targets: targets, options: options).run()
    }

    /// Resizes an in-memory image (JPEG, PNG, TIFF or JPEG 2000) to every target in one decode.
    public static func resize<Bytes: ContiguousBytes>(data: Bytes, to targets: [Target], options: Options = Options())
        throws(TileError) -> [Result]
    {
        let bytes = data.withUnsafeBytes { Data($0) }
        let info = try ImageInfo.read(data: bytes)
        return try ResizeJob(source: .data(bytes), info: info, targets: targets, options: options).run()
    }
}
