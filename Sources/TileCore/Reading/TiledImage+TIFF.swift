#if canImport(Glibc)
import Glibc
#endif
public import Foundation

extension TiledImage {
    /// Opens a tiled pyramidal TIFF: one this package built (``StoreFormat/tiff(_:)``), or one libvips,
    /// IIPImage's tools, GDAL or another writer made: JPEG (YCbCr, RGB or gray), deflate, LZW or
    /// uncompressed tiles of 8-bit gray, RGB or RGBA; the pyramid as successive IFDs or SubIFDs of
    /// the first. The levels are the full-resolution image and each directory half its size (libvips
    /// rounds down, this package up: either is read). Nothing is decoded here: libtiff reads the
    /// directories once; each tile is then one `pread` and, for pixels, one decode.
    ///
    /// The TIFF's Orientation tag is not applied: tiles are read as stored (this package writes
    /// upright TIFFs).
    /// - Parameter path: the `.tif` file.
    /// - Returns: a complete image whose reads decode one tile each.
    /// - Throws: ``TileError/Code/invalidStore`` when the file is not a TIFF with a tiled image,
    ///   ``TileError/Code/unsupported`` for tiles it does not read, ``TileError/Code/tooLarge``,
    ///   ``TileError/Code/io``.
    public static func open(tiff path: String) throws(TileError) -> TiledImage {
        try openTIFF(file: path, storePath: path)
    }

    /// Whether level 0's tiles hold the source JPEG's own DCT coefficients and quantisation tables, so
    /// that level 0 is lossless: a TIFF pyramid this package built from an upright JPEG whose
    /// coefficients TIFF can hold (YCbCr or gray, 8-bit, a sampling TIFF can state; see
    /// ``StoreFormat/tiff(_:)``). `false` for raw pyramids and bare TIFFs.
    public var isLevelZeroCopied: Bool { store.isLevelZeroCopied }

    /// Opens the TIFF at `file`; the image's ``storePath`` is `storePath`.
    static func openTIFF(file: String, storePath: String, isLevelZeroCopied: Bool = false, storeHold: FolderLock? = nil) throws(TileError)
        -> TiledImage
    {
        let files = try LevelFiles.opening(1) { _ throws(TileError) in try SystemCall.openRegularFile(file) }
        let reader = try TIFFFileReader(fd: files.descriptors[0], path: file)  // files closes it if anything below throws
        let (levels, geometry) = try TIFFSource.pyramid(of: reader, path: file)
        return TiledImage(
            geometry: geometry, files: files, storePath: storePath, complete: true,
            tiff: TIFFSource(levels: levels, backing: .file(reader), isLevelZeroCopied: isLevelZeroCopied, colorProfile: reader.colorProfile),
            storeHold: storeHold)
    }

    /// The stored JPEG of one tile of a TIFF pyramid, made a complete JPEG without decoding anything:
    /// the level's JPEGTables (quantisation and Huffman tables) without their end marker, then the
    /// tile's own stream without its start marker. A server sends these bytes as they are for a
    /// DeepZoom or IIIF tile that is a whole stored tile. Level 0 of a TIFF this package built from an
    /// upright JPEG holds the source's own DCT coefficients.
    ///
    /// The JPEG is the stored tile's full size, ``TileGeometry/tileSize`` square: an edge tile holds
    /// padding beyond the image (this package repeats the last column and row into it; other writers
    /// may pad otherwise); ``exactJPEGTile(level:column:row:)`` gives it at its exact size. Its colour is YCbCr (three components with identifiers
    /// 1, 2, 3 and no JFIF marker, which every decoder reads as YCbCr) or gray.
    /// - Parameters:
    ///   - level: 0 ..< ``levelCount``.
    ///   - column: the tile's column.
    ///   - row: the tile's row.
    /// - Returns: the JPEG's bytes (one `pread` of the tile, the tables copied in front), or `nil` when
    ///   the image has no JPEG tiles: raw level files, or a TIFF level that is deflate, LZW or
    ///   uncompressed.
    /// - Throws: ``TileError/Code/invalidArgument`` for coordinates outside the level,
    ///   ``TileError/Code/notReady`` before the tile's row is written (a build in progress),
    ///   ``TileError/Code/corrupt`` for a tile that is not a JPEG stream or lies past the end of the
    ///   file, ``TileError/Code/io``.
    public func storedJPEGTile(level: Int, column: Int, row: Int) throws(TileError) -> Data? {
        guard store.keepsEncodedTiles else { return nil }
        _ = try checkedTileOffset(level: level, column: column, row: row)
        return try store.storedJPEGTile(level: level, column: column, row: row).map { Data($0) }
    }

