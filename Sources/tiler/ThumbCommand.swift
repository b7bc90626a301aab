import ArgumentParser
import Foundation
import TileCore

struct ThumbCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "thumb",
        abstract: "Make an upright resized copy (and thumbnails) of a JPEG, PNG, TIFF or JPEG 2000 in one decode.",
        discussion: """
            --out is a file when only --max-edge is given, else a folder that receives
            <name>-<edge>.jpg for every size.
            """)

    @Argument(help: "The JPEG, PNG, TIFF or JPEG 2000 file (- for standard input); the copies are JPEGs.")
    var input: String

    @Option(help: "Longest edge of the resized copy, 1...65500.")
    var maxEdge: Int

    @Option(help: "Further sizes (longest edges), comma-separated, e.g. 256,128.", transform: parseEdges)
    var sizes: [Int]?

    @Option(help: "The output file, or a folder with --sizes.")
    var out: String

    @Option(help: "JPEG quality, 1...100.")
    var quality = 80

    @Flag(help: "Write progressive JPEGs.")
    var progressive = false

    @Option(help: "Display orientation: auto (the EXIF tag), none (as stored), or 1...8.")
    var orientation: OrientationArgument = .auto

    func validate() throws {
        guard (1...65500).contains(maxEdge) else {
            throw ValidationError("--max-edge must be within 1...65500, not \(maxEdge).")
        }
        guard (1...100).contains(quality) else { throw ValidationError("--quality must be within 1...100, not \(quality).") }
        if let sizes, let repeated = ([maxEdge] + sizes).firstRepeated {
            throw ValidationError("the size \(repeated) is asked for twice (--max-edge and --sizes name each size once).")
        }
        if sizes == nil { try checkOutputExtension(out, ["jpg", "jpeg"], writes: "JPEGs") }
    }

    func run() throws {
        let extra = sizes ?? []
        let edges = [maxEdge] + extra
        let base = (inputName(input) as NSString).deletingPathExtension
        let targets = edges.map { edge in
            ImageResizer.Target(maxEdge: edge, path: extra.isEmpty ? out : "\(out)/\(base)-\(edge).jpg")
        }
        var options = ImageResizer.Options()
        options.quality = quality
        options.progressive = progressive
        options.orientation = orientation.option
        let clock = ContinuousClock()
        let start = clock.now
        do {
            if !extra.isEmpty && !isDirectory(out) {
                do { try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true) } catch {
                    throw TileError(.io, "cannot create the folder \(out): \((error as NSError).localizedDescription)")
                }
            }
            let results = try ImageResizer.resize(contentsOfFile: input, to: targets, options: options)
            let elapsed = seconds(clock.now - start)
            for r in results {
                let how = r.wasCopied ? "copied unchanged" : "decoded at \(r.decodedWidth)x\(r.decodedHeight)"
                print(escapingControlCharacters("\(r.target.path ?? "-"): \(r.width)x\(r.height) (\(how))"))
            }
            print(String(format: "time: %.3f s", elapsed))
        } catch {
            throw fail(input, error)
        }
    }
}

/// Parses `--sizes`: comma-separated longest edges, each a whole number within 1...65500.
func parseEdges(_ argument: String) throws -> [Int] {
    let parts = argument.split(separator: ",", omittingEmptySubsequences: false)
        .map { $0.trimmingCharacters(in: .whitespaces) }
    var edges: [Int] = []
    for part in parts {
        guard let edge = Int(part), (1...65500).contains(edge) else {
            throw ValidationError("'\(part)' is not a size within 1...65500 (expected e.g. 256,128).")
        }
        edges.append(edge)
    }
    return edges
}

extension Array where Element: Hashable {
    /// The first element that occurs twice, if any.
    var firstRepeated: Element? {
        var seen = Set<Element>()
        return first { !seen.insert($0).inserted }
    }
}
