import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import TestSupport
import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// `formats` (issue 39): the answers' formats at their default qualities, on regions of the input.
/// - `formats-<format>[-<effort>]`: bytes (as a ratio to JPEG's), mean PSNR against the rendered pixels
///   (decoded by libjpeg, `dwebp`, `avifdec`: nothing of ours in between), median encode time, for 24
///   regions of 512x512 and 24 tiles of 256x256 of level 0 at random places; WebP and AVIF at their
///   defaults and at the slower settings `tiler serve` offers (``variants(_:)``); and, where `cwebp` and
///   `avifenc` are installed, what the codecs reach at their most PSNR-minded (``ceilings``), the
///   outside tools given the same pixels: the ceiling our settings are measured against;
/// - `formats-webp-warm`: 400 WebP tiles (IIIF `x,y,256,256/256,/0/default.webp`) asked again and again
///   of our server (answered from its cache) and of nginx serving the same bytes as files, alternately
///   (`wrk -t2 -c64`), both without access logs, as `serve-tiff-warm` does for JPEG;
/// - `formats-webp-cli-warm`: the same tiles from the release `tiler serve` with its defaults (access
///   log, metrics) against nginx with its access log on, as `serve-cli-warm` does for JPEG.
enum FormatScenarios {
    static let name = "formats"

    static func run(input: String, runs: Int) async throws -> [String] {
        guard WebDecoders.installed else { return ["formats: skipped (\(WebDecoders.missing))"] }
        let (image, setup) = try TIFFServeScenarios.prepare(input: input, name: "formats")
        defer { try? FileManager.default.removeItem(atPath: setup.folder) }
        var lines = try encodings(image)
        lines += try await warm(setup, runs: runs)
        lines += try await cliWarm(setup, runs: runs)
        return lines
    }

    /// One way of encoding a format: its effort settings and the qualities swept; or an outside encoder's
    /// command (`IN` a PNG of the pixels, `OUT` the file it writes) at each of its qualities, swept in the
    /// order that raises the PSNR.
    struct Variant {
        var name: String
        var format: ImageRequest.Format
        var effort = OutputEncoding.Effort()
        var qualities: [Int]
        var outside: (@Sendable (Int) -> (tool: String, arguments: [String]))? = nil
    }

    /// What the codecs reach at their most PSNR-minded, run as their own tools (not offered by `tiler serve`):
    /// libwebp with spatial noise shaping off and a stronger loop filter (`cwebp -sns 0 -f 80`: tuned for
    /// PSNR rather than the eye) at its slowest method; AV1 in 4:2:0 by libavif's two other encoders,
    /// rav1e and SVT-AV1 (their own quantizer scales, swept from coarse to fine).
    static let ceilings: [Variant] = [
        Variant(name: "cwebp-psnr", format: .webp, qualities: [80, 84, 85, 86, 87, 88, 90, 94]) { quality in
            ("cwebp", ["-quiet", "-q", "\(quality)", "-m", "6", "-sharp_yuv", "-sns", "0", "-f", "80", "IN", "-o", "OUT"])
        },
        Variant(name: "avifenc-rav1e", format: .avif, qualities: [30, 26, 24, 22, 21, 20, 18, 14]) { quantizer in
            ("avifenc", ["-j", "1", "-c", "rav1e", "-s", "6", "-y", "420", "-d", "8", "--min", "\(quantizer)", "--max", "\(quantizer)", "IN", "OUT"])
        },
        Variant(name: "avifenc-svt", format: .avif, qualities: [48, 44, 41, 39, 37, 35, 30]) { quantizer in
            ("avifenc", ["-j", "1", "-c", "svt", "-s", "6", "-y", "420", "-d", "8", "--min", "\(quantizer)", "--max", "\(quantizer)", "IN", "OUT"])
        }
    ]