    /// A stored WebP tile of a TIFF pyramid as it is stored: a complete WebP file of the whole tile
    /// (libtiff's WebP tiles hold one each), padding included for an edge tile. A server sends these
    /// bytes for a whole tile asked for in WebP.
    /// - Returns: the WebP, or `nil` when the level's tiles are not WebP (or the store keeps no encoded
    ///   tiles: raw level files).
    /// - Throws: ``TileError/Code/notReady`` before the tile is written, ``TileError/Code/corrupt`` for
    ///   stored bytes that are not a WebP file, ``TileError/Code/io`` when the file cannot be read.
    public func storedWebPTile(level: Int, column: Int, row: Int) throws(TileError) -> Data? {
        guard store.keepsEncodedTiles else { return nil }
        _ = try checkedTileOffset(level: level, column: column, row: row)
        return try store.storedWebPTile(level: level, column: column, row: row).map { Data($0) }
    }

    /// A TIFF pyramid's JPEG tile at the tile's own size, without decoding anything: a whole tile as
    /// ``storedJPEGTile(level:column:row:)`` makes it; an edge tile (its padding beyond the level left
    /// out) cropped from the stored one as `jpegtran -crop WxH+0+0` crops: its DCT coefficients
    /// copied into a JPEG of the edge tile's size, coded with the tile's own Huffman tables where they
    /// can code it (else with tables made for it). Its pixels are the ones jpegtran's crop decodes to
    /// (the last column or row of subsampled chroma may be upsampled otherwise than in the padded
    /// tile). A server sends these bytes for a DeepZoom or IIIF tile that is a stored tile. Calls `jpeg_read_coefficients` and `jpeg_write_coefficients` for an edge tile.
    /// - Parameters:
    ///   - level: 0 ..< ``levelCount``.
    ///   - column: the tile's column.
    ///   - row: the tile's row.
    /// - Returns: the JPEG, or `nil` when the level's tiles are not JPEG (raw level files, a TIFF level
    ///   that is deflate, LZW or uncompressed) or an edge tile's colour is neither YCbCr nor gray.
    /// - Throws: what ``storedJPEGTile(level:column:row:)`` throws; ``TileError/Code/corrupt`` for an
    ///   edge tile whose stored bytes are not a JPEG of the tile's size.
    public func exactJPEGTile(level: Int, column: Int, row: Int) throws(TileError) -> Data? {
        guard store.keepsEncodedTiles else { return nil }
        _ = try checkedTileOffset(level: level, column: column, row: row)
        let (width, height) = geometry.pixelSize(level: level, column: column, row: row)
        if width == geometry.tileSize, height == geometry.tileSize { return try storedJPEGTile(level: level, column: column, row: row) }
        return try store.croppedJPEGTile(level: level, column: column, row: row, width: width, height: height, waitsForDisk: true)
            .map { Data($0) }
    }

    /// An edge tile of ``exactJPEGTile(level:column:row:)`` without waiting for the disk: its stored
    /// bytes read with one `preadv2` with `RWF_NOWAIT`, then cropped here (about 0.1 ms of CPU for a
    /// 256-pixel tile), so an event loop may call it for tiles of 256 pixels or less.
    /// - Returns: the JPEG, or nil when the tile is not an edge tile, when ``exactJPEGTile(level:column:row:)``
    ///   would return nil, or when the page cache does not hold the stored tile.
    /// - Throws: what ``exactJPEGTile(level:column:row:)`` throws.
    public func exactJPEGEdgeTileIfCached(level: Int, column: Int, row: Int) throws(TileError) -> [UInt8]? {
        guard store.isSettled else { return nil }
        _ = try checkedTileOffset(level: level, column: column, row: row)
        let (width, height) = geometry.pixelSize(level: level, column: column, row: row)
        guard width < geometry.tileSize || height < geometry.tileSize else { return nil }
        return try store.croppedJPEGTile(level: level, column: column, row: row, width: width, height: height, waitsForDisk: false)
    }

