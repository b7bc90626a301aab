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

    @Option(help: "Tile side in pixels, 16...4096.")
    var tileSize = 256

    @Option(help: "Level writer: bands (64-row bands written as one block per tile, the default) or window (a two-tile-row mmap window).")
    var writer: WriterArgument = .bands

    @Option(help: "Where a progressive JPEG's coefficients are kept while it is decoded: auto (on disk above 32 MiB, the default), memory, or disk.")
    var coefficients: CoefficientsArgument = .auto

    @Option(help: "The page of a multi-page TIFF master to tile, 0 the first (build: only that page; default every page).")
    var page: Int?

    func validate() throws {
        guard (16...4096).contains(tileSize) else {
            throw ValidationError("--tile-size must be within 16...4096, not \(tileSize).")
        }
        // A TIFF's directories are counted in 32 bits; a page past Int.max - 1 overflowed its store's name (`~N+1`).
        if let page, !(0...Int(Int32.max)).contains(page) { throw ValidationError("--page must be 0-\(Int32.max), not \(page).") }
    }

    func buildOptions() -> BuildOptions {
        var options = BuildOptions()
        options.orientation = orientation.option
        options.allowTruncated = allowTruncated
        options.tileSize = tileSize
        options.writer = writer == .window ? .window : .bands()
        options.coefficientStorage = coefficients.storage
        options.page = page ?? 0
        return options
    }
}

enum WriterArgument: String, ExpressibleByArgument, CaseIterable { case bands, window }

enum CoefficientsArgument: String, ExpressibleByArgument, CaseIterable {
    case auto, memory, disk

    var storage: CoefficientStorage {
        switch self {
        case .auto: return .default
        case .memory: return .memory
        case .disk: return .disk
        }
    }
}

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

/// Reports a failure as one line on stderr naming the file and the cause, and exits non-zero.
/// Control characters in names and messages are escaped, so the report stays one line.
func fail(_ subject: String, _ error: any Error) -> ExitCode {
    FileHandle.standardError.write(Data("tiler: \(failureLine(subject, error))\n".utf8))
    return ExitCode.failure
}

/// The text of ``fail(_:_:)``: `subject: message`, escaped, with a hint where an option helps.
func failureLine(_ subject: String, _ error: any Error) -> String {
    var message: String
    switch error {
    case let error as TileError:
        message = error.message
        // A JPEG cut inside its scans can be filled in; a cut header, a PNG or a TIFF cannot.
        if error.isFillable {
            message += " (--allow-truncated accepts it)"
        }
    case let error as CocoaError:
        message = error.localizedDescription
    default:
        message = "\(error)"
    }
    let line = message.contains(subject) ? message : "\(subject): \(message)"
    return escapingControlCharacters(line)
}

/// `text` with newlines, tabs and other control characters written as escapes (`\n`, `\u{1B}`).
func escapingControlCharacters(_ text: String) -> String {
    var result = ""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\n": result += "\\n"
        case "\r": result += "\\r"
        case "\t": result += "\\t"
        case _ where scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value):
            result += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
        default: result.unicodeScalars.append(scalar)
        }
    }
    return result
}

/// Whether two paths name the same existing file (same device and inode, through links).
func isSameFile(_ a: String, _ b: String) -> Bool {
    var first = stat()
    var second = stat()
    guard stat(a, &first) == 0, stat(b, &second) == 0 else { return false }
    return first.st_dev == second.st_dev && first.st_ino == second.st_ino
}

/// Whether `path` names a TIFF file (by its extension) that exists.
func isTIFFFile(_ path: String) -> Bool {
    let lower = path.lowercased()
    return (lower.hasSuffix(".tif") || lower.hasSuffix(".tiff")) && access(path, F_OK) == 0 && !isDirectory(path)
}

/// The tiled pyramid at `path` when it is a store folder or a tiled pyramidal TIFF; nil for a master
/// (a TIFF that is not a tiled pyramid, a JPEG, a PNG, ...), which is built instead.
/// - Throws: what opening a store or a tiled TIFF throws, but for a TIFF that is not one.
func openPyramid(_ path: String, orientation: OrientationOption) throws -> TiledImage? {
    guard path != "-" else { return nil }
    if isDirectory(path) { return try TiledImage.open(store: path, orientation: orientation) }
    guard isTIFFFile(path) else { return nil }
    let image: TiledImage
    do { image = try TiledImage.open(tiff: path) } catch {
        // A TIFF master (strips, or a layout no pyramid has): built as the other masters are.
        guard [.invalidStore, .unsupported].contains(error.code) else { throw error }
        return nil
    }
    // A pyramidal TIFF is read as it is stored: an orientation that would turn it is refused, not ignored.
    if case .fixed(let asked) = orientation, asked != .identity {
        throw TileError(
            .unsupported,
            "\(path) is a tiled pyramidal TIFF, read as stored: --orientation \(asked.rawValue) cannot be applied to it (auto and none can)")
    }
    return image
}

/// Refuses an output whose extension names another format than the one written (`render --out x.png`
/// would write a PPM named `.png`): a name without an extension, or with one of `extensions`, passes.
func checkOutputExtension(_ out: String, _ extensions: [String], writes format: String) throws {
    let ext = (out as NSString).pathExtension.lowercased()
    guard !ext.isEmpty, !extensions.contains(ext) else { return }
    throw ValidationError("this command writes \(format): --out \(out) names a .\(ext) file; name it .\(extensions[0]).")
}

/// Whether `path` is an existing folder.
func isDirectory(_ path: String) -> Bool {
    var info = stat()
    return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
}

/// The name an input goes by in store and output names: its last path component, `stdin` for `-`.
func inputName(_ input: String) -> String {
    if input == "-" { return "stdin" }
    if let url = URL(string: input), url.scheme == "http" || url.scheme == "https" {
        let last = url.lastPathComponent
        return last.isEmpty || last == "/" ? (url.host ?? "download") : last
    }
    return (input as NSString).lastPathComponent
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
    print(
        "pyramid: \(g.width)x\(g.height) (stored \(g.storedWidth)x\(g.storedHeight), orientation \(g.orientation.rawValue)), \(image.levelCount) levels, \(g.tileSize)px tiles"
    )
    var tiles = 0
    for index in 0..<image.levelCount {
        let l = g.levels[index]
        tiles += l.tileCount
        print("  level \(index): \(l.width)x\(l.height), \(l.columns)x\(l.rows) tiles, \(image.tileCoding(ofLevel: index).map { "\($0)" } ?? "")")
    }
    let bytes = image.totalByteCount
    print("tiles: \(tiles), \(String(format: "%.1f", Double(bytes) / 1_048_576)) MiB on disk\(image.storePath.map { " at \($0)" } ?? " (ephemeral)")")
    if let buildTime {
        let s = seconds(buildTime)
        let megapixels = Double(g.storedWidth * g.storedHeight) / 1e6
        print(String(format: "time: %.3f s, %.1f MP/s, peak RSS %.1f MiB", s, megapixels / s, peakResidentMiB()))
    }
    if let warnings { print("warnings: \(warnings)\(lastWarning.map { " (last: \($0))" } ?? "")") }
}
