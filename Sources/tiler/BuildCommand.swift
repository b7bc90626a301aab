import ArgumentParser
import TileCore

struct BuildCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "build", abstract: "Build the tile pyramid of a JPEG and print its summary.")

    @Argument(help: "The JPEG file.")
    var input: String

    @Option(help: "Write a persistent store folder here instead of ephemeral files.")
    var out: String?

    @OptionGroup var decode: DecodeOptions

    func run() throws {
        var options = decode.buildOptions()
        if let out { options.storage = .persistent(path: out) }
        let clock = ContinuousClock()
        let start = clock.now
        do {
            let builder = try TileBuilder(options: options)
            let image = try feed(input, into: builder)
            printSummary(image, buildTime: clock.now - start, warnings: builder.warningCount, lastWarning: builder.lastWarning)
        } catch {
            throw fail(input, error)
        }
    }
}

/// Streams a file into a builder 1 MiB at a time and finishes it.
func feed(_ path: String, into builder: TileBuilder) throws -> TiledImage {
    guard let handle = FileHandleReader(path: path) else {
        throw TileError(.io, "cannot open the file")
    }
    while let chunk = try handle.next() { try builder.append(chunk) }
    return try builder.finish()
}