    /// Where a stored JPEG tile lies, found once (``storedJPEGTileLocation(level:column:row:)``) and read
    /// with ``readStoredJPEGTileIfCached(_:into:)``.
    public struct StoredJPEGTileLocation: Sendable {
        /// The byte count of ``TiledImage/storedJPEGTile(level:column:row:)``'s JPEG (the tile made complete).
        public let byteCount: Int
        /// The store it lies in (kept open while the location is).
        let source: any TileStore
        let level: Int
        let column: Int
        let row: Int
        let tile: (descriptor: Int32, offset: Int, length: Int)

        /// Where the tile's stored bytes lie in the store's TIFF (the bytes a ranged read of a copy of
        /// the file gets, before they are made a whole JPEG).
        public var storedRange: Range<Int> { tile.offset..<(tile.offset + tile.length) }
    }

    /// Where ``storedJPEGTile(level:column:row:)``'s tile lies and its JPEG's byte count, without
    /// reading the tile: `nil` when the image has no JPEG tiles there (a raw pyramid, a TIFF level that
    /// is not JPEG, an image still being built).
    /// - Throws: what ``storedJPEGTile(level:column:row:)`` throws before it reads.
    public func storedJPEGTileLocation(level: Int, column: Int, row: Int) throws(TileError) -> StoredJPEGTileLocation? {
        guard store.isSettled else { return nil }
        _ = try checkedTileOffset(level: level, column: column, row: row)
        return try store.storedJPEGTileLocation(level: level, column: column, row: row)
    }

    /// Reads ``storedJPEGTile(level:column:row:)``'s bytes into `destination` (exactly the location's
    /// ``StoredJPEGTileLocation/byteCount`` bytes) without waiting for the disk: one `preadv2` with
    /// `RWF_NOWAIT`, so an event loop may call it.
    /// - Parameter location: a location of this image's (``storedJPEGTileLocation(level:column:row:)``);
    ///   another image's is refused (false).
    /// - Returns: false when the page cache does not hold the whole tile (read it with
    ///   ``storedJPEGTile(level:column:row:)`` on a thread that may block), or when `destination` is not
    ///   the tile's length.
    /// - Throws: ``TileError/Code/corrupt`` for a tile that is not a JPEG stream.
    public func readStoredJPEGTileIfCached(_ location: StoredJPEGTileLocation, into destination: UnsafeMutableRawBufferPointer)
        throws(TileError) -> Bool
    {
        guard location.source === store else { return false }
        return try store.readStoredJPEGTileIfCached(location, into: destination)
    }

    /// How a level's tiles are stored: raw RGBA, or a TIFF's compression. `nil` for a level that does
    /// not exist.
    public func tileCoding(ofLevel level: Int) -> TileCoding? {
        geometry.levels.indices.contains(level) ? store.coding(ofLevel: level) : nil
    }
}

/// A tiled TIFF's tiles (``TIFFSource``: a file, or the TIFF being built): each read one `pread` and,
/// for pixels, one decode; JPEG tiles also sent as they are stored, or cropped without decoding.
final class TIFFTileStore: TileStore {
    let source: TIFFSource
    let geometry: TileGeometry
    /// The TIFF file's descriptor (or the build's files), owned here.
    let files: LevelFiles
    /// The store's folder or file, for messages.
    let storePath: String?

    init(source: TIFFSource, geometry: TileGeometry, files: LevelFiles, storePath: String?) {
        (self.source, self.geometry, self.files, self.storePath) = (source, geometry, files, storePath)
    }

    func coding(ofLevel level: Int) -> TileCoding { TileCoding(tiffCompression: Int(source.levels[level].compression)) }

