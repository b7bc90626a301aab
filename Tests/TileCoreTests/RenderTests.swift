import Foundation
import Testing
import TestTraits
import TestSupport
import TileCore

/// Rendering IIIF requests from a pyramid, against references written plainly here from libjpeg's
/// whole-image decode: a crop, a mirror and quarter turns, BT.601 luma, and an exact area average.
@Suite("Rendering image requests", .ownThreads)
struct RenderTests {
    /// The input, its pyramid and libjpeg's decode of it, made afresh for each test (kept in no static:
    /// the leak checker cannot follow the references a lazily initialized global holds).
    struct Fixture {
        let data: Data
        let image: TiledImage
        let full: RGBAImage

        init() throws {
            data = try Synthetic.jpeg(.init(width: 1500, height: 1100, quality: 92))
            image = try TileBuilder.build(data: data)
            full = try Reference.decode(data).image
        }

        func render(_ path: String) throws -> RGBAPixels {
            try image.render(try ImageRequest(path: path).resolve(width: 1500, height: 1100))
        }
    }

    static func crop(_ source: RGBAImage, _ x: Int, _ y: Int, _ w: Int, _ h: Int) -> RGBAImage {
        var pixels: [UInt8] = []
        for row in y..<(y + h) { pixels += source.pixels[((row * source.width + x) * 4)..<((row * source.width + x + w) * 4)] }
        return RGBAImage(width: w, height: h, pixels: pixels)
    }

    /// Mirrored left to right, then turned clockwise `turns` times, one pixel at a time.
    static func turn(_ source: RGBAImage, mirrored: Bool, turns: Int) -> RGBAImage {
        var image = source
        if mirrored {
            var pixels = image.pixels
            for y in 0..<image.height {
                for x in 0..<image.width {
                    for c in 0..<4 { pixels[(y * image.width + x) * 4 + c] = image.pixels[(y * image.width + image.width - 1 - x) * 4 + c] }
                }
            }
            image.pixels = pixels
        }
        for _ in 0..<turns {  // clockwise: new (x, y) = (h - 1 - y, x)
            var pixels = [UInt8](repeating: 0, count: image.pixels.count)
            for y in 0..<image.height {
                for x in 0..<image.width {
                    let (nx, ny) = (image.height - 1 - y, x)
                    for c in 0..<4 { pixels[(ny * image.height + nx) * 4 + c] = image.pixels[(y * image.width + x) * 4 + c] }
                }
            }
            image = RGBAImage(width: image.height, height: image.width, pixels: pixels)
        }
        return image
    }

    /// Each output pixel the mean of the input area it covers, partial pixels weighted by the part covered.
    static func areaAverage(_ source: RGBAImage, _ width: Int, _ height: Int) -> RGBAImage {
        let sx = Double(source.width) / Double(width), sy = Double(source.height) / Double(height)
        var pixels = [UInt8](repeating: 0, count: width * height * 4)
        for j in 0..<height {
            for i in 0..<width {
                var sum = [Double](repeating: 0, count: 4)
                var y = Double(j) * sy
                while y < Double(j + 1) * sy - 1e-9 {
                    let yNext = min(Double(j + 1) * sy, (y + 1).rounded(.down))
                    var x = Double(i) * sx
                    while x < Double(i + 1) * sx - 1e-9 {
                        let xNext = min(Double(i + 1) * sx, (x + 1).rounded(.down))
                        let weight = (yNext - y) * (xNext - x)
                        for c in 0..<4 { sum[c] += weight * Double(source[Int(x), Int(y)][source[Int(x), Int(y)].startIndex + c]) }
                        x = xNext
                    }
                    y = yNext
                }
                for c in 0..<4 { pixels[(j * width + i) * 4 + c] = UInt8((sum[c] / (sx * sy)).rounded()) }
            }
        }
        return RGBAImage(width: width, height: height, pixels: pixels)
    }

    static func asImage(_ p: RGBAPixels) -> RGBAImage { RGBAImage(width: p.width, height: p.height, pixels: p.bytes) }