    /// `variant`'s outside encoder's file of `pixels` at `quality`.
    static func outsideEncode(_ pixels: RGBAPixels, _ variant: Variant, quality: Int) throws -> Data {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ceiling-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let (input, output) = ("\(folder)/in.png", "\(folder)/out.\(variant.format.rawValue)")
        try pixels.encoded(as: .png).write(to: URL(fileURLWithPath: input))
        let (tool, arguments) = variant.outside!(quality)
        let run = try Tools.run(tool, arguments.map { $0 == "IN" ? input : $0 == "OUT" ? output : $0 })
        guard run.status == 0 else { throw BenchmarkError("\(tool) failed (\(run.status)): \(run.stderr)") }
        return try Data(contentsOf: URL(fileURLWithPath: output))
    }

    /// The defaults, and the slower settings `tiler serve` offers for fewer bytes (`--webp-method`,
    /// `--webp-sharp-yuv`, `--avif-speed`, `--avif-chroma`).
    static func variants(_ encoding: OutputEncoding) -> [Variant] {
        let webp = [80, 84, encoding.webpQuality, 86, 87, 88, 90, 94]
        let avif = [52, 60, 64, 66, 68, 70, encoding.avifQuality, 74, 76, 78, 84]
        return [
            Variant(name: "jpg", format: .jpg, qualities: [encoding.jpegQuality]),
            Variant(name: "webp", format: .webp, qualities: webp),
            Variant(name: "webp-sharp", format: .webp, effort: .init(webpSharpYUV: true), qualities: webp),
            Variant(name: "webp-m6-sharp", format: .webp, effort: .init(webpMethod: 6, webpSharpYUV: true), qualities: webp),
            Variant(name: "avif", format: .avif, qualities: avif),
            Variant(name: "avif-s8", format: .avif, effort: .init(avifSpeed: 8), qualities: avif),
            Variant(name: "avif-444", format: .avif, effort: .init(avifFullChroma: true), qualities: avif),
            Variant(name: "avif-444-s4", format: .avif, effort: .init(avifSpeed: 4, avifFullChroma: true), qualities: avif)
        ]
    }

