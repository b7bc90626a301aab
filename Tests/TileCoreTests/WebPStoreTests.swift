import Foundation
import Testing
import TestSupport
@testable import TileCore

/// TIFF stores of WebP tiles (issue 39 point 2): a master with alpha gets them by default, any master
/// when asked. References: the master's own pixels (written plainly here), libvips reading the TIFF
/// through libtiff's WebP codec, and the raw store of the same master (whose RGBA tiles are exact).
@Suite("TIFF stores of WebP tiles")
struct WebPStoreTests {
    static func folder() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("webp-store-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// A smooth picture (a photograph's kind of content) with alpha rising from 0 at the left to 255
    /// at the right, and a transparent hole; RGB under alpha 0 is kept, not zeroed.
    static func picture(width: Int = 600, height: Int = 400) -> RGBAImage {
        var bytes = [UInt8]()
        bytes.reserveCapacity(width * height * 4)
        for y in 0..<height {
            for x in 0..<width {
                let r = 128 + 100 * sin(Double(x) / 37) * cos(Double(y) / 53)
                let g = 128 + 90 * sin(Double(x + 2 * y) / 71)
                let b = Double((x * 255 / width + y * 255 / height) / 2)
                let hole = (x - 300) * (x - 300) + (y - 200) * (y - 200) < 40 * 40
                let a = hole ? 0 : x * 255 / (width - 1)
                bytes += [UInt8(r.rounded()), UInt8(g.rounded()), UInt8(b), UInt8(a)]
            }
        }
        return RGBAImage(width: width, height: height, pixels: bytes)
    }

    static func png(_ image: RGBAImage) throws -> Data {
        try RGBAPixels(width: image.width, height: image.height, bytes: image.pixels).encoded(as: .png)
    }

    /// Every pixel's alpha, and PSNR of the colour where alpha is not 0 (what a viewer shows).
    static func compare(_ a: RGBAImage, _ b: RGBAImage) -> (alphaEqual: Bool, visiblePSNR: Double) {
        var squared = 0.0
        var count = 0
        var alphaEqual = true
        for p in stride(from: 0, to: a.pixels.count, by: 4) {
            if a.pixels[p + 3] != b.pixels[p + 3] { alphaEqual = false }
            guard a.pixels[p + 3] > 0 else { continue }
            for c in 0..<3 {
                let d = Double(a.pixels[p + c]) - Double(b.pixels[p + c])
                squared += d * d
                count += 1
            }
        }
        return (alphaEqual, squared == 0 ? .infinity : 10 * log10(255 * 255 / (squared / Double(count))))
    }

    /// libvips' pixels of page `page` of the TIFF at `path` (through libtiff's WebP codec), as a PNG.
    static func vipsPage(_ path: String, _ page: Int, in folder: String) throws -> RGBAImage {
        let out = "\(folder)/vips-\(page).png"
        let run = try Tools.run("vips", ["copy", "\(path)[page=\(page)]", out])
        try #require(run.status == 0, "vips: \(run.stderr)")
        return try Reference.decodePNG(Data(contentsOf: URL(fileURLWithPath: out)))
    }

    @Test("a master with alpha gets WebP tiles by default: level 0's alpha is the master's, its colour close where visible; the store reopens")
    func defaultForAlpha() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let source = Self.picture()
        let image = try TileBuilder.build(
            data: try Self.png(source), options: TIFFChecks.options { $0.storage = .persistent(path: "\(folder)/a.tiles") })
        #expect((0..<image.levelCount).allSatisfy { image.tileCoding(ofLevel: $0) == .webp })
        let (alphaEqual, psnr) = Self.compare(source, try image.pixels(level: 0))
        #expect(alphaEqual && psnr > 38, "alpha equal \(alphaEqual), \(psnr) dB")
        let reopened = try TiledImage.open(store: "\(folder)/a.tiles")
        #expect(try reopened.pixels(level: 0) == (try image.pixels(level: 0)))
        let description = try StoreDescription.read(at: "\(folder)/a.tiles")
        #expect(description.webp?.quality == 85 && description.webp?.lossless == false && description.quality == nil)
        #expect(description.levelZeroReason == "WebP tiles")
    }

