/// How many levels a pyramid has.
public enum LevelPolicy: Sendable, Hashable {
    /// Down to the first level that fits in one tile. The default.
    case downToOneTile
    /// Down to the first level that fits a view of this size (display orientation, pixels).
    case fitting(width: Int, height: Int)
    /// Exactly this many levels (clamped to at least 1, and to the levels that have a pixel).
    case count(Int)
}

/// One level of a pyramid: its size in display orientation, its tile grid and its stored layout.
public struct PyramidLevel: Sendable, Hashable {
    /// 0 is the full-resolution image; each level is half the one above, rounded up.
    public let index: Int
    /// Size in display orientation.
    public let width: Int
    public let height: Int
    /// Tile grid in display orientation.
    public let columns: Int
    public let rows: Int
    /// Size, tile grid and placement of the image in stored (source) orientation.
    let storedWidth: Int
    let storedHeight: Int
    let storedColumns: Int
    let storedRows: Int
    let storedXOffset: Int
    let storedYOffset: Int

    /// Number of tiles.
    public var tileCount: Int { columns * rows }
}

/// The geometry of a tile pyramid: level sizes, tile grids and where each tile lives in its file.
///
/// Every public coordinate is in display orientation. Level k is `ceil(size / 2^k)` on each side.
/// Files keep the stored orientation; an image is placed against the right and/or bottom edge of its
/// padded grid where the orientation flips it, so that padding is right and bottom once displayed.
public struct TileGeometry: Sendable, Hashable {
    /// Size of the stored image (as in the JPEG's frame header).
    public let storedWidth: Int
    public let storedHeight: Int
    /// Orientation applied to every read.
    public let orientation: ImageOrientation
    /// Tile side in pixels (256 unless set).
    public let tileSize: Int
    /// The levels, level 0 first.
    public let levels: [PyramidLevel]
    /// The orientation whose flips placed the image in its padded grid (the build's): the same as
    /// ``orientation`` unless a store is reopened with another one.
    let placement: ImageOrientation

    /// Whether each display tile is one stored tile, transformed (the image sits where the display
    /// orientation needs its padding: right and bottom). Else a display tile is assembled from the
    /// up to four stored tiles it straddles.
    var readsWholeTiles: Bool {
        placement.flipsStoredX == orientation.flipsStoredX && placement.flipsStoredY == orientation.flipsStoredY
    }

    /// Bytes of one tile: `tileSize * tileSize * 4`.
    public var tileByteCount: Int { tileSize * tileSize * 4 }
    /// Display size of level 0.
    public var width: Int { levels[0].width }
    public var height: Int { levels[0].height }

    /// DeepZoom's number for the full-size level: DeepZoom numbers levels up from 1x1, each twice the
    /// one below (rounded up), so this is the number of halvings from the display size down to 1x1.
    public var deepZoomTopLevel: Int {
        var top = 0
        while (width - 1) >> top > 0 || (height - 1) >> top > 0 { top += 1 }
        return top
    }

    /// Computes the geometry of an image.
    /// - Parameters:
    ///   - storedWidth: width as stored in the JPEG, at least 1.
    ///   - storedHeight: height as stored, at least 1.
    ///   - orientation: the display orientation (default identity).
    ///   - tileSize: tile side, 16...4096 (default 256).
    ///   - policy: how many levels (default ``LevelPolicy/downToOneTile``).
    /// - Throws: ``TileError/Code/invalidArgument`` for sizes out of range.
    public init(
        storedWidth: Int, storedHeight: Int, orientation: ImageOrientation = .identity, tileSize: Int = 256,
        levels policy: LevelPolicy = .downToOneTile
    ) throws(TileError) {
        try self.init(
            storedWidth: storedWidth, storedHeight: storedHeight, orientation: orientation, placement: orientation,
            tileSize: tileSize, levels: policy)
    }

    /// As the public initializer, with the image placed in its padded grid as `placement` places it.
    init(
        storedWidth: Int, storedHeight: Int, orientation: ImageOrientation, placement: ImageOrientation, tileSize: Int,
        levels policy: LevelPolicy
    ) throws(TileError) {
        guard storedWidth > 0, storedHeight > 0, storedWidth <= 1 << 20, storedHeight <= 1 << 20 else {
            throw TileError(.invalidArgument, "image size \(storedWidth)x\(storedHeight) is out of range")
        }
        guard (16...4096).contains(tileSize) else {
            throw TileError(.invalidArgument, "tile size \(tileSize) is not within 16...4096")
        }
        self.storedWidth = storedWidth
        self.storedHeight = storedHeight
        self.orientation = orientation
        self.placement = placement
        self.tileSize = tileSize
        let count = Self.levelCount(storedWidth, storedHeight, orientation, tileSize, policy)
        levels = (0..<count).map { Self.level($0, storedWidth, storedHeight, orientation, placement, tileSize) }
    }

