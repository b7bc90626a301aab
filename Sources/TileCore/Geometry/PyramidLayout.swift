/// The levels and tiles of an image's pyramid in display orientation, and the one place where tiles
/// are named in URL paths: DeepZoom's (``DeepZoomTileAddress``) and IIIF's (an ``ImageRequest``).
///
/// Level 0 is the full image; level k is `ceil(size / 2^k)` on each side, down to 1x1 (the last of
/// ``levelCount``). A store keeps the levels down to one tile (``TileGeometry``); the smaller ones exist
/// for DeepZoom, which numbers its levels up from 1x1, and are rendered from the store's smallest.
public struct PyramidLayout: Sendable, Hashable {
    /// Display size of level 0.
    public let width: Int
    public let height: Int
    /// Tile side in pixels.
    public let tileSize: Int

    /// A tile of a level, in display orientation.
    public struct Tile: Sendable, Hashable {
        public var level: Int
        public var column: Int
        public var row: Int

        public init(level: Int, column: Int, row: Int) {
            self.level = level
            self.column = column
            self.row = row
        }
    }

    /// - Parameters:
    ///   - width: display width, 1...2^20.
    ///   - height: display height, 1...2^20.
    ///   - tileSize: tile side, 1...8192 (default 256).
    /// - Throws: ``TileError/Code/invalidArgument`` for sizes out of range.
    public init(width: Int, height: Int, tileSize: Int = 256) throws(TileError) {
        guard (1...(1 << 20)).contains(width), (1...(1 << 20)).contains(height) else {
            throw TileError(.invalidArgument, "image size \(width)x\(height) is out of range")
        }
        guard (1...8192).contains(tileSize) else { throw TileError(.invalidArgument, "tile size \(tileSize) is not within 1...8192") }
        self.width = width
        self.height = height
        self.tileSize = tileSize
    }

    /// Levels from full size down to 1x1.
    public var levelCount: Int { deepZoomTopLevel + 1 }

    /// DeepZoom's number for level 0: the halvings from the full size down to 1x1.
    public var deepZoomTopLevel: Int {
        var top = 0
        while (width - 1) >> top > 0 || (height - 1) >> top > 0 { top += 1 }
        return top
    }

    /// The size of `level` (`ceil(size / 2^level)`); 1x1 past the last level.
    public func size(ofLevel level: Int) -> (width: Int, height: Int) {
        let k = min(max(level, 0), deepZoomTopLevel)
        return ((width + (1 << k) - 1) >> k, (height + (1 << k) - 1) >> k)
    }

    /// The tile grid of `level`.
    public func grid(ofLevel level: Int) -> (columns: Int, rows: Int) {
        let (w, h) = size(ofLevel: level)
        return ((w + tileSize - 1) / tileSize, (h + tileSize - 1) / tileSize)
    }

    /// The first level that fits in one tile: IIIF's scale factors stop there.
    public var firstSingleTileLevel: Int {
        (0..<levelCount).first { size(ofLevel: $0).width <= tileSize && size(ofLevel: $0).height <= tileSize } ?? deepZoomTopLevel
    }

    /// Whether `tile` is one of the pyramid's (checked without arithmetic that a hostile number could
    /// overflow).
    public func contains(_ tile: Tile) -> Bool {
        guard (0..<levelCount).contains(tile.level), tile.column >= 0, tile.row >= 0 else { return false }
        let grid = grid(ofLevel: tile.level)
        return tile.column < grid.columns && tile.row < grid.rows
    }

    /// The pixels of `tile` at its level (edge tiles are smaller than the tile size).
    /// - Precondition: ``contains(_:)``.
    public func pixelSize(of tile: Tile) -> (width: Int, height: Int) {
        let (w, h) = size(ofLevel: tile.level)
        return (min(tileSize, w - tile.column * tileSize), min(tileSize, h - tile.row * tileSize))
    }

    /// The region of the full image `tile` shows, in level-0 pixels.
    /// - Precondition: ``contains(_:)``.
    public func region(of tile: Tile) -> (x: Int, y: Int, width: Int, height: Int) {
        let span = tileSize << tile.level
        let (x, y) = (tile.column * span, tile.row * span)
        return (x, y, min(span, width - x), min(span, height - y))
    }

    // MARK: - DeepZoom

    /// The tile a DeepZoom address names, or nil when the pyramid has no such tile.
    public func tile(_ address: DeepZoomTileAddress) -> Tile? {
        guard (0...deepZoomTopLevel).contains(address.level) else { return nil }
        let tile = Tile(level: deepZoomTopLevel - address.level, column: address.column, row: address.row)
        return contains(tile) ? tile : nil
    }

    /// The DeepZoom address of `tile`.
    public func deepZoomAddress(of tile: Tile, format: ImageRequest.Format = .jpg) -> DeepZoomTileAddress {
        DeepZoomTileAddress(level: deepZoomTopLevel - tile.level, column: tile.column, row: tile.row, format: format)
    }

    // MARK: - IIIF