    @Test(
        "lossless WebP tiles: level 0 is the master exactly (RGB under alpha 0 too), every level the raw store's; vips reads every level as we do",
        .enabled(if: Tools.have("vips"), Comment(rawValue: Tools.missing("vips"))))
    func lossless() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let source = Self.picture()
        let png = try Self.png(source)
        let image = try TileBuilder.build(
            data: png,
            options: TIFFChecks.options {
                $0.format = .tiff(TIFFWriting(webpLossless: true))
                $0.storage = .persistent(path: "\(folder)/l.tiles")
            })
        let raw = try TileBuilder.build(data: png)
        #expect(try image.pixels(level: 0) == source)
        for level in 0..<image.levelCount {
            let ours = try image.pixels(level: level)
            #expect(ours == (try raw.pixels(level: level)), "level \(level)")
            #expect(try Self.vipsPage("\(folder)/l.tiles/pyramid.tif", level, in: folder) == ours, "level \(level)")
        }
    }

    @Test("lossless WebP tiles turned by every orientation: each level is the master turned by the plain reference, as the raw store reads it")
    func turned() throws {
        let source = Self.picture(width: 300, height: 170)
        let png = try Self.png(source)
        for orientation in ImageOrientation.allCases where orientation != .identity {
            let image = try TileBuilder.build(
                data: png,
                options: TIFFChecks.options {
                    $0.format = .tiff(TIFFWriting(webpLossless: true))
                    $0.orientation = .fixed(orientation)
                    $0.tileSize = 64
                })
            var raw = BuildOptions()
            raw.orientation = .fixed(orientation)
            raw.tileSize = 64
            let shown = try TileBuilder.build(data: png, options: raw)
            #expect(try image.pixels(level: 0) == Reference.orient(source, orientation.rawValue), "\(orientation)")
            for level in 0..<image.levelCount {
                #expect(try image.pixels(level: level) == (try shown.pixels(level: level)), "\(orientation) level \(level)")
            }
        }
    }

    @Test(
        "lossy WebP tiles as vips reads them: 4 bands on every level, alpha exact at level 0",
        .enabled(if: Tools.have("vips", "vipsheader"), Comment(rawValue: Tools.missing("vips", "vipsheader"))))
    func vipsReadsLossy() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let source = Self.picture()
        let image = try TileBuilder.build(
            data: try Self.png(source), options: TIFFChecks.options { $0.storage = .persistent(path: "\(folder)/v.tiles") })
        let tiff = "\(folder)/v.tiles/pyramid.tif"
        for level in 0..<image.levelCount {
            let bands = try Tools.run("vipsheader", ["-f", "bands", "\(tiff)[page=\(level)]"]).text
            #expect(bands.trimmingCharacters(in: .whitespacesAndNewlines) == "4", "level \(level)")
            let theirs = try Self.vipsPage(tiff, level, in: folder)
            #expect(theirs == (try image.pixels(level: level)), "level \(level)")
        }
        #expect(Self.compare(source, try Self.vipsPage(tiff, 0, in: folder)).alphaEqual)
    }

    @Test(
        "an opaque master in WebP tiles when asked: RGB, 3 samples; JPEG tiles asked for keep a master with alpha in a raw store",
        .enabled(if: Tools.have("vipsheader"), Comment(rawValue: Tools.missing("vipsheader"))))
    func askedFor() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let jpeg = try Synthetic.smoothJPEG(width: 500, height: 300)
        let opaque = try TileBuilder.build(
            data: jpeg,
            options: TIFFChecks.options {
                $0.format = .tiff(TIFFWriting(compression: .webp, webpQuality: 90))
                $0.storage = .persistent(path: "\(folder)/o.tiles")
            })
        #expect(opaque.tileCoding(ofLevel: 0) == .webp && !opaque.isLevelZeroCopied)
        let bands = try Tools.run("vipsheader", ["-f", "bands", "\(folder)/o.tiles/pyramid.tif"]).text
        #expect(bands.trimmingCharacters(in: .whitespacesAndNewlines) == "3")
        #expect(Reference.psnr(try opaque.pixels(level: 0), try TileBuilder.build(data: jpeg).pixels(level: 0)) > 38)
        #expect(try StoreDescription.read(at: "\(folder)/o.tiles").webp?.quality == 90)
        let alpha = try TileBuilder.build(
            data: try Self.png(Self.picture(width: 70, height: 50)),
            options: TIFFChecks.options { $0.format = .tiff(TIFFWriting(compression: .jpeg)) })
        #expect(alpha.tileCoding(ofLevel: 0) == .rawRGBA)
    }

    /// libwebp encodes whole pictures, so each level holds a tile row of RGBA: past 256 MiB of them (an
    /// image 140,000 pixels wide: 140,032 x 256 x 4 bytes at level 0, about as much below) a master with
    /// alpha goes into a raw store by default, and WebP tiles asked for are refused.
    @Test("an image too wide for a tile row of each level: a raw store by default, refused when WebP is asked for")
    func tooWide() throws {
        let (width, height) = (140_000, 2)
        var pixels = [UInt8](repeating: 200, count: width * height * 4)
        for i in stride(from: 3, to: pixels.count, by: 4) { pixels[i] = UInt8(i / 4 % 256) }
        let png = try Self.png(RGBAImage(width: width, height: height, pixels: pixels))
        let image = try TileBuilder.build(data: png, options: TIFFChecks.options())
        #expect(image.tileCoding(ofLevel: 0) == .rawRGBA)
        let asked = TIFFChecks.options { $0.format = .tiff(TIFFWriting(compression: .webp)) }
        #expect(thrownCode { try TileBuilder.build(data: png, options: asked) } == .tooLarge)
    }

    @Test("a corrupt WebP tile is a typed error, not a crash")
    func corruptTile() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        _ = try TileBuilder.build(
            data: try Self.png(Self.picture(width: 300, height: 200)),
            options: TIFFChecks.options { $0.storage = .persistent(path: "\(folder)/c.tiles") })
        // The first tile's bytes (level 0's tiles come first): its RIFF header kept, its body zeroed.
        let path = "\(folder)/c.tiles/pyramid.tif"
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let riff = try #require((0..<(bytes.count - 4)).first { bytes[$0..<($0 + 4)] == [0x52, 0x49, 0x46, 0x46] })
        for i in (riff + 30)..<(riff + 300) { bytes[i] = 0 }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let image = try TiledImage.open(store: "\(folder)/c.tiles")
        #expect(thrownCode { try image.readTile(level: 0, column: 0, row: 0) } == .corrupt)
    }
}
