/// How a level's tiles are stored (``TiledImage/tileCoding(ofLevel:)``).
public enum TileCoding: Sendable, Hashable, CustomStringConvertible {
    /// Raw RGBA pixels, a tile a block (a raw store's level files).
    case rawRGBA
    /// A TIFF's tiles in one of its compressions.
    case jpeg, webp, deflate, lzw, uncompressed
    /// A TIFF compression this package does not name (its `Compression` tag's value).
    case other(compression: Int)

    /// The coding of a TIFF's `Compression` tag value.
    init(tiffCompression value: Int) {
        switch value {
        case 7: self = .jpeg
        case 50001: self = .webp
        case 8, 32946: self = .deflate
        case 5: self = .lzw
        case 1: self = .uncompressed
        default: self = .other(compression: value)
        }
    }

    /// `raw RGBA`, `JPEG`, `deflate`, `LZW`, `none` or `compression N`, as `tiler info` prints it.
    public var description: String {
        switch self {
        case .rawRGBA: "raw RGBA"
        case .jpeg: "JPEG"
        case .webp: "WebP"
        case .deflate: "deflate"
        case .lzw: "LZW"
        case .uncompressed: "none"
        case .other(let value): "compression \(value)"
        }
    }
}

/// Where a pyramid's tiles are kept, and the few reads a ``TiledImage`` asks of it: the pixels of a
/// tile (or some of its rows), and, where tiles are kept encoded, their stored bytes. Raw level files
/// (``RawLevelStore``) and tiled TIFFs (``TIFFTileStore``) today.
///
/// The image checks that a tile exists and is written before it asks; a store only reads. Its
/// coordinates are display tiles (level, column, row), as the image's.
protocol TileStore: AnyObject, Sendable {
    /// The pyramid's levels, tile size and orientation.
    var geometry: TileGeometry { get }

    /// How `level`'s tiles are coded (the level exists).
    func coding(ofLevel level: Int) -> TileCoding

    /// Reads a display tile's RGBA pixels into `destination` (``TileGeometry/tileByteCount`` bytes),
    /// padding beyond the level zeroed.
    func readTile(level: Int, column: Int, row: Int, into destination: UnsafeMutableRawPointer) throws(TileError)

    /// Reads rows `rows` of a tile into the start of `buffer` where the store can read just those; else
    /// the whole tile. Returns the row of the tile that `buffer` starts with.
    func readTileRows(level: Int, column: Int, row: Int, rows: Range<Int>, into buffer: UnsafeMutableRawBufferPointer)
        throws(TileError) -> Int

    /// Calls `body` with a tile's pixels, without copying where the store can (a mapped file).
    func withTile<R>(level: Int, column: Int, row: Int, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R

    /// A level's file mapped, where the level's display tiles lie in it upright and whole, one block a
    /// tile, tile rows one after the other (a render reads regions straight from it); nil elsewhere.
    func uprightMapping(level: Int) throws(TileError) -> MappedFile?

    /// Bytes of tiles written so far.
    var bytesWritten: Int { get }
    /// Bytes the store takes when complete (of an encoded store: its size so far, final once complete).
    var totalByteCount: Int { get }
    /// What the store takes when complete, known before any tile is written (for a disk budget).
    var estimatedByteCount: Int { get }
    /// Pushes written tiles to the disk and drops their pages from the page cache.
    func flushWrittenData() throws(TileError)

    /// Whether tiles are kept encoded (their stored bytes can be sent as they are).
    var keepsEncodedTiles: Bool { get }
    /// Whether stored bytes are read without waiting on a writer (a file, or a build that has finished).
    var isSettled: Bool { get }
    /// Whether level 0's tiles hold the source JPEG's own coefficients.
    var isLevelZeroCopied: Bool { get }

    /// A stored JPEG tile made a complete JPEG (nil where the level's tiles are not JPEG).
    func storedJPEGTile(level: Int, column: Int, row: Int) throws(TileError) -> [UInt8]?
    /// A stored WebP tile's bytes, a complete WebP file (nil where the level's tiles are not WebP).
    func storedWebPTile(level: Int, column: Int, row: Int) throws(TileError) -> [UInt8]?
    /// A JPEG tile cropped to `width` x `height` without decoding; `waitsForDisk` false: only when the
    /// page cache holds the stored tile.
    func croppedJPEGTile(level: Int, column: Int, row: Int, width: Int, height: Int, waitsForDisk: Bool) throws(TileError) -> [UInt8]?
    /// Where a stored JPEG tile lies (nil where there is none).
    func storedJPEGTileLocation(level: Int, column: Int, row: Int) throws(TileError) -> TiledImage.StoredJPEGTileLocation?
    /// Reads a located stored JPEG tile without waiting for the disk (false: not in the page cache).
    func readStoredJPEGTileIfCached(_ location: TiledImage.StoredJPEGTileLocation, into destination: UnsafeMutableRawBufferPointer)
        throws(TileError) -> Bool
}

extension TileStore {
    func readTileRows(level: Int, column: Int, row: Int, rows: Range<Int>, into buffer: UnsafeMutableRawBufferPointer)
        throws(TileError) -> Int
    {
        guard buffer.count >= geometry.tileByteCount, let destination = buffer.baseAddress else {
            throw TileError(.invalidArgument, "a tile needs \(geometry.tileByteCount) bytes, the buffer has \(buffer.count)")
        }
        try readTile(level: level, column: column, row: row, into: destination)
        return 0
    }

    func withTile<R>(level: Int, column: Int, row: Int, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: geometry.tileByteCount, alignment: 16)
        defer { scratch.deallocate() }
        try readTile(level: level, column: column, row: row, into: scratch.baseAddress!)
        return try body(UnsafeRawBufferPointer(scratch))
    }

    func uprightMapping(level: Int) throws(TileError) -> MappedFile? { nil }

    var keepsEncodedTiles: Bool { false }
    var isSettled: Bool { false }
    var isLevelZeroCopied: Bool { false }

    func storedJPEGTile(level: Int, column: Int, row: Int) throws(TileError) -> [UInt8]? { nil }
    func storedWebPTile(level: Int, column: Int, row: Int) throws(TileError) -> [UInt8]? { nil }
    func croppedJPEGTile(level: Int, column: Int, row: Int, width: Int, height: Int, waitsForDisk: Bool) throws(TileError) -> [UInt8]? {
        nil
    }
    func storedJPEGTileLocation(level: Int, column: Int, row: Int) throws(TileError) -> TiledImage.StoredJPEGTileLocation? { nil }
    func readStoredJPEGTileIfCached(_ location: TiledImage.StoredJPEGTileLocation, into destination: UnsafeMutableRawBufferPointer)
        throws(TileError) -> Bool
    { false }
}