    /// Sizes, fidelity and encode times of each format and effort on the same rendered pixels: at the
    /// default qualities, and the bytes each needs to equal JPEG's PSNR (interpolated between the two
    /// qualities of a sweep that bracket it).
    static func encodings(_ image: TiledImage) throws -> [String] {
        var generator = SplitMix(seed: 39)
        let layout = image.geometry.layout
        let encoding = OutputEncoding()
        let tools = Tools.have("cwebp", "avifenc")
        let variants = variants(encoding) + (tools ? ceilings : [])
        var lines: [String] = []
        for side in [512, 256] {
            let regions = (0..<24).map { _ in
                (Int.random(in: 0...(layout.width - side), using: &generator), Int.random(in: 0...(layout.height - side), using: &generator))
            }
            var bytes: [String: Int] = [:]
            var psnr: [String: Double] = [:]
            var times: [String: [Double]] = [:]
            for (x, y) in regions {
                let request = try ImageRequest(path: "\(x),\(y),\(side),\(side)/max/0/default.jpg").resolve(
                    width: layout.width, height: layout.height)
                let pixels = try image.render(request)
                let reference = RGBAImage(width: pixels.width, height: pixels.height, pixels: pixels.bytes)
                for variant in variants {
                    for quality in variant.qualities {
                        let key = "\(variant.name)\(quality)"
                        let start = ContinuousClock.now
                        let data =
                            try variant.outside == nil
                            ? pixels.encoded(as: variant.format, quality: quality, effort: variant.effort)
                            : outsideEncode(pixels, variant, quality: quality)
                        times[key, default: []].append((ContinuousClock.now - start).seconds * 1000)
                        let decoded =
                            try variant.format == .jpg
                            ? Reference.decode(data).image : variant.format == .webp ? WebDecoders.webp(data) : WebDecoders.avif(data)
                        bytes[key, default: 0] += data.count
                        psnr[key, default: 0] += Reference.psnr(decoded, reference) / Double(regions.count)
                    }
                }
            }
            let jpeg = "jpg\(encoding.jpegQuality)"
            for variant in variants {
                let key = "\(variant.name)\(encoding.quality(of: variant.format))"
                var line =
                    variant.outside != nil
                    ? "formats-\(variant.name)-\(side)  (the outside tool, swept: \(variant.qualities.map(String.init).joined(separator: ", ")))"
                    : String(
                        format: "formats-%@-%d  q%d  %7.0f B a region  %.2fx JPEG's bytes  PSNR %.2f dB (JPEG's %+.2f)  encode %.1f ms (median)",
                        variant.name, side, encoding.quality(of: variant.format), Double(bytes[key]!) / Double(regions.count),
                        Double(bytes[key]!) / Double(bytes[jpeg]!), psnr[key]!, psnr[key]! - psnr[jpeg]!, ScenarioResult.median(times[key]!)
                    )
                // Where the sweep crosses JPEG's PSNR: the quality and bytes there.
                let points = variant.qualities.map { (Double($0), psnr["\(variant.name)\($0)"]!, Double(bytes["\(variant.name)\($0)"]!)) }
                if variant.format != .jpg,
                    let i = points.indices.dropLast().first(where: { points[$0].1 <= psnr[jpeg]! && points[$0 + 1].1 >= psnr[jpeg]! })
                {
                    let (a, b) = (points[i], points[i + 1])
                    let t = (psnr[jpeg]! - a.1) / (b.1 - a.1)
                    line += String(
                        format: "; equal PSNR at q%.0f, %.3fx JPEG's bytes", a.0 + t * (b.0 - a.0), (a.2 + t * (b.2 - a.2)) / Double(bytes[jpeg]!))
                } else if variant.outside != nil {
                    line += String(format: "; JPEG's PSNR not within the sweep (%.2f-%.2f dB)", points.first!.1, points.last!.1)
                }
                lines.append(line)
            }
        }
        return lines
    }

    /// Warm WebP tiles from our server's cache against nginx serving the same bytes.
    static func warm(_ setup: LoadScenarios.Setup, runs: Int) async throws -> [String] {
        let paths = warmPaths(setup)
        let root = "\(setup.folder)/static"
        let (server, base) = try LoadScenarios.startServer(setup)
        defer { server.stop() }
        // The static copy: what our server answers, as files under the same paths.
        var total = 0
        for (path, data) in zip(paths, try await answers(base, paths)) {
            let file = root + path
            try FileManager.default.createDirectory(atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try data.write(to: URL(fileURLWithPath: file))
            total += data.count
        }
        guard let (nginx, nginxBase) = try LoadScenarios.startNginx(setup, root: root, iiifRoot: root) else {
            return ["formats-webp-warm: skipped (no nginx)"]
        }
        defer { nginx.stop() }
        let script = try LoadScenarios.cyclingScript(Array(paths), at: "\(setup.folder)/webp-warm.lua")
        let (ours, theirs) = try WrkResult.alternating(ours: base, nginx: nginxBase, script: script, runs: runs)
        let (rate, nginxRate) = (ScenarioResult.median(ours.map(\.requestsPerSecond)), ScenarioResult.median(theirs.map(\.requestsPerSecond)))
        return [
            String(
                format: "formats-webp-warm   %8.0f req/s  p99 %.2f ms  %.2fx nginx (run by run %@)  errors %d  (400 tiles, %.0f B each)", rate,
                ScenarioResult.median(ours.map(\.p99Milliseconds)), rate / nginxRate, WrkResult.pairedRatios(ours, to: theirs),
                ours.map(\.errors).reduce(0, +), Double(total) / Double(paths.count)),
            String(
                format: "nginx-webp-warm     %8.0f req/s  p99 %.2f ms  (the same bytes as files)", nginxRate,
                ScenarioResult.median(theirs.map(\.p99Milliseconds)))
        ]
    }
}

extension FormatScenarios {
    /// The warm series' 400 WebP tiles: whole ones (not the right and bottom edges'), as a viewer asks for them.
    static func warmPaths(_ setup: LoadScenarios.Setup) -> [String] {
        let whole = LoadScenarios.shuffledTiles(setup).filter { $0.0 < setup.columns - 1 && $0.1 < setup.rows - 1 }
        return whole.prefix(400).map { "/iiif/3/photo/\($0.0 * 256),\($0.1 * 256),256,256/256,/0/default.webp" }
    }

