import Foundation
import Testing
import TestTraits
import TestSupport
@testable import TileCore

/// Encoded renders (JPEG, PNG, gray, the ICC profile), regions off every level's grid, and renders
/// that wait for rows still being decoded. References: libjpeg's and libpng's own decodes, and the
/// exact area average of `RenderTests`.
@Suite("Encoded renders and waiting for rows", .ownThreads)
struct RenderEncodingTests {
    static func fixture() throws -> (data: Data, image: TiledImage, full: RGBAImage) {
        let data = try JPEGEncoder.encode(
            pixels: Synthetic.smooth(width: 1500, height: 1100), width: 1500, height: 1100,
            options: {
                var o = JPEGEncoder.Options()
                o.quality = 95
                return o
            }())
        return (data, try TileBuilder.build(data: data), try Reference.decode(data).image)
    }

    /// Off the grid, from the coarsest level with twice the output's resolution, edges rounded to it:
    /// within a mean absolute difference of 2 and a maximum of 16 levels per channel of the exact
    /// area average (smooth content; measured 0.10-0.72 mean, 1-7 max).
    @Test(
        "regions off every level's grid are close to an exact area average",
        arguments: [
            "17,33,1400,1000/175,125", "3,1,1497,1099/!300,300", "101,99,803,611/100,", "pct:3.3,7.1,80,80/250,"
        ])
    func unaligned(region: String) throws {
        let f = try Self.fixture()
        let request = try ImageRequest(path: "\(region)/0/default.png").resolve(width: 1500, height: 1100)
        let rendered = try f.image.render(request)
        let reference = RenderTests.areaAverage(
            RenderTests.crop(f.full, request.x, request.y, request.width, request.height), request.scaledWidth,
            request.scaledHeight)
        let differences = zip(rendered.bytes, reference.pixels).map { abs(Int($0) - Int($1)) }
        let mean = Double(differences.reduce(0, +)) / Double(differences.count)
        #expect(mean < 2 && differences.max()! <= 16, "\(region): mean \(mean), max \(differences.max()!)")
    }

    @Test("PNG is the rendered pixels exactly; JPEG within 38 dB; gray is one component; ICC kept, no EXIF")
    func encodings() throws {
        let f = try Self.fixture()
        let request = try ImageRequest(path: "100,200,600,500/300,/0/default.png").resolve(width: 1500, height: 1100)
        let pixels = try f.image.render(request)
        let png = try f.image.renderEncoded(request)
        #expect(try Reference.decodePNG(png) == RGBAImage(width: pixels.width, height: pixels.height, pixels: pixels.bytes))

        var jpegRequest = request
        jpegRequest.format = .jpg
        let profile = ICCProfiles.profile(padding: 3000)
        let jpeg = try pixels.encoded(as: .jpg, quality: 90, colorProfile: ColorProfile(profile))
        let decoded = try Reference.decode(jpeg).image
        #expect(Reference.psnr(decoded, RGBAImage(width: pixels.width, height: pixels.height, pixels: pixels.bytes)) >= 38)
        let info = try ImageInfo.read(data: jpeg)
        #expect(info.iccProfile == profile && info.exifOrientation == nil && info.components == 3)

        var grayRequest = jpegRequest
        grayRequest.quality = .gray
        #expect(try ImageInfo.read(data: f.image.renderEncoded(grayRequest)).components == 1)
        grayRequest.format = .png
        let grayPNG = try Reference.decodePNG(f.image.renderEncoded(grayRequest))
        let grayPixels = try f.image.render(grayRequest)
        #expect(grayPNG.pixels == grayPixels.bytes)

        var gif = request
        gif.format = .gif
        #expect(thrownCode { try f.image.renderEncoded(gif) } == .unsupported)
        #expect(thrownCode { try pixels.encoded(as: .jpg, quality: 0) } == .invalidArgument)
    }

    @Test("a render waits for rows still being decoded, and gives up at its deadline")
    func waits() throws {
        let f = try Self.fixture()
        let builder = try TileBuilder()
        try builder.append(f.data.prefix(f.data.count / 3))
        try builder.waitUntilWritten()
        let image = try #require(builder.image)
        let bottom = try ImageRequest(path: "0,1000,100,100/max/0/default.png").resolve(width: 1500, height: 1100)
        let start = ContinuousClock.now
        #expect(thrownCode { try image.render(bottom, waitingUntil: .now + .milliseconds(150)) } == .notReady)
        #expect(ContinuousClock.now - start >= .milliseconds(150))

        // The rest arrives 200 ms into a render that waits up to 10 s.
        let rest = f.data.suffix(from: f.data.count / 3)
        let feeder = DispatchQueue(label: "feeder")
        let finished = DispatchSemaphore(value: 0)
        nonisolated(unsafe) let unsafeBuilder = builder
        feeder.asyncAfter(deadline: .now() + .milliseconds(200)) {
            _ = try? unsafeBuilder.append(rest)
            _ = try? unsafeBuilder.finish()
            finished.signal()
        }
        let rendered = try image.render(bottom, waitingUntil: .now + .seconds(10))
        finished.wait()
        #expect(RGBAImage(width: 100, height: 100, pixels: rendered.bytes) == RenderTests.crop(f.full, 0, 1000, 100, 100))
    }
}

