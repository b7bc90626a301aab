import ArgumentParser
import Foundation
import TileCore

struct RenderCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "render", abstract: "Write one whole level as a binary PPM (P6), upright.")

    @Argument(help: "A JPEG file, or a store folder written by `tiler build --out`.")
    var input: String

    @Option(help: "The level: 0 is full resolution.")
    var level = 0

    @Option(help: "The PPM file to write.")
    var out: String

    @OptionGroup var decode: DecodeOptions

    func run() throws {
        do {
            let image: TiledImage
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: input, isDirectory: &isDirectory), isDirectory.boolValue {
                image = try TiledImage.open(store: input)
            } else {
                var options = decode.buildOptions()
                options.levels = .count(level + 1)
                image = try TileBuilder.build(contentsOfFile: input, options: options)
            }
            guard level < image.levelCount else {
                throw TileError(.invalidArgument, "level \(level) does not exist (the pyramid has \(image.levelCount))")
            }
            try writePPM(image, level: level, to: out)
        } catch {
            throw fail(input, error)
        }
    }
}

/// Writes a level as P6 through a temporary file renamed into place.
func writePPM(_ image: TiledImage, level: Int, to path: String) throws {
    let l = image.level(level)
    let temporary = path + ".partial-\(ProcessInfo.processInfo.processIdentifier)"
    guard FileManager.default.createFile(atPath: temporary, contents: nil),
        let handle = FileHandle(forWritingAtPath: temporary)
    else { throw TileError(.io, "cannot create \(temporary)") }
    do {
        try handle.write(contentsOf: Data("P6\n\(l.width) \(l.height)\n255\n".utf8))
        var rgb = Data(count: l.width * 3)
        try image.forEachRow(level: level) { _, row in
            rgb.withUnsafeMutableBytes { (out: UnsafeMutableRawBufferPointer) in
                for x in 0..<l.width {
                    out[x * 3] = row[x * 4]
                    out[x * 3 + 1] = row[x * 4 + 1]
                    out[x * 3 + 2] = row[x * 4 + 2]
                }
            }
            try handle.write(contentsOf: rgb)
        }
        try handle.close()
        guard rename(temporary, path) == 0 else { throw TileError(.io, "cannot rename \(temporary) to \(path)") }
    } catch {
        try? handle.close()
        unlink(temporary)
        throw error
    }
}
