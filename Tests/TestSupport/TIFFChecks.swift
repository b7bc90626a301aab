public import Foundation
public import TileCore

/// Checks of TIFF pyramids against references that are not this package's output.
public enum TIFFChecks {
    /// Options for an ephemeral TIFF build.
    public static func options(_ configure: (inout BuildOptions) -> Void = { _ in }) -> BuildOptions {
        var options = BuildOptions()
        options.format = .tiff()
        configure(&options)
        return options
    }

    /// The mismatches between every level-0 tile's coefficients (libjpeg's `jpeg_read_coefficients`
    /// of the stored tile made whole) and the source's (the same, of the source), over the tile's
    /// blocks that lie within the source's blocks; and the quantisation tables. Empty when level 0 is
    /// the source's coefficients exactly.
    public static func levelZeroMismatches(_ image: TiledImage, source: Data) throws -> [String] {
        let reference = try JPEGCoefficients(source)
        let level = try image.level(0)
        var problems: [String] = []
        for row in 0..<level.rows {
            for column in 0..<level.columns {
                guard let jpeg = try image.storedJPEGTile(level: 0, column: column, row: row) else {
                    return ["level 0 has no stored JPEG tiles"]
                }
                let tile = try JPEGCoefficients(jpeg)
                problems += compare(tile, reference, column: column, row: row)
                if problems.count > 10 { return problems }
            }
        }
        return problems
    }

    private static func compare(_ tile: JPEGCoefficients, _ source: JPEGCoefficients, column: Int, row: Int) -> [String] {
        guard tile.components.count == source.components.count else {
            return ["tile (\(column), \(row)): \(tile.components.count) components, the source has \(source.components.count)"]
        }
        var problems: [String] = []
        for (index, (t, s)) in zip(tile.components, source.components).enumerated() {
            if t.quantisation != s.quantisation { problems.append("tile (\(column), \(row)) component \(index): quantisation differs") }
            let (x0, y0) = (column * t.widthInBlocks, row * t.heightInBlocks)
            for y in 0..<min(t.heightInBlocks, s.heightInBlocks - y0) {
                for x in 0..<min(t.widthInBlocks, s.widthInBlocks - x0) where t.block(x, y) != s.block(x0 + x, y0 + y) {
                    problems.append("tile (\(column), \(row)) component \(index): block (\(x), \(y)) differs")
                    if problems.count > 3 { return problems }
                }
            }
        }
        return problems
    }

    /// `djpeg -nosmooth` of a JPEG as binary PNM (P6 or P5): width, height, channels, samples.
    public static func djpeg(_ jpeg: Data) throws -> (width: Int, height: Int, channels: Int, samples: [UInt8]) {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("tile-\(UUID().uuidString).jpg")
        try jpeg.write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let run = try Tools.run("djpeg", ["-nosmooth", "-pnm", file.path])
        return try parsePNM(run.stdout)
    }

    /// The samples of a binary PNM (P5 or P6, maxval 255).
    public static func parsePNM(_ data: Data) throws -> (width: Int, height: Int, channels: Int, samples: [UInt8]) {
        let bytes = [UInt8](data)
        var fields: [String] = [], index = 0, current = ""
        while fields.count < 4 && index < bytes.count {
            let c = bytes[index]
            index += 1
            if c == 0x23 { while index < bytes.count && bytes[index] != 0x0A { index += 1 }; continue }
            if c == 0x20 || c == 0x0A || c == 0x09 || c == 0x0D {
                if !current.isEmpty { fields.append(current); current = "" }
            } else {
                current.append(Character(UnicodeScalar(c)))
            }
        }
        guard fields.count == 4, let w = Int(fields[1]), let h = Int(fields[2]) else { throw CocoaError(.fileReadCorruptFile) }
        let channels = fields[0] == "P6" ? 3 : 1
        guard bytes.count - index >= w * h * channels else { throw CocoaError(.fileReadCorruptFile) }
        return (w, h, channels, Array(bytes[index..<(index + w * h * channels)]))
    }
}
