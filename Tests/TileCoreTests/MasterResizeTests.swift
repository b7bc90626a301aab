import Foundation
import Testing
import TestTraits
import TestSupport
@testable import TileCore

/// Thumbnails of PNG and TIFF masters (issue 28: every `tiler` command takes every format). Reference:
/// the plain area average of the source's pixels (``RenderTests/areaAverage(_:_:_:)``), after the
/// compositing onto white written plainly in ``AlphaOutputTests/overWhite(_:)`` for a master with alpha.
@Suite("Resizing PNG and TIFF masters", .ownThreads)
struct MasterResizeTests {
    static func differences(_ a: RGBAImage, _ b: RGBAImage) -> (mean: Double, max: Int) {
        let d = zip(a.pixels, b.pixels).map { abs(Int($0) - Int($1)) }
        return (Double(d.reduce(0, +)) / Double(max(d.count, 1)), d.max() ?? 0)
    }

    @Test("a PNG with alpha: composited onto white, then area-averaged, to each size; the JPEG written is that within its loss")
    func pngWithAlpha() throws {
        let source = AlphaOutputTests.pixels()  // 600x400, alpha a ramp from 0 to 255
        let png = try RGBAPixels(width: 600, height: 400, bytes: source.pixels).encoded(as: .png)
        let folder = try ResizeTests.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        var options = ResizeTests.pixelOptions()
        options.quality = 95
        let results = try ImageResizer.resize(
            data: png, to: [.init(maxEdge: 150, path: folder.appendingPathComponent("a.jpg").path), .init(maxEdge: 600, path: nil)],
            options: options)
        let white = AlphaOutputTests.overWhite(source)
        for (result, size) in zip(results, [(150, 100), (600, 400)]) {
            #expect((result.width, result.height) == size && !result.wasCopied)
            let expected = RenderTests.areaAverage(white, size.0, size.1)
            let got = ResizeTests.image(result.pixels)
            #expect(Self.differences(got, expected).max <= 1, "\(size)")
        }
        // The file: that thumbnail within the loss of libjpeg's own encoding of the reference at the same quality.
        let reference = RenderTests.areaAverage(white, 150, 100)
        let written = try Reference.decode(Data(contentsOf: folder.appendingPathComponent("a.jpg"))).image
        var encoding = JPEGEncoder.Options()
        encoding.quality = 95
        let loss = Reference.psnr(
            try Reference.decode(JPEGEncoder.encode(pixels: reference.pixels, width: 150, height: 100, options: encoding)).image, reference)
        #expect(Reference.psnr(written, reference) >= loss - 0.5)
    }

    @Test(
        "a TIFF (LZW, tiled) and its PNG twin give the same thumbnail; an image within the size is encoded, not copied",
        .enabled(if: Tools.have("vips"), Comment(rawValue: Tools.missing("vips"))))
    func tiff() throws {
        let folder = try ResizeTests.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let pixels = Synthetic.smooth(width: 500, height: 300)
        let png = folder.appendingPathComponent("m.png").path
        try RGBAPixels(width: 500, height: 300, bytes: pixels).encoded(as: .png).write(to: URL(fileURLWithPath: png))
        let tiff = folder.appendingPathComponent("m.tif").path
        let run = try Tools.run("vips", ["copy", png, "\(tiff)[compression=lzw,tile,tile-width=64,tile-height=64]"])
        try #require(run.status == 0, "\(run.stderr)")
        let expected = RenderTests.areaAverage(RGBAImage(width: 500, height: 300, pixels: pixels), 100, 60)
        for file in [tiff, png] {
            let result = try #require(
                try ImageResizer.resize(contentsOfFile: file, to: [.init(maxEdge: 100, path: nil)], options: ResizeTests.pixelOptions()).first)
            #expect(Self.differences(ResizeTests.image(result.pixels), expected).max <= 1, "\(file)")
        }
        // In memory, the TIFF goes through a spool file.
        let spooled = try #require(
            try ImageResizer.resize(
                data: Data(contentsOf: URL(fileURLWithPath: tiff)), to: [.init(maxEdge: 100, path: nil)], options: ResizeTests.pixelOptions()
            ).first)
        #expect(Self.differences(ResizeTests.image(spooled.pixels), expected).max <= 1)
        let out = folder.appendingPathComponent("same.jpg").path
        let same = try #require(try ImageResizer.resize(contentsOfFile: png, to: [.init(maxEdge: 800, path: out)]).first)
        #expect(!same.wasCopied && (same.width, same.height) == (500, 300))
        #expect(try ImageInfo.read(data: Data(contentsOf: URL(fileURLWithPath: out))).format == .jpeg)
    }

    @Test(
        "a lossless JPEG 2000's thumbnail is the area average of its picture",
        .enabled(if: Tools.have("opj_compress"), Comment(rawValue: Tools.missing("opj_compress"))))
    func jpeg2000() throws {
        let folder = try ResizeTests.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let kind = JPEG2000MasterTests.Kind(name: "RGB", channels: 3, options: ["-t", "128,128"])
        let path = try JPEG2000MasterTests.master(kind, width: 500, height: 300, in: folder.path)
        let picture = JPEG2000MasterTests.reference(kind, width: 500, height: 300)
        let result = try #require(
            try ImageResizer.resize(contentsOfFile: path, to: [.init(maxEdge: 100, path: nil)], options: ResizeTests.pixelOptions()).first)
        #expect(Self.differences(ResizeTests.image(result.pixels), RenderTests.areaAverage(picture, 100, 60)).max <= 1)
    }

    @Test("a cut PNG is refused as truncated")
    func cutPNG() throws {
        let png = try RGBAPixels(width: 300, height: 200, bytes: Synthetic.pixels(width: 300, height: 200)).encoded(as: .png)
        #expect(
            thrownCode {
                try ImageResizer.resize(data: png.prefix(png.count / 2), to: [.init(maxEdge: 50, path: nil)], options: ResizeTests.pixelOptions())
            } == .truncated)
    }
}