    /// One `pread`, one decode, then the padding beyond the level zeroed as raw tiles have it.
    func readTile(level: Int, column: Int, row: Int, into destination: UnsafeMutableRawPointer) throws(TileError) {
        let side = geometry.tileSize
        try source.decode(level: level, column: column, row: row, into: destination, stride: side * 4, path: storePath)
        let (width, height) = geometry.pixelSize(level: level, column: column, row: row)
        if width < side {
            for y in 0..<height { (destination + (y * side + width) * 4).initializeMemory(as: UInt8.self, repeating: 0, count: (side - width) * 4) }
        }
        if height < side {
            (destination + height * side * 4).initializeMemory(as: UInt8.self, repeating: 0, count: (side - height) * side * 4)
        }
    }

    /// Its tiles' bytes written so far, or the file's size.
    var bytesWritten: Int { source.byteCount }
    var totalByteCount: Int { source.fileByteCount }
    var estimatedByteCount: Int {
        TileBuilder.storeByteEstimate(geometry, tiff: true, webpLossless: source.isWebP(level: 0) ? false : nil)
    }

    /// A TIFF's tiles are appended: the whole file so far is written data.
    func flushWrittenData() throws(TileError) {
        for fd in files.descriptors {
            guard fdatasync(fd) == 0 else { throw SystemCall.error("cannot sync the TIFF", path: storePath) }
            _ = posix_fadvise(fd, 0, 0, Int32(POSIX_FADV_DONTNEED))
        }
    }

    var keepsEncodedTiles: Bool { true }
    var isSettled: Bool { source.backing.isSettled }
    var isLevelZeroCopied: Bool { source.isLevelZeroCopied }

    func storedJPEGTile(level: Int, column: Int, row: Int) throws(TileError) -> [UInt8]? {
        try source.completeJPEG(level: level, column: column, row: row, path: storePath)
    }

    func storedWebPTile(level: Int, column: Int, row: Int) throws(TileError) -> [UInt8]? {
        try source.storedWebP(level: level, column: column, row: row, path: storePath)
    }

    func croppedJPEGTile(level: Int, column: Int, row: Int, width: Int, height: Int, waitsForDisk: Bool) throws(TileError) -> [UInt8]? {
        try source.croppedJPEG(level: level, column: column, row: row, width: width, height: height, path: storePath, waitsForDisk: waitsForDisk)
    }

    func storedJPEGTileLocation(level: Int, column: Int, row: Int) throws(TileError) -> TiledImage.StoredJPEGTileLocation? {
        guard let (length, tile) = try source.completeJPEGLength(level: level, column: column, row: row) else { return nil }
        return TiledImage.StoredJPEGTileLocation(byteCount: length, source: self, level: level, column: column, row: row, tile: tile)
    }

    func readStoredJPEGTileIfCached(_ location: TiledImage.StoredJPEGTileLocation, into destination: UnsafeMutableRawBufferPointer)
        throws(TileError) -> Bool
    {
        try source.readCompleteJPEGIfCached(
            level: location.level, column: location.column, row: location.row, tile: location.tile, length: location.byteCount, into: destination)
    }
}

extension TiledImage {
    /// Opens the TIFF of a TIFF store and checks it against the store's manifest.
    static func openTIFFStore(_ path: String, _ manifest: StoreManifest) throws(TileError) -> TiledImage {
        guard manifest.formatVersion == StoreManifest.tiffFormatVersion, let details = manifest.tiff,
            !details.file.contains("/")
        else { throw TileError(.invalidStore, "\(path): store format \(manifest.formatVersion) is not supported") }
        let image = try openTIFF(
            file: "\(path)/\(details.file)", storePath: path, isLevelZeroCopied: details.levelZero == "copied",
            storeHold: FolderLock(sharing: path))
        let sizes = image.geometry.levels.map { StoreManifest.Level(storedWidth: $0.width, storedHeight: $0.height) }
        guard sizes == manifest.levels, manifest.tileSize == image.geometry.tileSize else {
            throw TileError(.invalidStore, "\(path): the TIFF's levels do not match the manifest's")
        }
        return image
    }
}
