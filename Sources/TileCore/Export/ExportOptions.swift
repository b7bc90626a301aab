import Foundation

/// What ``TileExporter`` writes: a layout that web viewers read, its tiles' size and encoding.
public struct ExportOptions: Sendable, Hashable {
    /// The folder layout.
    public enum Layout: Sendable, Hashable {
        /// DeepZoom: `NAME.dzi` and `NAME_files/LEVEL/COLUMN_ROW.FORMAT`, level 0 being 1x1 pixel and
        /// the last level the full size (OpenSeadragon and most deep-zoom viewers).
        case deepZoom
        /// A static IIIF Image API 3.0 service at compliance level 0: `NAME/info.json` and every tile
        /// at its canonical URI below `NAME/`, as `vips dzsave --layout iiif3` writes it. `baseURL`
        /// is where `NAME` will be served from (the `id` in `info.json` is `baseURL/NAME`).
        case iiif3(baseURL: String)
    }

    /// How tiles are encoded.
    public enum Format: Sendable, Hashable {
        /// Baseline JPEG, 4:2:0, at this quality (1...100).
        case jpeg(quality: Int)
        /// RGB PNG (lossless), through libpng.
        case png

        /// The file name suffix: `jpg` or `png`.
        public var fileExtension: String {
            switch self {
            case .jpeg: "jpg"
            case .png: "png"
            }
        }
    }

    public var layout: Layout = .deepZoom
    /// Tile side without the overlap, 1...8192. Default 256.
    public var tileSize = 256
    /// Pixels each DeepZoom tile repeats of its neighbours on each inner side, below the tile size.
    /// Default 0. IIIF tiles have none.
    public var overlap = 0
    /// Default JPEG at quality 80 (as `vips dzsave --suffix .jpg[Q=80]`).
    public var format = Format.jpeg(quality: TileJPEGEncoder.defaultQuality)
    /// Threads encoding tiles, 1...16. Default: the processors available.
    public var encoderThreads = ProcessInfo.processInfo.activeProcessorCount

    public init() {}

    /// Checks the values against their ranges.
    /// - Throws: ``TileError/Code/invalidArgument`` naming the value.
    public func validate() throws(TileError) {
        guard (1...8192).contains(tileSize) else {
            throw TileError(.invalidArgument, "tile size \(tileSize) is not within 1...8192")
        }
        guard overlap >= 0, overlap < tileSize else {
            throw TileError(.invalidArgument, "overlap \(overlap) is not within 0..<\(tileSize) (the tile size)")
        }
        if case .iiif3 = layout, overlap != 0 {
            throw TileError(.invalidArgument, "IIIF tiles have no overlap (asked for \(overlap))")
        }
        if case .jpeg(let quality) = format, !(1...100).contains(quality) {
            throw TileError(.invalidArgument, "JPEG quality \(quality) is not within 1...100")
        }
        guard (1...16).contains(encoderThreads) else {
            throw TileError(.invalidArgument, "encoder threads \(encoderThreads) is not within 1...16")
        }
    }
}
