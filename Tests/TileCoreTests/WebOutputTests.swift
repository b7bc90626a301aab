import Foundation
import Testing
import TestSupport
import TestTraits
@testable import TileCore

/// WebP and AVIF outputs (issue 39), decoded by the outside decoders (`dwebp`, `avifdec`) and compared
/// with the pixels given: lossless WebP exactly, alpha exactly (WebP's alpha and AVIF's are stored
/// losslessly), lossy files by PSNR against the same pixels as a JPEG at its default quality.
@Suite("WebP and AVIF outputs", .enabled(if: WebDecoders.installed, Comment(rawValue: WebDecoders.missing)))
struct WebOutputTests {
    /// A ramp of alpha over a pattern, black where alpha is 0 (``AlphaOutputTests/pixels()``, 600x400).
    static func ramp() -> RGBAImage { AlphaOutputTests.pixels() }

    static func encoded(_ image: RGBAImage, as format: ImageRequest.Format, quality: Int? = nil, lossless: Bool = false, gray: Bool = false)
        throws -> Data
    {
        try RGBAPixels(width: image.width, height: image.height, bytes: image.pixels).encoded(
            as: format, quality: quality, lossless: lossless, gray: gray)
    }

    static func alphas(_ image: RGBAImage) -> [UInt8] { stride(from: 3, to: image.pixels.count, by: 4).map { image.pixels[$0] } }

    @Test("a lossless WebP decodes to the very pixels given, alpha and the colour under it included")
    func losslessWebP() throws {
        let source = Self.ramp()
        let webp = try Self.encoded(source, as: .webp, lossless: true)
        #expect(webp.starts(with: Array("RIFF".utf8)) && webp[8..<12].elementsEqual("WEBP".utf8))
        #expect(try WebDecoders.webp(webp) == source)
    }

    @Test("lossy WebP and AVIF keep alpha exactly; an opaque image gets no alpha channel", arguments: [ImageRequest.Format.webp, .avif])
    func alpha(format: ImageRequest.Format) throws {
        let source = Self.ramp()
        let data = try Self.encoded(source, as: format)
        let decoded = try format == .webp ? WebDecoders.webp(data) : WebDecoders.avif(data)
        #expect(decoded.width == source.width && decoded.height == source.height)
        #expect(Self.alphas(decoded) == Self.alphas(source))
        // Opaque: the same colours, alpha 255 everywhere, and (AVIF) no alpha item.
        var opaque = source
        for i in stride(from: 3, to: opaque.pixels.count, by: 4) { opaque.pixels[i] = 255 }
        let solid = try Self.encoded(opaque, as: format)
        if format == .avif {
            #expect(try WebDecoders.avifInfo(data).contains("Alpha          : Not premultiplied"))
            #expect(try WebDecoders.avifInfo(solid).contains("Alpha          : Absent"))
        } else {
            #expect(try WebDecoders.webpInfo(data).contains("alpha"))
            #expect(try WebDecoders.webpInfo(solid).contains("No features present."))
        }
        let back = try format == .webp ? WebDecoders.webp(solid) : WebDecoders.avif(solid)
        #expect(Self.alphas(back).allSatisfy { $0 == 255 })
        // As close to the pixels as the default JPEG is, within 1 dB.
        let jpeg = Reference.psnr(try Reference.decode(Self.encoded(opaque, as: .jpg)).image, opaque)
        #expect(Reference.psnr(back, opaque) >= jpeg - 1, "\(Reference.psnr(back, opaque)) dB, JPEG \(jpeg) dB")
    }

    @Test("a gray AVIF is luma only and decodes gray; a gray WebP decodes gray")
    func gray() throws {
        var pixels = [UInt8]()
        for y in 0..<120 { for x in 0..<160 { pixels += [UInt8((x + 2 * y) % 256), UInt8((x + 2 * y) % 256), UInt8((x + 2 * y) % 256), 255] } }
        let source = RGBAImage(width: 160, height: 120, pixels: pixels)
        let avif = try Self.encoded(source, as: .avif, gray: true)
        #expect(try WebDecoders.avifInfo(avif).contains("YUV400"))
        for decoded in [try WebDecoders.avif(avif), try WebDecoders.webp(Self.encoded(source, as: .webp, gray: true))] {
            let channels = stride(from: 0, to: decoded.pixels.count, by: 4).map { decoded.pixels[$0..<($0 + 3)] }
            #expect(channels.allSatisfy { $0.max()! - $0.min()! <= 2 })
            #expect(Reference.psnr(decoded, source) >= 30)
        }
    }

