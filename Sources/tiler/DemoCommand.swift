import ArgumentParser
import Foundation
import TileCore

struct DemoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Tile an embedded default image (generated in code, encoded with libjpeg) and print the pyramid.")

    @Option(help: "Width of the generated image.")
    var width = 8192

    @Option(help: "Height of the generated image.")
    var height = 6144

    @Option(help: "Bytes per chunk pushed into the builder, as if they arrived over a network.")
    var chunkSize = 256 * 1024

    @OptionGroup var decode: DecodeOptions

    func run() throws {
        let clock = ContinuousClock()
        do {
            var start = clock.now
            let jpeg = try DemoImage.jpeg(width: width, height: height)
            let encodeTime = clock.now - start
            print(String(format: "demo image: %dx%d, %.1f MB JPEG, encoded in %.3f s", width, height, Double(jpeg.count) / 1e6, seconds(encodeTime)))
            start = clock.now
            let builder = try TileBuilder(options: decode.buildOptions())
            var offset = 0
            while offset < jpeg.count {
                let end = min(offset + chunkSize, jpeg.count)
                try builder.append(jpeg[offset..<end])
                offset = end
            }
            let image = try builder.finish()
            printSummary(image, buildTime: clock.now - start, warnings: builder.warningCount, lastWarning: builder.lastWarning)
        } catch {
            throw fail("demo", error)
        }
    }
}
