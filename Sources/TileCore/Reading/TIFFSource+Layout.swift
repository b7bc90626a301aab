internal import CJpegShim

extension TIFFSource {
    /// The pyramid in a TIFF's tiled directories: the full-resolution image (the first directory
    /// that is not marked reduced), then each directory half its size (rounded down or up, as libvips
    /// and this package round), whether successive IFDs or SubIFDs. Levels stop at the first size
    /// with no such directory.
    /// - Throws: ``TileError/Code/unsupported`` for a full-resolution image whose tiles are not read
    ///   (not square, not 16...4096, not 8-bit gray/RGB/RGBA or JPEG), ``TileError/Code/tooLarge``
    ///   past 2^20 pixels a side.
    static func pyramid(of reader: TIFFFileReader, path: String) throws(TileError)
        -> (levels: [Level], geometry: TileGeometry)
    {
        let directories = reader.directories
        guard let first = directories.indices.first(where: { directories[$0].is_reduced == 0 }) ?? directories.indices.first
        else { throw TileError(.invalidStore, "\(path) has no tiled image") }
        try checkReadable(directories[first], path: path)
        var chosen = [first]
        while true {
            let above = directories[chosen.last!]
            guard above.width > 1 || above.height > 1 else { break }
            let next = directories.indices.first { index in
                let d = directories[index]
                return !chosen.contains(index) && halves(above.width, d.width) && halves(above.height, d.height)
                    && d.tile_width == above.tile_width && d.tile_height == above.tile_height
                    && (try? checkReadable(d, path: path)) != nil
            }
            guard let next else { break }
            chosen.append(next)
        }
        let levels = chosen.map { index in
            let d = directories[index]
            return Level(
                directory: UInt32(index), width: Int(d.width), height: Int(d.height), tileWidth: Int(d.tile_width),
                tileHeight: Int(d.tile_height), columns: Int(d.columns), rows: Int(d.rows), compression: d.compression,
                photometric: d.photometric, tables: reader.tables(index))
        }
        let geometry = try TileGeometry(
            uprightLevels: levels.map { ($0.width, $0.height) }, tileSize: Int(directories[first].tile_width))
        return (levels, geometry)
    }

    /// Whether `half` is `full` over 2, rounded down or up.
    private static func halves(_ full: UInt32, _ half: UInt32) -> Bool {
        half == full / 2 || half == (full + 1) / 2
    }

    /// Refuses a directory whose tiles this package cannot read.
    private static func checkReadable(_ d: cjs_tiff_directory, path: String) throws(TileError) {
        guard d.width <= 1 << 20, d.height <= 1 << 20 else {
            throw TileError(.tooLarge, "\(path): \(d.width)x\(d.height) is over 2^20 pixels a side")
        }
        guard d.tile_width == d.tile_height, (16...4096).contains(d.tile_width) else {
            throw TileError(.unsupported, "\(path): tiles of \(d.tile_width)x\(d.tile_height) are not read (square, 16...4096)")
        }
        guard d.bits_per_sample == 8, d.planar == 1 else {
            throw TileError(.unsupported, "\(path): only 8-bit samples in one plane are read")
        }
        let gray = d.photometric == 0 || d.photometric == 1
        let spp = d.samples_per_pixel
        if d.compression == Int32(CJS_COMPRESSION_JPEG.rawValue) {
            guard (gray && spp == 1) || ((d.photometric == 2 || d.photometric == 6) && spp == 3) else {
                throw TileError(.unsupported, "\(path): JPEG tiles of photometric \(d.photometric), \(spp) samples are not read")
            }
            return
        }
        if d.compression == Int32(CJS_COMPRESSION_WEBP.rawValue) {
            guard d.photometric == 2, spp == 3 || (spp == 4 && d.has_alpha != 0) else {
                throw TileError(.unsupported, "\(path): WebP tiles of photometric \(d.photometric), \(spp) samples are not read")
            }
            return
        }
        let codings: [Int32] = [1, 5, 8, 32946]
        guard codings.contains(d.compression) else {
            throw TileError(.unsupported, "\(path): compression \(d.compression) is not read (JPEG, WebP, deflate, LZW, none)")
        }
        let alpha = d.has_alpha != 0
        guard (gray && (spp == 1 || (spp == 2 && alpha))) || (d.photometric == 2 && (spp == 3 || (spp == 4 && alpha)))
        else { throw TileError(.unsupported, "\(path): photometric \(d.photometric) with \(spp) samples is not read") }
    }
}
