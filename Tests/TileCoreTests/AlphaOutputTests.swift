import Foundation
import Testing
import TestTraits
import TestSupport
@testable import TileCore

/// Masters with alpha (issue 28): PNG output keeps the alpha as stored; JPEG output, which keeps none,
/// composites onto white, as IIIF servers do. Reference: the compositing written plainly here,
/// round((c * a + 255 * (255 - a)) / 255), and libjpeg's own decode of our JPEG.
@Suite("Alpha in rendered outputs", .ownThreads)
struct AlphaOutputTests {
    /// 600x400 RGBA: colour from a pattern, alpha a ramp from 0 (left) to 255 (right); where alpha is
    /// 0 the colour is black, which must never show through.
    static func pixels() -> RGBAImage {
        var bytes = [UInt8]()
        for y in 0..<400 {
            for x in 0..<600 {
                let a = x * 255 / 599
                let rgb = a == 0 ? [0, 0, 0] : [(x + y) % 256, (2 * y) % 256, (3 * x) % 256]
                bytes += rgb.map(UInt8.init) + [UInt8(a)]
            }
        }
        return RGBAImage(width: 600, height: 400, pixels: bytes)
    }

    static func overWhite(_ image: RGBAImage) -> RGBAImage {
        var out = image
        for i in stride(from: 0, to: out.pixels.count, by: 4) {
            let a = Int(image.pixels[i + 3])
            for c in 0..<3 { out.pixels[i + c] = UInt8((Int(image.pixels[i + c]) * a + 255 * (255 - a) + 127) / 255) }
            out.pixels[i + 3] = 255
        }
        return out
    }

    @Test("a PNG master with alpha: PNG renders keep its alpha, JPEG renders and tiles are composited onto white")
    func outputs() throws {
        let source = Self.pixels()
        let png = try RGBAPixels(width: 600, height: 400, bytes: source.pixels).encoded(as: .png)
        let image = try TileBuilder.build(data: png)
        let full = try ImageRequest(path: "full/max/0/default.png").resolve(width: 600, height: 400)
        #expect(try Reference.decodePNG(try image.renderEncoded(full)) == source)
        var jpegRequest = full
        jpegRequest.format = .jpg
        let jpeg = try Reference.decode(try image.renderEncoded(jpegRequest, quality: 95)).image
        let reference = Self.overWhite(source)
        let psnr = Reference.psnr(jpeg, reference)
        #expect(psnr > 30, "\(psnr) dB")  // (34 dB measured; black showing through gives 9)
        // The transparent left edge is white, not the black stored under it.
        #expect(jpeg[0, 200].prefix(3).allSatisfy { $0 >= 250 }, "\(Array(jpeg[0, 200]))")
        // The encoder of whole images (JPEGEncoder) composites too.
        let encoded = try Reference.decode(try JPEGEncoder.encode(pixels: source.pixels, width: 600, height: 400)).image
        #expect(Reference.psnr(encoded, reference) > 30 && encoded[1, 10].prefix(3).allSatisfy { $0 >= 245 })
        // IIIF gray as PNG: each pixel's luma (BT.601 weights, rounded) with its alpha (a gray and alpha PNG).
        let gray = try ImageRequest(path: "full/max/0/gray.png").resolve(width: 600, height: 400)
        var expected = source
        for i in stride(from: 0, to: expected.pixels.count, by: 4) {
            let (r, g, b) = (Int(source.pixels[i]), Int(source.pixels[i + 1]), Int(source.pixels[i + 2]))
            let weighted: Int = 299 * r + 587 * g + 114 * b
            let luma = UInt8((weighted + 500) / 1000)
            expected.pixels.replaceSubrange(i..<(i + 3), with: [luma, luma, luma])
        }
        #expect(try Reference.decodePNG(try image.renderEncoded(gray)) == expected)
    }
}

extension AlphaOutputTests {
    @Test("the levels of an image with alpha weight each colour by its alpha: no colour under a transparent pixel bleeds in")
    func weightedLevels() throws {
        let source = Self.pixels()
        let png = try RGBAPixels(width: 600, height: 400, bytes: source.pixels).encoded(as: .png)
        let image = try TileBuilder.build(data: png)
        let levelOne = try image.pixels(level: 1)
        // Written plainly: each 2x2 block's colours weighted by their alphas, rounded; alpha averaged.
        var same = true
        for y in 0..<200 {
            for x in 0..<300 {
                let block = [source[2 * x, 2 * y], source[2 * x + 1, 2 * y], source[2 * x, 2 * y + 1], source[2 * x + 1, 2 * y + 1]]
                let alpha = block.reduce(0) { $0 + Int($1[$1.startIndex + 3]) }
                var expected = [Int]()
                for c in 0..<3 {
                    let sum = block.reduce(0) { $0 + Int($1[$1.startIndex + c]) * (alpha > 0 ? Int($1[$1.startIndex + 3]) : 1) }
                    expected.append(alpha > 0 ? (sum + alpha / 2) / alpha : (sum + 2) / 4)
                }
                expected.append((alpha + 2) / 4)
                if levelOne[x, y].map(Int.init) != expected { same = false }
            }
        }
        #expect(same)
        // A JPEG master (opaque) still shrinks as the plain box filter: the lower-level tests hold.
    }
}
