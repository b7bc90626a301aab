import Foundation
import Testing
import TestTraits
import TestSupport
import TileCore

/// A plainly written area filter: each output pixel is the mean of the input rectangle it covers,
/// partial pixels weighted by the covered fraction, rounded to nearest.
func referenceAreaResize(_ image: RGBAImage, width: Int, height: Int) -> RGBAImage {
    let sx = Double(image.width) / Double(width), sy = Double(image.height) / Double(height)
    var out = [UInt8](repeating: 0, count: width * height * 4)
    for oy in 0..<height {
        for ox in 0..<width {
            var sums = [Double](repeating: 0, count: 4)
            let x0 = Double(ox) * sx, x1 = Double(ox + 1) * sx, y0 = Double(oy) * sy, y1 = Double(oy + 1) * sy
            for y in Int(y0)..<min(image.height, Int(y1.rounded(.up))) {
                let wy = min(y1, Double(y + 1)) - max(y0, Double(y))
                for x in Int(x0)..<min(image.width, Int(x1.rounded(.up))) {
                    let w = wy * (min(x1, Double(x + 1)) - max(x0, Double(x)))
                    for c in 0..<4 { sums[c] += w * Double(image.pixels[(y * image.width + x) * 4 + c]) }
                }
            }
            for c in 0..<4 { out[(oy * width + ox) * 4 + c] = UInt8(min(255, (sums[c] / (sx * sy)).rounded())) }
        }
    }
    return RGBAImage(width: width, height: height, pixels: out)
}

/// Per-channel absolute differences of the colour channels: their mean and the largest one.
func difference(_ a: RGBAImage, _ b: RGBAImage) -> (mean: Double, max: Int) {
    var total = 0, largest = 0, count = 0
    for i in stride(from: 0, to: a.pixels.count, by: 4) {
        for c in 0..<3 {
            let d = abs(Int(a.pixels[i + c]) - Int(b.pixels[i + c]))
            total += d
            largest = max(largest, d)
            count += 1
        }
    }
    return (Double(total) / Double(max(count, 1)), largest)
}

@Suite("Resized copies and thumbnails", .ownThreads)
struct ResizeTests {
    /// The stated tolerances, against "full decode, then a plain area filter". Before encoding, only
    /// DCT-domain scaling (libjpeg's reduced IDCT) separates the two: the mean absolute difference per
    /// colour channel must stay under 3 levels (single pixels on sharp edges may differ by more). The
    /// written file adds quality-80 JPEG loss: under 8 levels.
    static let meanTolerance = 3.0
    static let encodedMeanTolerance = 8.0

    static func pixelOptions() -> ImageResizer.Options {
        var options = ImageResizer.Options()
        options.returnsPixels = true
        return options
    }

    static func image(_ pixels: RGBAPixels?) -> RGBAImage {
        RGBAImage(width: pixels?.width ?? 0, height: pixels?.height ?? 0, pixels: pixels?.bytes ?? [])
    }

    static func folder() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("resize-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    @Test("output size rounding: longest edge = limit, the other side rounded to nearest")
    func outputSize() {
        #expect(ImageResizer.outputSize(width: 1800, height: 1200, maxEdge: 500) == (500, 333))
        #expect(ImageResizer.outputSize(width: 1200, height: 1800, maxEdge: 500) == (333, 500))
        #expect(ImageResizer.outputSize(width: 6000, height: 4000, maxEdge: 1500) == (1500, 1000))
        #expect(ImageResizer.outputSize(width: 1000, height: 3, maxEdge: 100) == (100, 1))  // never 0
        #expect(ImageResizer.outputSize(width: 300, height: 200, maxEdge: 500) == (300, 200))
        #expect(ImageResizer.scaleDenominator(width: 6000, height: 4000, targetWidth: 1500, targetHeight: 1000) == 4)
        #expect(ImageResizer.scaleDenominator(width: 1800, height: 1200, targetWidth: 500, targetHeight: 333) == 2)
    }

    @Test("a generated image: exact size, DCT scaling used, close to the reference filter of the full decode")
    func generated() throws {
        let data = try JPEGEncoder.encode(pixels: Synthetic.smooth(width: 900, height: 600), width: 900, height: 600)
        let out = try Self.folder()
        defer { try? FileManager.default.removeItem(at: out) }
        let path = out.appendingPathComponent("small.jpg").path
        let result = try #require(
            try ImageResizer.resize(data: data, to: [.init(maxEdge: 200, path: path)], options: Self.pixelOptions()).first)
        #expect((result.width, result.height) == (200, 133))
        #expect(result.decodedWidth == 225 && result.decodedHeight == 150)  // 1/4: most coefficients skipped
        let expected = referenceAreaResize(try Reference.decode(data).image, width: 200, height: 133)
        #expect(difference(Self.image(result.pixels), expected).mean < Self.meanTolerance)
        let written = try Reference.decode(try Data(contentsOf: URL(fileURLWithPath: path))).image
        #expect(difference(written, expected).mean < Self.encodedMeanTolerance)
    }

