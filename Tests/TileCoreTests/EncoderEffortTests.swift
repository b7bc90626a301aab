import Foundation
import Testing
import TestSupport
@testable import TileCore

/// The WebP and AVIF encoders' effort settings (``OutputEncoding/Effort``) checked against Debian's own
/// command-line encoders over the same libraries: `cwebp` and `avifenc`, given the same pixels as a PNG,
/// must make the same bytes.
@Suite(
    "Encoder effort", .enabled(if: Tools.have("cwebp", "avifenc", "avifdec"), Comment(rawValue: Tools.missing("cwebp", "avifenc", "avifdec"))))
struct EncoderEffortTests {
    /// Opaque pixels with colour edges (where the sharp conversion and 4:4:4 matter), 256x192.
    static let pixels = RGBAPixels(width: 256, height: 192, bytes: Synthetic.pixels(width: 256, height: 192))

    /// What `program` makes of `pixels` as a PNG (`arguments` around the input and output names).
    static func outside(_ program: String, of pixels: RGBAPixels = pixels, _ arguments: (String, String) -> [String]) throws -> Data {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("effort-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let (input, output) = ("\(folder)/in.png", "\(folder)/out")
        // Our PNG is lossless: its pixels are `pixels` (checked here by libpng's decode).
        let png = try pixels.encoded(as: .png)
        try #require(try Reference.decodePNG(png).pixels == pixels.bytes)
        try png.write(to: URL(fileURLWithPath: input))
        let run = try Tools.run(program, arguments(input, output))
        try #require(run.status == 0, "\(program): \(run.stderr)")
        return try Data(contentsOf: URL(fileURLWithPath: output))
    }

    @Test(
        "a WebP at each method, with and without the sharp conversion, is cwebp's of the same pixels, byte for byte",
        arguments: [(4, false), (4, true), (6, true), (1, false)])
    func webp(method: Int, sharp: Bool) throws {
        let ours = try Self.pixels.encoded(as: .webp, quality: 85, effort: .init(webpMethod: method, webpSharpYUV: sharp))
        let theirs = try Self.outside("cwebp") { ["-quiet", "-q", "85", "-m", "\(method)"] + (sharp ? ["-sharp_yuv"] : []) + [$0, "-o", $1] }
        #expect(ours == theirs, "\(ours.count) B, cwebp \(theirs.count) B")
        if (method, sharp) != (4, false) { #expect(try ours != Self.pixels.encoded(as: .webp, quality: 85), "not the defaults' bytes") }
    }

    @Test(
        "an AVIF at each speed, in 4:2:0 or 4:4:4, is avifenc's of the same pixels, byte for byte",
        arguments: [(6, false), (8, false), (6, true), (8, true)])
    func avif(speed: Int, fullChroma: Bool) throws {
        let ours = try Self.pixels.encoded(as: .avif, quality: 72, effort: .init(avifSpeed: speed, avifFullChroma: fullChroma))
        // Quality 72 is AV1's quantiser 18 ((100 - 72) * 63 / 100, rounded); full range, one thread, aom.
        let theirs = try Self.outside("avifenc") {
            ["-j", "1", "-c", "aom", "-s", "\(speed)", "-y", fullChroma ? "444" : "420", "-r", "full", "--min", "18", "--max", "18", $0, $1]
        }
        #expect(ours == theirs, "\(ours.count) B, avifenc \(theirs.count) B")
        #expect(try WebDecoders.avifInfo(ours).contains(fullChroma ? "YUV444" : "YUV420"))
    }

    @Test("an AVIF past 2^22 pixels is encoded at speed 8 when a slower speed is set (it cannot be stopped once started): avifenc -s 8's bytes")
    func largeAVIF() throws {
        let large = RGBAPixels(width: 2049, height: 2048, bytes: Synthetic.pixels(width: 2049, height: 2048))
        let ours = try large.encoded(as: .avif, quality: 72, effort: .init(avifSpeed: 4))
        let theirs = try Self.outside("avifenc", of: large) {
            ["-j", "1", "-c", "aom", "-s", "8", "-y", "420", "-r", "full", "--min", "18", "--max", "18", $0, $1]
        }
        #expect(ours == theirs, "\(ours.count) B, avifenc \(theirs.count) B")
    }

    @Test("each setting is named in the answers' label (their entity tags), so that a change of settings changes the tags")
    func labels() {
        #expect(OutputEncoding().label(of: .webp) == "webp85m4")
        #expect(OutputEncoding().label(of: .avif) == "avif72s6")
        let slower = OutputEncoding(effort: .init(webpMethod: 6, webpSharpYUV: true, avifSpeed: 6, avifFullChroma: true))
        #expect(slower.label(of: .webp) == "webp85m6-sharp")
        #expect(slower.label(of: .avif) == "avif72s6-444")
        #expect(OutputEncoding(webpLossless: true, effort: .init(webpSharpYUV: true)).label(of: .webp) == "webp-lossless85m4", "lossless has no YUV")
        #expect(OutputEncoding.Effort(webpMethod: 9, avifSpeed: -1) == .init(webpMethod: 6, avifSpeed: 0), "clamped")
        var set = OutputEncoding()
        (set.effort.webpMethod, set.effort.avifSpeed) = (9, 12)
        #expect(set.label(of: .webp) == "webp85m6" && set.label(of: .avif) == "avif72s10", "what is encoded, whatever was set")
    }
}
