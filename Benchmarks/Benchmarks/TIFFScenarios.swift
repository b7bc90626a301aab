import Foundation
import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// The TIFF store scenarios (issue 26): the bench image built into a tiled pyramidal TIFF, beside the
/// raw build and `vips tiffsave` in the same run; and, after the runs, the sizes and the PSNR of every
/// lower level of ours and of vips' against a float-precision box filter of the source.
enum TIFFScenarios {
    /// `vips tiffsave` with the options issue 26 names.
    static func vipsArguments(_ input: String, output: String) -> [String] {
        [
            "tiffsave", input, output, "--tile", "--pyramid", "--compression", "jpeg", "--Q", "85", "--tile-width", "256",
            "--tile-height", "256", "--bigtiff"
        ]
    }

    /// The progressive twin of the bench image (`huge.jpg` -> `huge-progressive.jpg`) beside it, if any.
    static func progressiveInput(_ input: String) -> String? {
        guard input.hasSuffix(".jpg") else { return nil }
        let twin = String(input.dropLast(4)) + "-progressive.jpg"
        return access(twin, R_OK) == 0 ? twin : nil
    }

    /// The scenarios: our TIFF of the input and of its progressive twin, the raw build of the twin,
    /// and vips tiffsave of both.
    static func scenarios(input: String) -> [Scenario] {
        let twin = progressiveInput(input)
        var list = [Scenario(name: "build-tiff", kind: .inProcess, input: input)]
        let missing = twin == nil ? "no progressive twin beside the input (…-progressive.jpg)" : nil
        list.append(Scenario(name: "build-tiff-progressive", kind: .inProcess, input: twin ?? input, missing: missing))
        list.append(Scenario(name: "build-progressive", kind: .inProcess, input: twin ?? input, missing: missing))
        list.append(Scenario.tool("vips", vipsArguments(input, output: "{out}/v.tif"), name: "vips-tiffsave", input: input))
        var vipsTwin = Scenario.tool(
            "vips", vipsArguments(twin ?? input, output: "{out}/v.tif"), name: "vips-tiffsave-progressive", input: twin ?? input)
        if let missing, vipsTwin.missing == nil { vipsTwin.missing = missing }
        list.append(vipsTwin)
        // Issue 39: the input turned by orientation 6 (level 0 turned in the DCT domain), beside
        // jpegtran's lossless turn of the whole JPEG and vips turning and saving the same pyramid.
        list.append(Scenario(name: "build-tiff-turned", kind: .inProcess, input: input))
        list.append(
            Scenario.tool("jpegtran", ["-rotate", "90", "-perfect", "-outfile", "{out}/t.jpg", input], name: "jpegtran-rotate90", input: input))
        list.append(
            Scenario.tool(
                "vips", ["rot", input, "{out}/v.tif[tile,pyramid,compression=jpeg,Q=85,tile-width=256,tile-height=256,bigtiff]", "d90"],
                name: "vips-rot-tiffsave", input: input))
        return list
    }

    /// A child's build of the input into an ephemeral TIFF (the TMPDIR file system, as vips writes its
    /// output there), turned by `orientation` when given: the elapsed seconds to the complete pyramid,
    /// the file's size in MB, and whether level 0 was copied.
    static func build(input: String, orientation: ImageOrientation? = nil) throws -> (seconds: Double, extras: [String: Double]) {
        let clock = ContinuousClock()
        let start = clock.now
        var options = BuildOptions()
        options.format = .tiff()
        if let orientation { options.orientation = .fixed(orientation) }
        let image = try TileBuilder.build(contentsOfFile: input, options: options)
        let complete = clock.now
        guard image.isComplete else { throw BenchmarkError("incomplete pyramid") }
        let source = Double(try fileSize(input))
        let bytes = Double(image.totalByteCount)
        return (
            seconds(complete - start),
            ["sizeMB": bytes / 1e6, "sizeRatio": bytes / source, "levelZeroCopied": image.isLevelZeroCopied ? 1 : 0]
        )
    }

    static func seconds(_ d: Duration) -> Double {
        Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }
}

/// A file's size in bytes.
func fileSize(_ path: String) throws -> Int {
    guard let size = (try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int else {
        throw BenchmarkError("cannot stat \(path)")
    }
    return size
}
