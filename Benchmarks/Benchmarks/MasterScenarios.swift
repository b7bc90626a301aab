import Foundation
import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// Masters in other formats (issue 28), only when named (`--scenario masters`): made from the bench
/// image by vips (a 20000x15000 16-bit RGB LZW TIFF in strips and in 256x256 tiles; a 16000x16000 RGBA
/// PNG, plain and Adam7-interlaced; an 8000x6000 JPEG 2000 in 1024x1024 tiles and in one tile), each built by us in a child process and by `vips tiffsave --tile --pyramid` in the same run,
/// alternately. Ours: a TIFF store for the opaque TIFFs (JPEG tiles, as vips' JPEG pyramid), and for the
/// PNG a TIFF store of WebP tiles with alpha (lossy at 85, alpha lossless), against vips' WebP pyramid at
/// Q 85; its size is also given against the raw store it used to get. Peak RSS per child. (About 3 minutes
/// a build each on 2 cores: this master's alpha is the photo's green, noise that only lossless coding keeps.)
enum MasterScenarios {
    static let name = "masters"

    struct Master {
        var name: String
        var path: String
        var megapixels: Double
        /// Our store format for it (`tiff` or `raw`) and vips' compression.
        var format: String
        var vipsCompression: String
    }

    /// The masters, made in `folder` from `input` (about a minute and 4 GB of disk).
    /// `only`: the names wanted (the environment's `MASTERS`, comma-separated; nil: all); others are not made.
    static func prepare(input: String, folder: String, only: Set<String>?) throws -> [Master] {
        func wanted(_ prefix: String) -> Bool { only?.contains { $0.hasPrefix(prefix) } ?? true }
        guard let vips = Scenario.which("vips") else {
            throw BenchmarkError("vips is needed to make the masters")
        }
        func run(_ arguments: [String]) throws {
            let child = try ChildProcess.run(vips, arguments)
            guard child.exitStatus == 0 else {
                throw BenchmarkError("vips \(arguments.joined(separator: " ")) failed")
            }
        }
        let info = try ImageInfo.read(contentsOfFile: input)
        let (w, h) = (Double(info.width), Double(info.height))
        // 16-bit RGB: the image scaled to 20000x15000, samples times 257 (full 16-bit range).
        if wanted("tiff") {
            try run(["resize", input, "\(folder)/base.v", "\(20000 / w)", "--vscale", "\(15000 / h)"])
            try run(["linear", "\(folder)/base.v", "\(folder)/linear.v", "257", "0"])
            try run(["cast", "\(folder)/linear.v", "\(folder)/rgb16.v", "ushort"])
            try run(["copy", "\(folder)/rgb16.v", "\(folder)/rgb16i.v", "--interpretation", "rgb16"])
            try run([
                "tiffsave", "\(folder)/rgb16i.v", "\(folder)/strips.tif", "--compression", "lzw",
                "--predictor", "horizontal", "--bigtiff"
            ])
            try run([
                "tiffsave", "\(folder)/rgb16i.v", "\(folder)/tiles.tif", "--compression", "lzw",
                "--predictor", "horizontal", "--tile",
                "--tile-width", "256", "--tile-height", "256", "--bigtiff"
            ])
        }
        // RGBA: the image scaled to 16000x16000, its green as alpha.
        if wanted("png") {
            try run(["resize", input, "\(folder)/square.v", "\(16000 / w)", "--vscale", "\(16000 / h)"])
            try run(["extract_band", "\(folder)/square.v", "\(folder)/green.v", "1"])
            try run(["bandjoin", "\(folder)/square.v \(folder)/green.v", "\(folder)/rgba.v"])
            try run(["pngsave", "\(folder)/rgba.v", "\(folder)/rgba.png", "--compression", "1"])
            try run([
                "pngsave", "\(folder)/rgba.v", "\(folder)/interlaced.png", "--compression", "1",
                "--interlace"
            ])
        }
        // JPEG 2000: the image scaled to 8000x6000, lossy (vips' Q 45), in 1024x1024 tiles and in one tile.
        if wanted("jp2") {
            try run(["resize", input, "\(folder)/jp2.v", "\(8000 / w)", "--vscale", "\(6000 / h)"])
            try run([
                "jp2ksave", "\(folder)/jp2.v", "\(folder)/tiled.jp2", "--Q", "45", "--tile-width", "1024",
                "--tile-height", "1024"
            ])
            try run([
                "jp2ksave", "\(folder)/jp2.v", "\(folder)/untiled.jp2", "--Q", "45", "--tile-width", "8000",
                "--tile-height", "6000"
            ])
        }
        for scratch in ["base", "linear", "rgb16", "rgb16i", "square", "green", "rgba", "jp2"] {
            unlink("\(folder)/\(scratch).v")
        }
        let masters = [
            Master(
                name: "tiff-strips", path: "\(folder)/strips.tif", megapixels: 300, format: "tiff",
                vipsCompression: "jpeg"),
            Master(
                name: "tiff-tiles", path: "\(folder)/tiles.tif", megapixels: 300, format: "tiff",
                vipsCompression: "jpeg"),
            Master(
                name: "png-rgba", path: "\(folder)/rgba.png", megapixels: 256, format: "tiff",
                vipsCompression: "webp"),
            Master(
                name: "png-rgba-interlaced", path: "\(folder)/interlaced.png", megapixels: 256,
                format: "tiff", vipsCompression: "webp"),
            Master(
                name: "jp2-tiled", path: "\(folder)/tiled.jp2", megapixels: 48, format: "tiff",
                vipsCompression: "jpeg"),
            Master(
                name: "jp2-untiled", path: "\(folder)/untiled.jp2", megapixels: 48, format: "tiff",
                vipsCompression: "jpeg")
        ]
        return masters.filter { only?.contains($0.name) ?? true }
    }

