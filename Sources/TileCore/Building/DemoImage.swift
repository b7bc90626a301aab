public import Foundation

/// A synthetic picture, generated in code and encoded with libjpeg: the demo's default input and the
/// benchmarks' fallback when no large photo is at hand.
///
/// Gradients, concentric rings and a grid, so that every zoom level looks different.
public enum DemoImage {
    /// Encodes a `width` x `height` picture as a baseline 4:2:0 JPEG, a strip of rows at a time
    /// (memory: the strip and the compressed output).
    /// - Throws: ``TileError/Code/invalidArgument`` for sizes libjpeg cannot encode.
    public static func jpeg(width: Int = 8192, height: Int = 6144, quality: Int = 85) throws(TileError) -> Data {
        var options = JPEGEncoder.Options()
        options.quality = quality
        let encoder = try JPEGEncoder(width: width, height: height, options: options)
        let stripRows = 64
        let strip = UnsafeMutableBufferPointer<UInt32>.allocate(capacity: width * stripRows)
        defer { strip.deallocate() }
        var y = 0
        while y < height {
            let rows = min(stripRows, height - y)
            for r in 0..<rows { fillRow(strip.baseAddress! + r * width, y: y + r, width: width, height: height) }
            try encoder.writeRows(UnsafeRawBufferPointer(strip), stride: width * 4, count: rows)
            y += rows
        }
        return try encoder.finish()
    }

    private static func fillRow(_ row: UnsafeMutablePointer<UInt32>, y: Int, width: Int, height: Int) {
        let cx = width / 2, cy = height / 2
        let dy = y - cy
        let g = UInt32(truncatingIfNeeded: y * 255 / max(height - 1, 1))
        let onGridRow = y % 512 < 4
        for x in 0..<width {
            let dx = x - cx
            let ring = UInt32(truncatingIfNeeded: ((dx * dx + dy * dy) >> 11)) & 0xFF
            let r = UInt32(truncatingIfNeeded: x * 255 / max(width - 1, 1))
            let grid = onGridRow || x % 512 < 4
            let pixel: UInt32 = grid ? 0xFFFF_FFFF : 0xFF00_0000 | ring << 16 | g << 8 | r
            row[x] = pixel
        }
    }
}