    private static func levelCount(
        _ width: Int, _ height: Int, _ orientation: ImageOrientation, _ tileSize: Int, _ policy: LevelPolicy
    ) -> Int {
        let (displayWidth, displayHeight) = orientation.swapsAxes ? (height, width) : (width, height)
        var maximum = 1  // levels until both sides are 1 pixel
        while (displayWidth - 1) >> (maximum - 1) > 0 || (displayHeight - 1) >> (maximum - 1) > 0 { maximum += 1 }
        func fits(_ k: Int, _ w: Int, _ h: Int) -> Bool {
            ceilShift(displayWidth, k) <= max(w, 1) && ceilShift(displayHeight, k) <= max(h, 1)
        }
        switch policy {
        case .downToOneTile:
            return (0..<maximum).first { fits($0, tileSize, tileSize) }.map { $0 + 1 } ?? maximum
        case .fitting(let w, let h):
            return (0..<maximum).first { fits($0, w, h) }.map { $0 + 1 } ?? maximum
        case .count(let n):
            return min(max(n, 1), maximum)
        }
    }

    private static func level(
        _ k: Int, _ width: Int, _ height: Int, _ orientation: ImageOrientation, _ placement: ImageOrientation,
        _ tileSize: Int
    ) -> PyramidLevel {
        let w = ceilShift(width, k)
        let h = ceilShift(height, k)
        let columns = (w + tileSize - 1) / tileSize
        let rows = (h + tileSize - 1) / tileSize
        let swap = orientation.swapsAxes
        return PyramidLevel(
            index: k, width: swap ? h : w, height: swap ? w : h, columns: swap ? rows : columns,
            rows: swap ? columns : rows, storedWidth: w, storedHeight: h, storedColumns: columns, storedRows: rows,
            storedXOffset: placement.flipsStoredX ? columns * tileSize - w : 0,
            storedYOffset: placement.flipsStoredY ? rows * tileSize - h : 0)
    }

    /// The stored tile that holds display tile (column, row) of a level.
    func storedTile(level: PyramidLevel, column: Int, row: Int) -> (column: Int, row: Int) {
        let p = orientation.storedPosition(
            ofDisplay: column, row, width: level.storedColumns, height: level.storedRows)
        return (p.x, p.y)
    }

    /// The pixels of display tile (column, row) of a level that lie in the image (an edge tile's are
    /// fewer than the tile size).
    func pixelSize(level: Int, column: Int, row: Int) -> (width: Int, height: Int) {
        let l = levels[level]
        return (min(tileSize, l.width - column * tileSize), min(tileSize, l.height - row * tileSize))
    }

    /// Byte offset of display tile (column, row) in its level's file.
    /// - Throws: ``TileError/Code/invalidArgument`` for a level or tile outside the pyramid.
    public func tileByteOffset(level: Int, column: Int, row: Int) throws(TileError) -> Int {
        let l = try checkedLevel(level)
        guard (0..<l.columns).contains(column), (0..<l.rows).contains(row) else {
            throw TileError(.invalidArgument, "tile (\(column), \(row)) is outside level \(level)'s \(l.columns)x\(l.rows) grid")
        }
        let stored = storedTile(level: l, column: column, row: row)
        return (stored.row * l.storedColumns + stored.column) * tileByteCount
    }

    /// Bytes of a level's file.
    /// - Throws: ``TileError/Code/invalidArgument`` for a level outside the pyramid.
    public func fileByteCount(level: Int) throws(TileError) -> Int { byteCount(ofLevel: try checkedLevel(level).index) }

    /// Bytes of the file of a level known to exist.
    func byteCount(ofLevel level: Int) -> Int { levels[level].tileCount * tileByteCount }

    /// Level `index`, or ``TileError/Code/invalidArgument`` naming the levels there are.
    func checkedLevel(_ index: Int) throws(TileError) -> PyramidLevel {
        guard levels.indices.contains(index) else {
            throw TileError(.invalidArgument, "level \(index) does not exist (the pyramid has levels 0...\(levels.count - 1))")
        }
        return levels[index]
    }
}

/// `ceil(value / 2^shift)` for positive values.
@inline(__always)
func ceilShift(_ value: Int, _ shift: Int) -> Int { (value + (1 << shift) - 1) >> shift }