    static func run(input: String, runs: Int) throws -> [String] {
        let folder = NSTemporaryDirectory() + "/tiledimagekit-bench-masters-\(getpid())"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var lines: [String] = []
        let only = ProcessInfo.processInfo.environment["MASTERS"].map {
            Set($0.split(separator: ",").map(String.init))
        }
        for master in try prepare(input: input, folder: folder, only: only) {
            let size = Double(try fileSize(master.path)) / 1e6
            lines.append(
                String(
                    format: "%@: %@ (%.0f MB)", master.name, (master.path as NSString).lastPathComponent, size
                ))
            let ours = Scenario(name: "master-\(master.format)", kind: .inProcess, input: master.path)
            let vips = Scenario.tool(
                "vips",
                [
                    "tiffsave", master.path, "{out}/v.tif", "--tile", "--pyramid", "--compression",
                    master.vipsCompression, "--Q", "85",
                    "--tile-width", "256", "--tile-height", "256", "--bigtiff"
                ], name: "vips-tiffsave", input: master.path)
            let (mine, theirs) = try ours.measurePaired(
                with: vips, runs: runs, megapixels: master.megapixels)
            lines.append("  " + mine.line(floor: nil))
            lines.append("  " + theirs.line(floor: nil))
            lines.append(
                String(
                    format: "  ours / vips: time %.2fx, peak RSS %.1f / %.1f MiB",
                    mine.medianSeconds / theirs.medianSeconds,
                    mine.medianPeakMiB, theirs.medianPeakMiB))
        }
        return lines
    }

    /// A child's build of a master: a TIFF store (`master-tiff`) or a raw store (`master-raw`), in
    /// the TMPDIR file system as vips writes there; elapsed seconds to the complete pyramid.
    static func build(_ name: String, input: String) throws -> (
        seconds: Double, extras: [String: Double]
    ) {
        let clock = ContinuousClock()
        let start = clock.now
        var options = BuildOptions()
        if name == "master-tiff" { options.format = .tiff() }
        let image = try TileBuilder.build(contentsOfFile: input, options: options)
        let complete = clock.now
        guard image.isComplete else { throw BenchmarkError("incomplete pyramid") }
        let raw = TileBuilder.storeByteEstimate(image.geometry, tiff: false)
        return (
            TIFFScenarios.seconds(complete - start),
            ["sizeMB": Double(image.totalByteCount) / 1e6, "rawRatio": Double(image.totalByteCount) / Double(raw)]
        )
    }
}
