import ArgumentParser
import Foundation
import TileCore

#if canImport(Glibc)
import Glibc
#endif

struct RenderCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "render", abstract: "Write one whole level as a binary PPM (P6), upright.")

    @Argument(
        help: "A master (JPEG, PNG, TIFF, JPEG 2000; - for standard input), a store folder written by `tiler build --out`, or a tiled pyramidal TIFF."
    )
    var input: String

    @Option(help: "The level: 0 is full resolution, as numbered by `tiler build` and `tiler info`.")
    var level = 0

    @Option(help: "The PPM file to write.")
    var out: String

    @OptionGroup var decode: DecodeOptions

    func validate() throws {
        guard level >= 0 else { throw ValidationError("--level must be 0 or more, not \(level).") }
        try checkOutputExtension(out, ["ppm", "pnm"], writes: "a binary PPM")
    }

    func run() throws {
        do {
            if isSameFile(input, out) {
                throw TileError(.invalidArgument, "\(out) is the input; it would be overwritten")
            }
            // A store or a tiled pyramidal TIFF is read; a master (a JPEG, PNG, JPEG 2000, a TIFF of strips) is built.
            let image = try openPyramid(input, orientation: decode.orientation.option) ?? buildLevels(upTo: level)
            guard level < image.levelCount else { throw Self.noSuchLevel(level, count: image.levelCount) }
            try writePPM(image, level: level, to: out)
        } catch {
            throw fail(input, error)
        }
    }

    static func noSuchLevel(_ level: Int, count: Int) -> TileError {
        TileError(.invalidArgument, "level \(level) does not exist (the pyramid has \(count) level\(count == 1 ? "" : "s"), 0...\(count - 1))")
    }

    /// Builds only the levels down to `level`, after checking, once the header is read, that the
    /// pyramid `tiler build` makes has that level (so both count levels alike).
    private func buildLevels(upTo level: Int) throws -> TiledImage {
        var options = decode.buildOptions()
        options.levels = .count(min(level, 64) + 1)  // no pyramid has more (and Int.max + 1 would trap)
        let file = try InputFile(path: input)
        let builder = try TileBuilder(options: options)
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var checked = false
        while !builder.isComplete {
            let n = try buffer.withUnsafeMutableBytes { try file.read(into: $0) }
            if n == 0 { break }
            try buffer.withUnsafeBytes { try builder.append(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            if !checked, let g = builder.image?.geometry {
                checked = true
                let count = try TileGeometry(
                    storedWidth: g.storedWidth, storedHeight: g.storedHeight, orientation: g.orientation,
                    tileSize: g.tileSize
                ).levels.count
                if level >= count {
                    builder.cancel()
                    throw Self.noSuchLevel(level, count: count)
                }
            }
        }
        return try builder.finish()
    }
}

/// Writes a level as P6 through ``AtomicFile``: a temporary file beside `path`, created exclusively,
/// synced and renamed into place, so a failure leaves nothing behind and never a half-written file.
func writePPM(_ image: TiledImage, level: Int, to path: String) throws {
    let l = try image.level(level)
    let file = try AtomicFile(path: path)
    try file.write(Data("P6\n\(l.width) \(l.height)\n255\n".utf8))
    var rgb = [UInt8](repeating: 0, count: l.width * 3)
    try image.forEachRow(level: level) { _, row in
        for x in 0..<l.width {
            rgb[x * 3] = row[x * 4]
            rgb[x * 3 + 1] = row[x * 4 + 1]
            rgb[x * 3 + 2] = row[x * 4 + 2]
        }
        try file.write(rgb)
    }
    try file.commit()
}
