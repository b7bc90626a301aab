import Foundation
import Testing
import TestTraits
import TestSupport
import TileActors
import TileCore

/// The library examples of the README and of TileActors' DocC, run: the code between the markers below is
/// what they show (a test checks they still do), run against images made here, the README's results
/// checked against libjpeg's decode of its JPEG.
@Suite("The README's library examples", .ownThreads)
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

    /// The lines between `// NAME example: begin` and `... end` in this file, unindented.
    static func example(named name: String) throws -> String {
        let source = try String(contentsOfFile: #filePath, encoding: .utf8)
        let lines = source.split(separator: "\n", omittingEmptySubsequences: false)
        let begin = try #require(lines.firstIndex { $0.hasSuffix("// \(name) example: begin") })
        let end = try #require(lines.firstIndex { $0.hasSuffix("// \(name) example: end") })
        let indent = lines[begin].prefix { $0 == " " }.count
        return lines[(begin + 1)..<end].map { $0.dropFirst(min(indent, $0.prefix { $0 == " " }.count)) }.joined(separator: "\n")
    }

    @Test(
        "the README and TileActors' DocC show the examples this suite runs, as written here",
        arguments: [("README", "README.md"), ("TileActors", "Sources/TileActors/TileActors.docc/TileActors.md")])
    func sameText(name: String, file: String) throws {
        let text = try String(contentsOf: Corpus.packageRoot.appendingPathComponent(file), encoding: .utf8)
        let example = try Self.example(named: name)
        #expect(example.split(separator: "\n").count >= 10, "the markers hold the example")
        #expect(text.contains(example), "\(file)'s example differs from the one run here:\n\(example)")
    }

    /// TileActors' DocC example, with `photo` and `other` (masters' paths) and `folder` given.
    static func actorsExample(photo: String, other: String, folder: String) async throws -> (TiledImage, ImageLoader.BatchReport) {
        // TileActors example: begin
        // photo, other: masters' paths; folder: where the batch's stores go.
        // One image from any source of bytes (here a file; an HTTP body or an upload alike), with progress.
        let builder = try ImageBuilder()
        async let watched: Void = {  // a child task: it ends with the build's progress stream
            for await report in builder.progress { print(report.rowsDecoded, report.height ?? 0) }
        }()
        try await FileImageSource(path: photo).feed(into: builder)
        let image = try await builder.finish()  // cancel() instead stops it and removes its files
        await watched

        // A batch, two at a time, each into a store of its own.
        let report = await ImageLoader(maximumConcurrency: 2).load(
            [FileImageSource(path: photo), FileImageSource(path: other)],
            options: { index in
                var options = BuildOptions()
                options.storage = .persistent(path: "\(folder)/store-\(index).tiles")
                return options
            })
        for result in report.images { print(result.name, result.wallTime) }
        // TileActors example: end
        return (image, report)
    }

    @Test("TileActors' example builds an image with progress, then a batch of two stores")
    func actors() async throws {
        let folder = try Inputs.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let (photo, other) = (folder.appendingPathComponent("photo.jpg").path, folder.appendingPathComponent("other.png").path)
        try DemoImage.jpeg(width: 600, height: 400).write(to: URL(fileURLWithPath: photo))
        try RGBAPixels(width: 300, height: 200, bytes: [UInt8](repeating: 90, count: 300 * 200 * 4)).encoded(as: .png)
            .write(to: URL(fileURLWithPath: other))
        let (image, report) = try await Self.actorsExample(photo: photo, other: other, folder: folder.path)
        #expect(image.isComplete && image.geometry.width == 600 && image.geometry.height == 400)
        let sizes = try report.images.map { result in try result.result.get().geometry }.map { [$0.width, $0.height] }
        #expect(sizes == [[600, 400], [300, 200]])
        #expect(FileManager.default.fileExists(atPath: "\(folder.path)/store-1.tiles/manifest.json"))
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
