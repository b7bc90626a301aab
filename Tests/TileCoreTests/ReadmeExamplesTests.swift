import Foundation
import Testing
import TestSupport
import TileCore

/// The README's library examples, run: the code between the markers below is what the README shows
/// (a test checks it still does), run against a JPEG made here, its results checked against libjpeg's
/// decode of that JPEG.
@Suite("The README's library examples")
struct ReadmeExamplesTests {
    /// The README's example, with `photo` (a master's path) and `store` (where its store goes) given.
    static func example(photo: String, store: String) throws -> (image: TiledImage, pixels: [UInt8], jpeg: Data?, region: Data) {
        // README example: begin
        // 1. Build a pyramid: a TIFF store (level 0 copied losslessly from a JPEG), published by one rename.
        var options = BuildOptions()
        options.format = .tiff()
        options.storage = .persistent(path: store)
        let image = try TileBuilder.build(contentsOfFile: photo, options: options)

        // 2. Read a tile: 256x256 RGBA pixels, upright; or the stored tile itself, a whole JPEG, not decoded.
        let pixels = try image.readTile(level: 0, column: 1, row: 1)
        let jpeg = try image.storedJPEGTile(level: 0, column: 1, row: 1)  // nil for a raw store

        // 3. Render a region: an IIIF request, resolved against the image's size, encoded as a JPEG.
        let request = try ImageRequest(path: "256,128,512,512/256,/0/default.jpg")
        let resolved = try request.resolve(width: image.geometry.width, height: image.geometry.height)
        let region = try image.renderEncoded(resolved)
        // README example: end
        return (image, pixels, jpeg, region)
    }

    @Test("the README shows the example this suite runs, as written here")
    func sameText() throws {
        let readme = try String(contentsOf: Corpus.packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let source = try String(contentsOfFile: #filePath, encoding: .utf8)
        let lines = source.split(separator: "\n", omittingEmptySubsequences: false)
        let begin = try #require(lines.firstIndex { $0.hasSuffix("// README example: begin") })
        let end = try #require(lines.firstIndex { $0.hasSuffix("// README example: end") })
        let example = lines[(begin + 1)..<end].map { $0.dropFirst(min(8, $0.prefix { $0 == " " }.count)) }.joined(separator: "\n")
        #expect(readme.contains(example), "the README's example differs from the one run here:\n\(example)")
    }

    @Test("the example builds a pyramid, reads a tile and renders a region: libjpeg's pixels")
    func run() throws {
        let folder = try Inputs.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let source = try DemoImage.jpeg(width: 1000, height: 700)
        let photo = folder.appendingPathComponent("photo.jpg").path
        try source.write(to: URL(fileURLWithPath: photo))
        let (image, pixels, jpeg, region) = try Self.example(photo: photo, store: folder.appendingPathComponent("photo.tiles").path)
        let reference = try Reference.decode(source).image
        #expect(image.geometry.width == 1000 && image.geometry.height == 700 && image.isLevelZeroCopied)
        let tile = Reference.crop(reference, x: 256, y: 256, width: 256, height: 256)
        #expect(Reference.psnr(RGBAImage(width: 256, height: 256, pixels: pixels), tile) >= 40, "the tile's pixels")
        let stored = try Reference.decode(try #require(jpeg)).image
        #expect(stored.width == 256 && stored.height == 256 && Reference.psnr(stored, tile) >= 40, "the stored tile")
        let rendered = try Reference.decode(region).image
        let expected = Reference.shrink(Reference.crop(reference, x: 256, y: 128, width: 512, height: 512))
        #expect(rendered.width == 256 && rendered.height == 256 && Reference.psnr(rendered, expected) >= 30, "the region")
    }
}
