extension TileGeometry {
    /// The geometry of an upright pyramid whose level sizes are given (a TIFF's: libvips rounds each
    /// half-size level down where this package rounds up, so level k is `floor` or `ceil` of the one
    /// above over 2). Orientation identity; no padding offset.
    /// - Throws: ``TileError/Code/invalidArgument`` for sizes or a tile size out of range.
    init(uprightLevels sizes: [(width: Int, height: Int)], tileSize: Int) throws(TileError) {
        guard let first = sizes.first, first.width > 0, first.height > 0, first.width <= 1 << 20, first.height <= 1 << 20
        else { throw TileError(.invalidArgument, "image size is out of range") }
        guard (16...4096).contains(tileSize) else {
            throw TileError(.invalidArgument, "tile size \(tileSize) is not within 16...4096")
        }
        storedWidth = first.width
        storedHeight = first.height
        orientation = .identity
        placement = .identity
        self.tileSize = tileSize
        levels = sizes.enumerated().map { index, size in
            let columns = (size.width + tileSize - 1) / tileSize
            let rows = (size.height + tileSize - 1) / tileSize
            return PyramidLevel(
                index: index, width: size.width, height: size.height, columns: columns, rows: rows,
                storedWidth: size.width, storedHeight: size.height, storedColumns: columns, storedRows: rows,
                storedXOffset: 0, storedYOffset: 0)
        }
    }
}
