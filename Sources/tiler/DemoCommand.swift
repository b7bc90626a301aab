import ArgumentParser
import Foundation
import Hummingbird
import TileCore
import TileServer

struct DemoCommand: AsyncParsableCommand {
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

    @Flag(help: "Then serve the image and print the viewer's URL (until SIGINT or SIGTERM).")
    var serve = false

    @Option(help: "The port to serve on, with --serve.")
    var port = 8080

    func validate() throws {
        // A chunk of 0 bytes never ended; a negative one trapped.
        guard chunkSize > 0 else { throw ValidationError("--chunk-size must be 1 or more, not \(chunkSize).") }
        guard (0...65535).contains(port) else { throw ValidationError("--port must be 0-65535, not \(port).") }
    }

    func run() async throws {
        try tile()
        if serve { try await serveDemo() }
    }

    /// Writes the demo image into a folder of its own and serves it: the viewer shows it built.
    private func serveDemo() async throws {
        let folder = NSTemporaryDirectory() + "tiler-demo-\(getpid())"
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            try DemoImage.jpeg(width: width, height: height).write(to: URL(fileURLWithPath: "\(folder)/demo.jpg"))
            // A hidden cache folder inside the one served, as `tiler serve`'s default (a visible one is refused).
            let server = try TileServer(root: folder, cache: "\(folder)/.tiler-cache")
            let app = server.application(host: "127.0.0.1", port: port) { channel in
                let port = channel.localAddress?.port ?? 0
                print("open http://127.0.0.1:\(port)/view/demo in a browser (the listing: http://127.0.0.1:\(port)/); Ctrl-C stops")
                fflush(nil)
            }
            defer { try? FileManager.default.removeItem(atPath: folder) }
            try await app.runService()
        } catch let error as TileError {
            throw fail("demo", error)
        }
    }

    private func tile() throws {
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
