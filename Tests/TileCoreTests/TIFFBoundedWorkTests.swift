import Foundation
import Testing
import TestTraits
import TestSupport
import TileCore

/// TIFF masters whose directories declare far more work than their pixels: many samples a pixel,
/// tiles far larger than the image. A pixel's colour samples and alpha are the only ones read, so the
/// work per pixel does not grow with the samples a file declares. (Before, every sample was unpacked:
/// a CCITT G4 file of 419 bytes, 4,096 x 256 pixels and 4,000 samples a pixel, took 97 s in the fuzz
/// target under its sanitizers, as the fax codec needs one bit a row.) Tiles are decoded whole, so
/// tiles that would cost more than 16 times the image's bytes (plus 256 MiB) are refused.
///
/// The files are written plainly (`Bombs.tiff`), by the TIFF 6.0 layout (a header, one directory, the strips or
/// tiles); the references are the sample values written, T.6's rule that a row coded as one V0 over
/// an all-white reference row is all white, and PackBits' rule that bytes 0x81 0x00 are 128 zeros.
@Suite("TIFF masters: work bounded by the pixels", .ownThreads)
struct TIFFBoundedWorkTests {
    /// Sample `c` of pixel (x, y) in the test images.
    static func sample(_ x: Int, _ y: Int, _ c: Int) -> UInt8 { UInt8((x * 31 + y * 17 + c * 7) & 255) }

    @Test(
        "RGB with 37 extra samples, alpha the third of them: R, G, B and that alpha, contiguous or in planes",
        arguments: [false, true])
    func manyExtraSamples(separate: Bool) throws {
        let (width, height, samples, alpha) = (5, 3, 40, 5)
        // ExtraSamples: 0 unspecified, 2 unassociated alpha (TIFF 6.0, section 18).
        let extra = (3..<samples).map { UInt32($0 == alpha ? 2 : 0) }
        let strips: [[UInt8]] =
            separate
            ? (0..<samples).map { c in (0..<height).flatMap { y in (0..<width).map { x in Self.sample(x, y, c) } } }
            : [(0..<height).flatMap { y in (0..<width).flatMap { x in (0..<samples).map { c in Self.sample(x, y, c) } } }]
        let bytes = Bombs.tiff(
            [
                (256, 4, [UInt32(width)]), (257, 4, [UInt32(height)]), (258, 3, [8]), (259, 3, [1]), (262, 3, [2]),
                (277, 3, [UInt32(samples)]), (278, 4, [UInt32(height)]), (284, 3, [separate ? 2 : 1]), (338, 3, extra)
            ],
            strips: strips)
        let decoded = Deadline.run(within: .seconds(60)) { try TileBuilder.build(data: Data(bytes)).pixels(level: 0) }
        let ours = try #require(decoded, "not decoded within 60 s").get()
        let reference = RGBAImage(
            width: width, height: height,
            pixels: (0..<height).flatMap { y in (0..<width).flatMap { x in [0, 1, 2, alpha].map { Self.sample(x, y, $0) } } })
        #expect(ours == reference)
    }

    @Test("a CCITT G4 file of 158 bytes declaring 65,535 samples a pixel decodes at once, all white")
    func faxOfManySamples() throws {
        let (width, height) = (4096, 256)
        // T.6: each row of an all-white page against an all-white reference row is the single code V0
        // ("1"); then EOFB, two EOLs (000000000001 000000000001).
        let rows = [UInt8](repeating: 0xFF, count: height / 8)
        let bytes = Bombs.tiff(
            [
                (256, 4, [UInt32(width)]), (257, 4, [UInt32(height)]), (258, 3, [1]), (259, 3, [4]), (262, 3, [0]),
                (277, 3, [65535]), (278, 4, [UInt32(height)])
            ],
            strips: [rows + [0x00, 0x10, 0x01]])
        let decoded = Deadline.run(within: .seconds(60)) { try TileBuilder.build(data: Data(bytes)).pixels(level: 0) }
        let ours = try #require(decoded, "not decoded within 60 s").get()
        #expect(ours == RGBAImage(width: width, height: height, pixels: [UInt8](repeating: 255, count: width * height * 4)))
    }

    @Test("tiles 1,048,576 pixels wide over an image 1 pixel wide are refused before any is decoded; a tile larger than a small image is read")
    func tilesLargerThanTheImage() throws {
        // 256 tiles of 1,048,576 x 16 gray pixels, each the same PackBits bytes (16 MiB of zeros): 4 GiB
        // to decode for 4,096 pixels.
        let zeros = (0..<(1 << 17)).flatMap { _ in [0x81, 0x00] as [UInt8] }  // 131,072 runs of 128 zeros
        let wide = Bombs.tiff(
            [
                (256, 4, [1]), (257, 4, [4096]), (258, 3, [8]), (259, 3, [32773]), (262, 3, [1]), (277, 3, [1]),
                (322, 4, [1 << 20]), (323, 4, [16])
            ],
            strips: [zeros], tiled: true, pointers: Array(repeating: 0, count: 256))
        #expect(thrownCode { try TileBuilder.build(data: Data(wide)) } == .unsupported)
        // A 5 x 3 image in one 16 x 16 tile (raw): its pixels, the tile's other samples unused.
        let tile = (0..<16).flatMap { y in (0..<16).map { x in Self.sample(x, y, 0) } }
        let small = Bombs.tiff(
            [(256, 4, [5]), (257, 4, [3]), (258, 3, [8]), (259, 3, [1]), (262, 3, [1]), (277, 3, [1]), (322, 4, [16]), (323, 4, [16])],
            strips: [tile], tiled: true)
        let ours = try TileBuilder.build(data: Data(small)).pixels(level: 0)
        let gray: [UInt8] = (0..<3).flatMap { y in
            (0..<5).flatMap { x -> [UInt8] in
                let g = Self.sample(x, y, 0); return [g, g, g, 255]
            }
        }
        #expect(ours == RGBAImage(width: 5, height: 3, pixels: gray))
    }
}