    /// The bodies of `base`'s 200 answers to `paths`, one after another.
    static func answers(_ base: String, _ paths: [String]) async throws -> [Data] {
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        do {
            var bodies: [Data] = []
            for path in paths {
                let response = try await client.execute(HTTPClientRequest(url: base + path), timeout: .seconds(60))
                guard response.status == .ok else { throw BenchmarkError("\(base)\(path): \(response.status)") }
                bodies.append(Data(try await response.body.collect(upTo: 1 << 24).readableBytesView))
            }
            try await client.shutdown()
            return bodies
        } catch {
            try? await client.shutdown()
            throw error
        }
    }

    /// `formats-webp-cli-warm`: after ``warm(_:runs:)``, whose files (our answers) nginx serves again, now
    /// with its access log, against the release `tiler serve` with its defaults. A file whose bytes are
    /// not `tiler serve`'s answer is written again with them (counted in the line).
    static func cliWarm(_ setup: LoadScenarios.Setup, runs: Int) async throws -> [String] {
        let tiler = (ChildProcess.selfExecutable as NSString).deletingLastPathComponent + "/tiler"
        guard access(tiler, X_OK) == 0 else {
            return ["formats-webp-cli-warm: skipped (no release tiler beside the Benchmarks executable: swift build -c release)"]
        }
        let paths = warmPaths(setup)
        let root = "\(setup.folder)/static"
        let (server, base) = try CLIServeScenario.start(tiler, setup)
        defer { server.stop() }
        var differing = 0
        for (path, data) in zip(paths, try await answers(base, paths)) where FileManager.default.contents(atPath: root + path) != data {
            differing += 1
            try data.write(to: URL(fileURLWithPath: root + path))
        }
        guard let (nginx, nginxBase) = try LoadScenarios.startNginx(setup, root: root, iiifRoot: root, accessLog: "\(setup.folder)/nginx-webp.log")
        else {
            return ["formats-webp-cli-warm: skipped (no nginx)"]
        }
        defer { nginx.stop() }
        let script = try LoadScenarios.cyclingScript(paths, at: "\(setup.folder)/webp-cli-warm.lua")
        let (ours, theirs) = try WrkResult.alternating(ours: base, nginx: nginxBase, script: script, runs: runs)
        let (rate, nginxRate) = (ScenarioResult.median(ours.map(\.requestsPerSecond)), ScenarioResult.median(theirs.map(\.requestsPerSecond)))
        return [
            String(
                format:
                    "formats-webp-cli-warm %6.0f req/s  p99 %.2f ms  %.2fx nginx (run by run %@)  errors %d  (tiler serve's defaults: access log, metrics; %d of %d files rewritten with its bytes)",
                rate, ScenarioResult.median(ours.map(\.p99Milliseconds)), rate / nginxRate, WrkResult.pairedRatios(ours, to: theirs),
                ours.map(\.errors).reduce(0, +), differing, paths.count),
            String(
                format: "nginx-webp-cli-warm %8.0f req/s  p99 %.2f ms  (its access log on; the same bytes as files)", nginxRate,
                ScenarioResult.median(theirs.map(\.p99Milliseconds)))
        ]
    }
}

extension Duration {
    fileprivate var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