    @Test(
        "regions at full size are the exact crop, mirrored and turned as asked",
        arguments: [
            ("0,0,1500,1100", false, 0), ("100,200,300,257", false, 0), ("250,500,700,600", false, 1),
            ("1400,1000,300,300", false, 2), ("3,5,511,1", false, 3), ("100,200,300,257", true, 0),
            ("17,33,600,300", true, 1), ("17,33,600,300", true, 2), ("17,33,600,300", true, 3)
        ])
    func crops(region: String, mirrored: Bool, turns: Int) throws {
        let parts = region.split(separator: ",").map { Int($0)! }
        let (x, y) = (parts[0], parts[1])
        let (w, h) = (min(parts[2], 1500 - x), min(parts[3], 1100 - y))
        let f = try Fixture()
        let rendered = try f.render("\(region)/max/\(mirrored ? "!" : "")\(turns * 90)/default.png")
        #expect(Self.asImage(rendered) == Self.turn(Self.crop(f.full, x, y, w, h), mirrored: mirrored, turns: turns))
    }

    @Test("gray is BT.601 luma of each pixel, rounded")
    func gray() throws {
        let f = try Fixture()
        let rendered = try f.render("40,50,300,200/max/0/gray.jpg")
        let crop = Self.crop(f.full, 40, 50, 300, 200)
        for (i, p) in stride(from: 0, to: crop.pixels.count, by: 4).enumerated() {
            let r: Int = 299 * Int(crop.pixels[p])
            let g: Int = 587 * Int(crop.pixels[p + 1])
            let b: Int = 114 * Int(crop.pixels[p + 2])
            let luma = UInt8((r + g + b + 500) / 1000)
            #expect(Array(rendered.bytes[(i * 4)..<(i * 4 + 3)]) == [luma, luma, luma])
            if rendered.bytes[i * 4] != luma { break }
        }
    }

    /// Reduced sizes are averaged from the coarsest level with enough pixels, itself a 2x2 average of
    /// the one above, so they differ a little from one exact area average of level 0. Tolerance: mean
    /// absolute difference under 1.5 levels per channel, and no channel more than 24 levels apart.
    @Test(
        "reduced sizes are close to an exact area average of the crop",
        arguments: [
            "full/375,/0/default.jpg", "full/!200,200/0/default.jpg", "100,100,1000,800/333,250/0/default.jpg",
            "square/pct:10/0/default.jpg", "1024,768,476,332/119,83/0/default.jpg"
        ])
    func reduced(path: String) throws {
        let f = try Fixture()
        let request = try ImageRequest(path: path).resolve(width: 1500, height: 1100)
        let rendered = try f.image.render(request)
        #expect(rendered.width == request.scaledWidth && rendered.height == request.scaledHeight)
        let reference = Self.areaAverage(
            Self.crop(f.full, request.x, request.y, request.width, request.height), request.scaledWidth, request.scaledHeight)
        let differences = zip(rendered.bytes, reference.pixels).map { abs(Int($0) - Int($1)) }
        let mean = Double(differences.reduce(0, +)) / Double(differences.count)
        #expect(mean < 1.5 && differences.max()! <= 24, "\(path): mean \(mean), max \(differences.max()!)")
    }

    @Test("upscaled sizes repeat the nearest pixel")
    func upscaled() throws {
        let f = try Fixture()
        let rendered = try f.render("10,20,30,40/^60,80/0/default.png")
        let crop = Self.crop(f.full, 10, 20, 30, 40)
        for (j, i) in [(0, 0), (79, 59), (13, 31), (40, 1)] {
            let source = crop[i / 2, j / 2]
            #expect(Array(rendered.bytes[((j * 60 + i) * 4)..<((j * 60 + i) * 4 + 4)]) == Array(source))
        }
    }

    @Test("a region whose tiles are not written yet is not ready")
    func notReady() throws {
        let data = try Synthetic.jpeg(.init(width: 1500, height: 1100, quality: 92))
        let builder = try TileBuilder()
        try builder.append(data.prefix(data.count / 3))
        try builder.waitUntilWritten()
        let image = try #require(builder.image)
        let bottom = try ImageRequest(path: "0,1000,100,100/max/0/default.jpg").resolve(width: 1500, height: 1100)
        #expect(thrownCode { try image.render(bottom) } == .notReady)
        let top = try ImageRequest(path: "0,0,100,100/max/0/default.jpg").resolve(width: 1500, height: 1100)
        #expect(try image.render(top).width == 100)
    }
}