/// A stored tile asked for as it is takes the short path (read, encode with a reused compressor):
/// the same JPEG settings as any render, so its decode matches libjpeg's reference pyramid as closely.
@Suite("Exact tile requests", .ownThreads)
struct ExactTileRequestTests {
    @Test(
        "tiles of every level, edge tiles included, decode to the reference pyramid's tiles within 38 dB",
        arguments: [
            "0,0,256,256/256,256", "1280,1024,220,76/220,76", "512,512,512,512/256,256", "1024,512,476,512/238,256",
            "0,0,1500,1100/188,138"
        ])
    func exactTiles(path: String) throws {
        let f = try RenderEncodingTests.fixture()
        let request = try ImageRequest(path: "\(path)/0/default.jpg").resolve(width: 1500, height: 1100)
        #expect(f.image.geometry.layout.tile(exactly: request) != nil, "\(path) does not take the short path")
        let jpeg = try f.image.renderEncoded(request, quality: 90)
        let decoded = try Reference.decode(jpeg).image
        // The reference: libjpeg's decode, shrunk by 2x2 box averages to the request's level, cropped.
        var (level, k) = (f.full, 1)
        while (request.width + k - 1) / k > request.scaledWidth {
            level = Reference.shrink(level)
            k *= 2
        }
        let want = Reference.crop(level, x: request.x / k, y: request.y / k, width: request.scaledWidth, height: request.scaledHeight)
        #expect(decoded.width == request.scaledWidth && decoded.height == request.scaledHeight)
        #expect(Reference.psnr(decoded, want) >= 38, "\(path): \(Reference.psnr(decoded, want)) dB")
        // The general path's pixels encoded by the general encoder: the same settings, the same quality.
        let general = try f.image.render(request).encoded(as: .jpg, quality: 90)
        #expect(Reference.psnr(decoded, try Reference.decode(general).image) >= 45)
    }

    @Test("the encoder refuses qualities out of range and empty images")
    func encoderArguments() throws {
        #expect(thrownCode { try TileJPEGEncoder(quality: 0) } == .invalidArgument)
        let encoder = try TileJPEGEncoder(quality: 80)
        var pixels = [UInt8](repeating: 128, count: 16 * 16 * 4)  // opaque mid-gray
        for alpha in stride(from: 3, to: pixels.count, by: 4) { pixels[alpha] = 255 }
        let code = pixels.withUnsafeBytes { raw in thrownCode { try encoder.encode(raw, stride: 64, width: 0, height: 16) } }
        #expect(code == .invalidArgument)
        let jpeg = try pixels.withUnsafeBytes { raw in try encoder.encode(raw, stride: 64, width: 16, height: 16) }
        #expect(try Reference.decode(jpeg).image.pixels.enumerated().allSatisfy { $0.offset % 4 == 3 || abs(Int($0.element) - 128) <= 1 })
    }

    @Test("a PNG encode asks its cancellation check every 64 rows and stops when it says so; never asked, the same PNG")
    func pngEncodeCancels() throws {
        let (width, height) = (300, 1000)
        let pixels = RGBAPixels(width: width, height: height, bytes: Synthetic.smooth(width: width, height: height))
        var asked = 0
        let code = thrownCode {
            try pixels.encoded(as: .png) {
                asked += 1
                return asked > 3  // rows 0, 64 and 128 go on; at row 192 it stops
            }
        }
        #expect(code == .cancelled)
        #expect(asked == 4, "asked \(asked) times")
        // Never cancelled: every 64th row asked, and the PNG is the pixels, as libpng's reader gives them.
        asked = 0
        let png = try pixels.encoded(as: .png) {
            asked += 1
            return false
        }
        #expect(asked == (height + 63) / 64)
        #expect(try Reference.decodePNG(png).pixels == pixels.bytes)
        #expect(png == (try pixels.encoded(as: .png)))
    }
}
