import ArgumentParser
import Foundation
import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// Options shared by the commands that decode.
struct DecodeOptions: ParsableArguments {
    @Option(help: "Display orientation: auto (the EXIF tag), none (as stored), or 1...8.")
    var orientation: OrientationArgument = .auto

    @Flag(help: "Accept a file that ends before its image does (libjpeg fills the missing rows).")
    var allowTruncated = false

    @Option(help: "Tile side in pixels.")
    var tileSize = 256

    @Option(help: "Level writer: pwrite (strips) or mmap (two-tile-row window).")
    var writer: WriterArgument = .pwrite

    func buildOptions() -> BuildOptions {
        var options = BuildOptions()
        options.orientation = orientation.option
        options.allowTruncated = allowTruncated
        options.tileSize = tileSize
        options.writer = writer == .mmap ? .mappedWindow : .stripWrite
        return options
    }
}

enum WriterArgument: String, ExpressibleByArgument, CaseIterable { case pwrite, mmap }

enum OrientationArgument: ExpressibleByArgument, Equatable {
    case auto, none, fixed(ImageOrientation)

    init?(argument: String) {
        switch argument {
        case "auto": self = .auto
        case "none": self = .none
        default:
            guard let value = Int(argument), let o = ImageOrientation(rawValue: value) else { return nil }
            self = .fixed(o)
        }
    }

    var option: OrientationOption {
        switch self {
        case .auto: return .fromExif
        case .none: return .none
        case .fixed(let o): return .fixed(o)
        }
    }
}

/// Reports a failure as one line on stderr naming the file, and exits non-zero.
func fail(_ subject: String, _ error: any Error) -> ExitCode {
    let message = (error as? TileError)?.message ?? "\(error)"
    let line = message.hasPrefix(subject) ? message : "\(subject): \(message)"
    FileHandle.standardError.write(Data("tiler: \(line)\n".utf8))
    return ExitCode.failure
}

/// Peak resident memory of this process, in MiB.
func peakResidentMiB() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_maxrss) / 1024
}

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

/// Prints the levels, sizes and tile counts of a pyramid.
func printSummary(_ image: TiledImage, buildTime: Duration?, warnings: Int?, lastWarning: String?) {
    let g = image.geometry
    print("pyramid: \(g.width)x\(g.height) (stored \(g.storedWidth)x\(g.storedHeight), orientation \(g.orientation.rawValue)), \(image.levelCount) levels, \(g.tileSize)px tiles")
    var tiles = 0
    var bytes = 0
    for index in 0..<image.levelCount {
        let l = image.level(index)
        tiles += l.tileCount
        bytes += g.fileByteCount(level: index)
        print("  level \(index): \(l.width)x\(l.height), \(l.columns)x\(l.rows) tiles")
    }
    print("tiles: \(tiles), \(String(format: "%.1f", Double(bytes) / 1_048_576)) MiB on disk\(image.storePath.map { " at \($0)" } ?? " (ephemeral)")")
    if let buildTime {
        let s = seconds(buildTime)
        let megapixels = Double(g.storedWidth * g.storedHeight) / 1e6
        print(String(format: "time: %.3f s, %.1f MP/s, peak RSS %.1f MiB", s, megapixels / s, peakResidentMiB()))
    }
    if let warnings { print("warnings: \(warnings)\(lastWarning.map { " (last: \($0))" } ?? "")") }
}
