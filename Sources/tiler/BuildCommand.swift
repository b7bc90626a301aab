import ArgumentParser
import Foundation
import TileActors
import TileCore
import TileNetwork

#if canImport(Glibc)
import Glibc
#endif

struct BuildCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "build",
        abstract: "Build the tile pyramids of one or more JPEGs and print their summaries.",
        discussion: """
            With one input, --out names the store folder itself. With several, --out is a folder that
            receives one store per input, named <input file name>.tiles. Without --out, pyramids are
            ephemeral (in $TMPDIR) and vanish when the command ends.
            """)

    @Argument(help: "The JPEG files, or http(s) URLs (downloaded and tiled as the bytes arrive).")
    var inputs: [String]

    @Option(help: "Write persistent stores (see below) instead of ephemeral files.")
    var out: String?

    @Option(help: "Images built at once.")
    var jobs = 4

    @OptionGroup var decode: DecodeOptions

    func run() async throws {
        let options = decode.buildOptions()
        let inputs = self.inputs
        let out = self.out
        if let out, inputs.count > 1 {
            try? FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        }
        let sources: [any ImageSource] = inputs.map { input -> any ImageSource in
            if input.hasPrefix("http://") || input.hasPrefix("https://") { return HTTPImageSource(url: input) }
            return FileImageSource(path: input)
        }
        // A progress line on a terminal only.
        let progress: (@Sendable (Int, ImageBuilder.Progress) -> Void)? = isatty(2) == 1 ? printProgress : nil
        let report = await ImageLoader(maximumConcurrency: jobs).load(sources, options: { index in
            var o = options
            if let out {
                let name = (inputs[index] as NSString).lastPathComponent
                o.storage = .persistent(path: inputs.count == 1 ? out : "\(out)/\(name).tiles")
            }
            return o
        }, onProgress: progress)
        if progress != nil { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
        var failed = false
        for result in report.images {
            switch result.result {
            case .success(let image):
                if inputs.count == 1 { printSummary(image, buildTime: result.wallTime, warnings: result.warningCount, lastWarning: result.lastWarning) }
                let megabytes = Double(image.totalByteCount) / 1_048_576
                print(String(
                    format: "%@: %dx%d, %d levels, decode %.3f s, wall %.3f s, %.1f MiB", inputs[result.index],
                    image.geometry.width, image.geometry.height, image.levelCount, seconds(result.decodeTime),
                    seconds(result.wallTime), megabytes))
            case .failure(let error):
                failed = true
                _ = fail(inputs[result.index], error)
            }
        }
        print(String(
            format: "batch: %d images, %d failed, %.3f s from first start to last finish, average decode %.3f s",
            report.images.count, report.failures.count, seconds(report.wallTime), seconds(report.averageDecodeTime)))
        if failed { throw ExitCode.failure }
    }
}

/// One progress line on stderr, rewritten in place.
@Sendable func printProgress(_ index: Int, _ p: ImageBuilder.Progress) {
    let total = p.expectedBytes.map { String(format: " / %.1f", Double($0) / 1e6) } ?? ""
    let rows = p.height.map { "\(p.rowsDecoded)/\($0)" } ?? "\(p.rowsDecoded)"
    let levels = p.levelTileRowsComplete.map(String.init).joined(separator: ",")
    let megabytes = String(format: "%.1f", Double(p.bytesReceived) / 1e6)
    let line = "\r[\(index)] \(megabytes)\(total) MB, rows \(rows), tile rows per level \(levels)\u{1B}[K"
    FileHandle.standardError.write(Data(line.utf8))
}
