import ArgumentParser
import Foundation
import TileActors
import TileCore
import TileNetwork

#if canImport(Glibc)
import Glibc
#endif

struct ExportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Export a master (JPEG, PNG, TIFF, JPEG 2000), a URL or a store as DeepZoom or static IIIF tiles for web viewers.",
        discussion: """
            dzi writes NAME.dzi and NAME_files/LEVEL/COLUMN_ROW.jpg (OpenSeadragon and other deep-zoom viewers); iiif3 writes NAME/info.json and every tile at its IIIF Image API 3.0 canonical path (a level-0 static service), a IIIF Presentation 3.0 manifest NAME/manifest.json (what Mirador and other viewers open) and a viewer page NAME/index.html that needs only a plain file server. A master's tiles are encoded as its rows decode, on every core, without writing the raw pyramid (unless --keep-store). Everything is written beside the output and renamed into place when complete; a failed export leaves nothing behind.
            """)

    @Argument(
        help:
            "A master (JPEG, PNG, TIFF, JPEG 2000; - for standard input), an http(s) URL, a store folder written by `tiler build --out`, or a tiled pyramidal TIFF."
    )
    var input: String

    @Option(help: "The layout: dzi or iiif3.")
    var layout: LayoutArgument = .dzi

    @Option(help: "The folder to write into (created if missing).")
    var out: String

    @Option(help: "The base name of what is written (default: the input's file name without its extension).")
    var name: String?

    @Option(help: "Tile side in pixels, without the overlap, 1...8192.")
    var tileSize = 256

    @Option(help: "Pixels each DeepZoom tile shares with its neighbours (dzi only).")
    var overlap = 0

    @Option(help: "Tile format: jpg or png.")
    var format: FormatArgument = .jpg

    @Option(help: "JPEG quality, 1...100.")
    var quality = 80

    @Option(
        name: [.customLong("base-url"), .customLong("id")],
        help:
            "iiif3: the URL the export will be served from; the ids in info.json and manifest.json are under URL/NAME (default http://localhost:8000, with a warning)."
    )
    var id: String?

    static let defaultID = "http://localhost:8000"

    @Option(help: "Also keep the tile store (as `tiler build --out` writes it) at this path.")
    var keepStore: String?

    @Flag(help: "Replace an earlier export of the same name.")
    var force = false

    @Option(help: "Threads encoding tiles, 1...16 (default: the processors).")
    var threads: Int?

    @Option(help: "Display orientation: auto (the EXIF tag), none (as stored), or 1...8.")
    var orientation: OrientationArgument = .auto

    @Flag(help: "Accept a file that ends before its image does (libjpeg fills the missing rows).")
    var allowTruncated = false

    func validate() throws {
        do { try exportOptions().validate() } catch { throw ValidationError(error.message) }
        if let name, name.isEmpty || name.contains("/") || name.hasPrefix(".") {
            throw ValidationError("--name must be a plain file name, not \"\(name)\".")
        }
    }

    func exportOptions() -> ExportOptions {
        var options = ExportOptions()
        options.layout = layout == .dzi ? .deepZoom : .iiif3(baseURL: id ?? Self.defaultID)
        options.tileSize = tileSize
        options.overlap = overlap
        options.format = format == .png ? .png : .jpeg(quality: quality)
        options.encoderThreads = threads ?? ProcessInfo.processInfo.activeProcessorCount
        return options
    }

    func run() async throws {
        let clock = ContinuousClock()
        let start = clock.now
        let baseName = name ?? (inputName(input) as NSString).deletingPathExtension
        do {
            if !isDirectory(out) && mkdir(out, 0o755) != 0 {
                throw TileError(.io, "cannot create \(out): \(String(cString: strerror(errno)))", errno: errno)
            }
            let result: TileExporter.Result
            if let image = try openPyramid(input, orientation: orientation.option) {
                // A store (raw or TIFF) or a tiled pyramidal TIFF (upright, --orientation aside); a master is built.
                result = try TileExporter.export(
                    image, name: baseName, outputDirectory: out, options: exportOptions(), replacingExisting: force)
            } else {
                result = try await exportMaster(name: baseName)
            }
            if layout == .iiif3 && id == nil {
                // Not an error (a look on this machine works), but a static host needs its own URL there.
                FileHandle.standardError.write(
                    Data(
                        "tiler: warning: the ids in info.json and manifest.json are under \(Self.defaultID)/\(baseName): --base-url names the URL the export will be served from\n"
                            .utf8))
            }
            let time = seconds(clock.now - start)
            print(
                String(
                    format: "%@: %dx%d, %d levels, %d tiles in %.3f s (peak RSS %.0f MiB)", escapingControlCharacters(input),
                    result.width, result.height, result.levelCount, result.tileCount, time, peakResidentMiB()))
            for path in result.paths + (result.storePath.map { [$0] } ?? []) { print("  \(escapingControlCharacters(path))") }
        } catch {
            throw fail(input, error)
        }
    }

    private func exportMaster(name: String) async throws -> TileExporter.Result {
        var build = BuildOptions()
        build.orientation = orientation.option
        build.allowTruncated = allowTruncated
        build.preview = .off
        let exporter = try ImageExporter(
            name: name, outputDirectory: out, options: exportOptions(), buildOptions: build, keepingStoreAt: keepStore,
            replacingExisting: force)
        do {
            if input.hasPrefix("http://") || input.hasPrefix("https://") {
                try await HTTPImageSource(url: input).feed(into: exporter)
            } else {
                try await exporter.appendFile(at: input)
            }
            return try await exporter.finish()
        } catch {
            await exporter.cancel()
            throw error
        }
    }
}

enum LayoutArgument: String, ExpressibleByArgument, CaseIterable { case dzi, iiif3 }

enum FormatArgument: String, ExpressibleByArgument, CaseIterable { case jpg, png }