    @Test("several sizes from one decode equal the same sizes made one at a time, within tolerance")
    func severalSizes() throws {
        let data = try Synthetic.jpeg(.init(width: 1024, height: 768))
        var options = ImageResizer.Options()
        options.returnsPixels = true
        let together = try ImageResizer.resize(
            data: data, to: [.init(maxEdge: 500, path: nil), .init(maxEdge: 128, path: nil), .init(maxEdge: 64, path: nil)],
            options: options)
        for result in together {
            let alone = try #require(try ImageResizer.resize(data: data, to: [result.target], options: options).first)
            let a = try #require(result.pixels), b = try #require(alone.pixels)
            #expect((a.width, a.height) == (b.width, b.height))
            #expect(
                difference(
                    RGBAImage(width: a.width, height: a.height, pixels: a.bytes),
                    RGBAImage(width: b.width, height: b.height, pixels: b.bytes)
                ).mean < Self.meanTolerance)
        }
    }

    @Test("EXIF is dropped by default; kept on request with its orientation set to 1", arguments: [false, true])
    func exifOnRequest(bigEndian: Bool) throws {
        let data = try MetadataTests.jpeg(withEXIF: MetadataTests.exifBlock(bigEndian: bigEndian, orientation: 6))
        let out = try Self.folder()
        defer { try? FileManager.default.removeItem(at: out) }
        let dropped = out.appendingPathComponent("dropped.jpg").path, kept = out.appendingPathComponent("kept.jpg").path
        var options = ImageResizer.Options()
        options.reencodesSmallImages = true
        _ = try ImageResizer.resize(data: data, to: [.init(maxEdge: 8, path: dropped)], options: options)
        options.keepsEXIF = true
        let result = try #require(try ImageResizer.resize(data: data, to: [.init(maxEdge: 8, path: kept)], options: options).first)
        #expect((result.width, result.height) == (4, 8))  // 16x8 stored, orientation 6: upright 8x16
        #expect(try ImageInfo.read(contentsOfFile: dropped).exif.isEmpty)
        let info = try ImageInfo.read(contentsOfFile: kept)
        #expect(info.exifOrientation == 1)
        #expect(info.exif["Make"] == .string("Canon"))
    }

    @Test("an image within the limit is copied through unchanged")
    func copiedThrough() throws {
        let data = try Synthetic.jpeg(.init(width: 120, height: 90))
        let out = try Self.folder()
        defer { try? FileManager.default.removeItem(at: out) }
        let path = out.appendingPathComponent("copy.jpg").path
        let result = try #require(try ImageResizer.resize(data: data, to: [.init(maxEdge: 500, path: path)]).first)
        #expect(result.wasCopied)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == data)
    }

    @Test("corrupt or truncated input fails with a typed error and leaves no output; a bad folder names path and errno")
    func badInputAndOutput() throws {
        let data = try Synthetic.jpeg(.init(width: 400, height: 300))
        let out = try Self.folder()
        defer { try? FileManager.default.removeItem(at: out) }
        let path = out.appendingPathComponent("x.jpg").path
        #expect(thrownCode { try ImageResizer.resize(data: data.prefix(data.count / 2), to: [.init(maxEdge: 100, path: path)]) } == .truncated)
        var corrupt = [UInt8](data)
        corrupt[1] = 0
        #expect(thrownCode { try ImageResizer.resize(data: Data(corrupt), to: [.init(maxEdge: 100, path: path)]) } == .corrupt)
        #expect(try FileManager.default.contentsOfDirectory(atPath: out.path).isEmpty)
        let error = thrownError { try ImageResizer.resize(data: data, to: [.init(maxEdge: 100, path: "/nonexistent-folder/x.jpg")]) }
        #expect(error?.code == .io && error?.errno == ENOENT)
        #expect(error?.message.contains("/nonexistent-folder/x.jpg") == true)
    }
}

@Suite("Resizing the corpus", .enabled(if: Corpus.isPresent, Comment(rawValue: Corpus.skipMessage)), .ownThreads)
struct CorpusResizeTests {
    static let oriented = Corpus.entries.filter { $0.file.hasPrefix("Landscape_") || $0.file.hasPrefix("Portrait_") }

    @Test("upright at the exact size for all eight orientations, close to the oriented reference", arguments: oriented)
    func orientationSets(entry: Corpus.Entry) throws {
        let out = try ResizeTests.folder()
        defer { try? FileManager.default.removeItem(at: out) }
        let path = out.appendingPathComponent("out.jpg").path
        let result = try #require(
            try ImageResizer.resize(
                contentsOfFile: entry.path, to: [.init(maxEdge: 300, path: path)], options: ResizeTests.pixelOptions()
            ).first)
        let landscape = entry.file.hasPrefix("Landscape")
        #expect(landscape ? (result.width, result.height) == (300, 200) : (result.width, result.height) == (200, 300))
        #expect(result.decodedWidth < Int(entry["width"])!)
        let written = try Reference.decode(try Data(contentsOf: URL(fileURLWithPath: path))).image
        let stored = try Reference.decode(try Data(contentsOf: URL(fileURLWithPath: entry.path))).image
        let upright = Reference.orient(stored, Int(entry["exif_orientation"])!)
        let expected = referenceAreaResize(upright, width: result.width, height: result.height)
        #expect(difference(ResizeTests.image(result.pixels), expected).mean < ResizeTests.meanTolerance)
        #expect(difference(written, expected).mean < ResizeTests.encodedMeanTolerance)
        let info = try ImageInfo.read(contentsOfFile: path)
        #expect(info.exifOrientation == nil)
    }

    @Test("the ICC profile is kept", arguments: ["icc_profile_big.jpg", "truncated_exif_dpi.jpg"])
    func iccKept(file: String) throws {
        let source = Corpus.folder.appendingPathComponent(file).path
        let out = try ResizeTests.folder()
        defer { try? FileManager.default.removeItem(at: out) }
        let path = out.appendingPathComponent("out.jpg").path
        var options = ImageResizer.Options()
        options.reencodesSmallImages = true
        _ = try ImageResizer.resize(contentsOfFile: source, to: [.init(maxEdge: 100, path: path)], options: options)
        let original = try ImageInfo.read(contentsOfFile: source).iccProfile
        #expect(original != nil)
        #expect(try ImageInfo.read(contentsOfFile: path).iccProfile == original)
        _ = try Reference.decode(try Data(contentsOf: URL(fileURLWithPath: path)))
    }
}