    /// The IIIF request of `tile` as viewers write it: `x,y,w,h/sw,sh/0/default.{format}`.
    /// - Precondition: ``contains(_:)``.
    public func iiifRequest(of tile: Tile, format: ImageRequest.Format = .jpg) -> ImageRequest {
        let r = region(of: tile), s = pixelSize(of: tile)
        return ImageRequest(
            region: .pixels(x: r.x, y: r.y, width: r.width, height: r.height), size: .exactly(width: s.width, height: s.height),
            format: format)
    }

    /// The tile a resolved request asks for exactly (its region is one tile's, at that tile's size,
    /// upright, in colour), or nil when it asks for anything else.
    public func tile(exactly request: ImageRequest.Resolved) -> Tile? {
        guard request.quarterTurns == 0, !request.mirrored, request.quality == .default || request.quality == .color,
            request.width > 0, request.height > 0
        else { return nil }
        for level in 0..<levelCount {
            let span = tileSize << level
            guard request.x % span == 0, request.y % span == 0 else { continue }
            let tile = Tile(level: level, column: request.x / span, row: request.y / span)
            guard contains(tile) else { continue }
            let r = region(of: tile), s = pixelSize(of: tile)
            if r.width == request.width, r.height == request.height, s.width == request.scaledWidth, s.height == request.scaledHeight {
                return tile
            }
        }
        return nil
    }
}

/// A DeepZoom tile's address, `{level}/{column}_{row}.{format}` below `{name}_files/`: levels count up
/// from 1x1 (``PyramidLayout/deepZoomTopLevel`` is the full size).
public struct DeepZoomTileAddress: Sendable, Hashable {
    public var level: Int
    public var column: Int
    public var row: Int
    /// `jpg` or `png`.
    public var format: ImageRequest.Format

    public init(level: Int, column: Int, row: Int, format: ImageRequest.Format = .jpg) {
        self.level = level
        self.column = column
        self.row = row
        self.format = format
    }

    /// Parses `{level}/{column}_{row}.{jpg|png}`; nil for anything else (negative or non-decimal numbers
    /// included).
    public init?(path: some StringProtocol) {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2 else { return nil }
        self.init(level: parts[0], tile: parts[1])
    }

    /// Parses the two segments `{level}` and `{column}_{row}.{jpg|png}`.
    public init?(level: some StringProtocol, tile: some StringProtocol) {
        self.init(level: Substring(level), tile: Substring(tile))
    }

    /// Parses the two segments `{level}` and `{column}_{row}.{jpg|png}` (one `_`, one `.`), byte by
    /// byte: a server's path for every tile request not yet cached.
    public init?(level: Substring, tile: Substring) {
        var (level, tile) = (level, tile)
        guard let address = level.withUTF8({ l in tile.withUTF8 { t in Self(levelBytes: l, tileBytes: t) } }) else { return nil }
        self = address
    }

    /// Parses the two segments `{level}` and `{column}_{row}.{jpg|png}` given as UTF-8 bytes (a
    /// request's path as NIO holds it), as ``init(level:tile:)`` does.
    public init?(levelBytes: UnsafeBufferPointer<UInt8>, tileBytes bytes: UnsafeBufferPointer<UInt8>) {
        guard let dot = bytes.firstIndex(of: UInt8(ascii: ".")), let underscore = bytes.firstIndex(of: UInt8(ascii: "_")),
            underscore < dot
        else { return nil }
        let suffix = UnsafeBufferPointer(rebasing: bytes[(dot + 1)...])
        let format: ImageRequest.Format
        if suffix.elementsEqual("jpg".utf8) { format = .jpg } else if suffix.elementsEqual("png".utf8) { format = .png } else { return nil }
        guard let level = Self.count(levelBytes), let column = Self.count(UnsafeBufferPointer(rebasing: bytes[..<underscore])),
            let row = Self.count(UnsafeBufferPointer(rebasing: bytes[(underscore + 1)..<dot]))
        else { return nil }
        self.init(level: level, column: column, row: row, format: format)
    }

    /// `{level}/{column}_{row}.{format}`.
    public var path: String { "\(level)/\(column)_\(row).\(format.rawValue)" }

    /// A count written in decimal digits only (no sign), at most 9 digits: no pyramid has more.
    private static func count(_ digits: UnsafeBufferPointer<UInt8>) -> Int? {
        guard !digits.isEmpty, digits.count <= 9 else { return nil }
        var value = 0
        for byte in digits {
            guard (48...57).contains(byte) else { return nil }
            value = value * 10 + Int(byte - 48)
        }
        return value
    }
}

extension TileGeometry {
    /// The display layout of this pyramid (its stored levels are the first ``levels`` of it).
    public var layout: PyramidLayout {
        // Sizes and tile size were checked when the geometry was made.
        guard let layout = try? PyramidLayout(width: width, height: height, tileSize: tileSize) else {
            preconditionFailure("a geometry of \(width)x\(height), tile \(tileSize), has no layout")
        }
        return layout
    }
}
