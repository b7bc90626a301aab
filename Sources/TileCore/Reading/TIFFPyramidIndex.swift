/// A TIFF pyramid known by its directories alone, read from parts of its bytes (a remote object's,
/// fetched by ranges): its geometry, where each stored tile lies in the file, and how a stored JPEG
/// tile becomes the whole JPEG that ``TiledImage/storedJPEGTile(level:column:row:)`` gives for the
/// same file. Its owner reads the tiles.
package final class TIFFPyramidIndex: Sendable {
    /// The pyramid's levels and tiles, as ``TiledImage/open(tiff:)`` finds them in the same file.
    package let geometry: TileGeometry
    private let source: TIFFSource

    /// What parts of a TIFF give: its index, or the range of the file libtiff wants next.
    package enum Opening: Sendable {
        case index(TIFFPyramidIndex)
        case needs(Range<Int>)
    }

    private init(geometry: TileGeometry, source: TIFFSource) {
        (self.geometry, self.source) = (geometry, source)
    }

    /// Reads the directories of a TIFF of `byteCount` bytes from `parts`: its bytes at their offsets,
    /// sorted by offset and not overlapping, touching ones read as one (the ranges fetched so far).
    /// - Returns: the index, or the first range wanted outside `parts` (fetch it, add it, call again).
    /// - Throws: ``TileError/Code/invalidStore`` when the bytes are not a tiled TIFF,
    ///   ``TileError/Code/unsupported`` for tiles that are not read, ``TileError/Code/tooLarge``.
    package static func open(parts: [(offset: Int, bytes: [UInt8])], byteCount: Int, name: String) throws(TileError) -> Opening {
        switch try TIFFFileReader.open(parts: parts, byteCount: byteCount, name: name) {
        case .needs(let range):
            return .needs(range)
        case .reader(let reader):
            let (levels, geometry) = try TIFFSource.pyramid(of: reader, path: name)
            let source = TIFFSource(levels: levels, backing: .file(reader), colorProfile: reader.colorProfile)
            return .index(TIFFPyramidIndex(geometry: geometry, source: source))
        }
    }

    /// Whether the TIFF carries a colour profile (an ICC profile its whole JPEG tiles carry too), as
    /// ``TiledImage/colorProfile`` says of the same store on a disk.
    package var hasColorProfile: Bool { source.colorProfile != nil }

    /// Whether `level`'s tiles are JPEG: their stored bytes are sent made whole
    /// (``completeJPEG(level:column:row:stored:)``).
    package func isJPEG(level: Int) -> Bool { geometry.levels.indices.contains(level) && source.isJPEG(level: level) }

    /// Where a tile's stored bytes lie in the file.
    /// - Throws: ``TileError/Code/invalidArgument`` outside the pyramid, ``TileError/Code/corrupt`` for a
    ///   tile the directory places past the end of the file or makes absurdly large.
    package func tileRange(level: Int, column: Int, row: Int) throws(TileError) -> Range<Int> {
        let l = try geometry.checkedLevel(level)
        guard (0..<l.columns).contains(column), (0..<l.rows).contains(row) else {
            throw TileError(.invalidArgument, "tile (\(column), \(row)) is outside level \(level)'s \(l.columns)x\(l.rows) grid")
        }
        let location = try source.locate(level: level, column: column, row: row)
        return location.offset..<(location.offset + location.length)
    }

    /// A stored JPEG tile's bytes (read from ``tileRange(level:column:row:)``) made a whole JPEG.
    /// - Throws: ``TileError/Code/corrupt`` for bytes that do not start a JPEG stream.
    package func completeJPEG(level: Int, column: Int, row: Int, stored: [UInt8]) throws(TileError) -> [UInt8] {
        try source.completeJPEG(level: level, column: column, row: row, stored: stored)
    }
}