    @Test("photos: WebP and AVIF at their default qualities are, on average, within 1 dB of the default JPEG's PSNR, in fewer bytes")
    func photos() throws {
        // The camera photos libjpeg decodes without a warning, and one of the landscapes: three 512x512
        // crops of each (a viewer's regions), as the `formats` benchmark measures them.
        let photos = Corpus.entries.filter {
            $0["djpeg_ok"].lowercased() == "y" && $0["components"] == "3" && !$0["category"].contains("corrupt")
                && ($0["category"].contains("camera") || $0.file == "Landscape_0.jpg")
        }
        try #require(!photos.isEmpty, Comment(rawValue: Corpus.skipMessage))
        var (bytes, psnr): ([ImageRequest.Format: Int], [ImageRequest.Format: Double]) = ([:], [:])
        var crops = 0
        for photo in photos {
            let full = try Reference.decode(Data(contentsOf: URL(fileURLWithPath: photo.path))).image
            let (w, h) = (min(512, full.width), min(512, full.height))
            for (fx, fy) in [(1, 1), (1, 3), (3, 1)] {
                let crop = Reference.crop(full, x: (full.width - w) * fx / 4, y: (full.height - h) * fy / 4, width: w, height: h)
                crops += 1
                for format in [ImageRequest.Format.jpg, .webp, .avif] {
                    let data = try Self.encoded(crop, as: format)
                    let decoded =
                        try format == .jpg ? Reference.decode(data).image : format == .webp ? WebDecoders.webp(data) : WebDecoders.avif(data)
                    bytes[format, default: 0] += data.count
                    psnr[format, default: 0] += Reference.psnr(decoded, crop)
                }
            }
        }
        let mean = psnr.mapValues { $0 / Double(crops) }
        let said = Comment(rawValue: "\(crops) crops: bytes \(bytes), mean PSNR \(mean)")
        #expect(mean[.webp]! >= mean[.jpg]! - 1 && mean[.avif]! >= mean[.jpg]! - 1, said)
        #expect(bytes[.webp]! < bytes[.jpg]! && bytes[.avif]! < bytes[.webp]!, said)
    }

    @Test("a colour profile goes with the image: WebP's ICCP chunk, AVIF's colr box (read by webpmux and avifdec)")
    func profiles() throws {
        let profile = ICCProfiles.profile()
        let pixels = RGBAPixels(width: 64, height: 48, bytes: Synthetic.pixels(width: 64, height: 48))
        let color = try #require(ColorProfile(profile))
        let webp = try pixels.encoded(as: .webp, colorProfile: color)
        #expect(try WebDecoders.webp(webp).width == 64)
        #expect(try WebDecoders.webpProfile(webp) == profile)
        #expect(try WebDecoders.webpProfile(pixels.encoded(as: .webp)) == nil)
        let avif = try pixels.encoded(as: .avif, colorProfile: color)
        #expect(try WebDecoders.avifInfo(avif).contains("ICC Profile    : Present (\(profile.count) bytes)"))
        #expect(try WebDecoders.avifInfo(pixels.encoded(as: .avif)).contains("ICC Profile    : Absent"))
    }

    @Test("an encode asked to stop stops: WebP as it goes, AVIF before it starts")
    func cancellation() throws {
        let pixels = RGBAPixels(width: 512, height: 512, bytes: Synthetic.pixels(width: 512, height: 512))
        var asked = 0
        #expect(
            thrownCode {
                try pixels.encoded(
                    as: .webp,
                    isCancelled: {
                        asked += 1; return asked > 1
                    })
            } == .cancelled)
        #expect(asked >= 2, "libwebp's progress hook asked \(asked) times")
        #expect(thrownCode { try pixels.encoded(as: .avif, isCancelled: { true }) } == .cancelled)
        #expect(try pixels.encoded(as: .webp, isCancelled: { false }).count > 0)
    }

    @Test("what the formats cannot take is refused with a typed error")
    func refusals() throws {
        let wide = RGBAPixels(width: 16384, height: 1, bytes: [UInt8](repeating: 128, count: 16384 * 4))
        #expect(thrownCode { try wide.encoded(as: .webp) } == .unsupported)
        #expect(
            thrownCode { try RGBAPixels(width: 8, height: 8, bytes: [UInt8](repeating: 9, count: 256)).encoded(as: .avif, quality: 0) }
                == .invalidArgument)
        #expect(thrownCode { try RGBAPixels(width: 8, height: 8, bytes: [UInt8](repeating: 9, count: 256)).encoded(as: .gif) } == .unsupported)
        #expect(try ImageRequest(path: "full/max/0/default.avif").resolve(width: 100, height: 80).canonicalPath == "full/max/0/default.avif")
    }
}
