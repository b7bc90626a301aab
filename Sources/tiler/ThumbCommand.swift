import ArgumentParser
import Foundation
import TileCore

struct ThumbCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "thumb",
        abstract: "Make an upright resized copy (and thumbnails) of a JPEG in one decode.",
        discussion: """
            --out is a file when only --max-edge is given, else a folder that receives
            <name>-<edge>.jpg for every size.
            """)

    @Argument(help: "The JPEG file.")
    var input: String

    @Option(help: "Longest edge of the resized copy.")
    var maxEdge: Int

    @Option(help: "Further sizes (longest edges), comma-separated, e.g. 256,128.")
    var sizes: String?

    @Option(help: "The output file, or a folder with --sizes.")
    var out: String

    @Option(help: "JPEG quality.")
    var quality = 80

    @Flag(help: "Write progressive JPEGs.")
    var progressive = false

    @Option(help: "Display orientation: auto (the EXIF tag), none (as stored), or 1...8.")
    var orientation: OrientationArgument = .auto

    func run() throws {
        let extra = (sizes ?? "").split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        let edges = [maxEdge] + extra
        guard edges.allSatisfy({ $0 > 0 }) else { throw fail(input, TileError(.invalidArgument, "sizes must be positive")) }
        let base = ((input as NSString).lastPathComponent as NSString).deletingPathExtension
        let targets = edges.map { edge in
            ImageResizer.Target(maxEdge: edge, path: extra.isEmpty ? out : "\(out)/\(base)-\(edge).jpg")
        }
        if !extra.isEmpty { try? FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true) }
        var options = ImageResizer.Options()
        options.quality = quality
        options.progressive = progressive
        options.orientation = orientation.option
        let clock = ContinuousClock()
        let start = clock.now
        do {
            let results = try ImageResizer.resize(contentsOfFile: input, to: targets, options: options)
            let elapsed = seconds(clock.now - start)
            for r in results {
                let how = r.wasCopied ? "copied unchanged" : "decoded at \(r.decodedWidth)x\(r.decodedHeight)"
                print("\(r.target.path ?? "-"): \(r.width)x\(r.height) (\(how))")
            }
            print(String(format: "time: %.3f s", elapsed))
        } catch {
            throw fail(input, error)
        }
    }
}
