import Foundation
import Testing
import TestTraits
import TestSupport
import TileCore

/// DeepZoom and IIIF exports, checked file by file against the formats' own arithmetic (written
/// plainly here), and tile by tile against libjpeg's whole-image decode shrunk by a plain 2x2 box
/// average (`Reference.shrink`): PNG tiles exactly, JPEG tiles within a stated PSNR.
@Suite("Exporting DeepZoom and IIIF tiles", .ownThreads)
struct ExportTests {
    /// A fresh, empty folder, removed by the caller.
    static func folder() throws -> String {
        let path = NSTemporaryDirectory() + "export-test-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        return path
    }

    static func files(_ root: String) -> [String] { regularFiles(below: root) }

    /// DeepZoom's levels, from its definition: level N (the highest) is the full size, each level
    /// below is half the one above rounded up, level 0 is 1x1.
    static func deepZoomLevels(_ width: Int, _ height: Int) -> [(Int, Int)] {
        var levels = [(width, height)]
        while levels[0] != (1, 1) { levels.insert(((levels[0].0 + 1) / 2, (levels[0].1 + 1) / 2), at: 0) }
        return levels
    }

    /// A DeepZoom tile's rectangle in its level: tile size T, overlap o on every inner side.
    static func deepZoomTile(_ c: Int, _ r: Int, level: (Int, Int), tile t: Int, overlap o: Int)
        -> (x: Int, y: Int, w: Int, h: Int)
    {
        let x0 = max(0, c * t - o), y0 = max(0, r * t - o)
        let x1 = min(level.0, (c + 1) * t + o), y1 = min(level.1, (r + 1) * t + o)
        return (x0, y0, x1 - x0, y1 - y0)
    }

    /// The pyramid of the reference decode: level 0 full size.
    static func referenceLevels(_ data: Data) throws -> [RGBAImage] {
        var levels = [try Reference.decode(data).image]
        while levels.last!.width > 1 || levels.last!.height > 1 { levels.append(Reference.shrink(levels.last!)) }
        return levels
    }

    static func export(
        _ data: Data, name: String, into out: String, _ options: ExportOptions, build: BuildOptions = BuildOptions()
    ) throws -> TileExporter.Result {
        let exporter = try TileExporter(name: name, outputDirectory: out, options: options, buildOptions: build)
        var offset = 0
        while offset < data.count {  // as bytes arrive: 64 KiB at a time
            try exporter.append(data[offset..<min(offset + 65536, data.count)])
            offset += 65536
        }
        return try exporter.finish()
    }

    @Test(
        "DeepZoom: the file list, the .dzi and every PNG tile's pixels",
        arguments: [(1000, 700, 256, 0), (513, 300, 254, 1), (257, 1, 256, 0), (1, 1, 256, 0), (640, 480, 100, 3)])
    func deepZoomPNG(width: Int, height: Int, tile: Int, overlap: Int) throws {
        let data = try Synthetic.jpeg(.init(width: width, height: height, quality: 90))
        let out = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: out) }
        var options = ExportOptions()
        options.tileSize = tile
        options.overlap = overlap
        options.format = .png
        let result = try Self.export(data, name: "img", into: out, options)
        #expect(result.paths == ["\(out)/img_files", "\(out)/img.dzi"])

        let levels = Self.deepZoomLevels(width, height)
        let reference = try Self.referenceLevels(data)
        var expected: [String] = []
        for (number, size) in levels.enumerated() {
            for c in 0..<((size.0 + tile - 1) / tile) {
                for r in 0..<((size.1 + tile - 1) / tile) { expected.append("img_files/\(number)/\(c)_\(r).png") }
            }
        }
        #expect(Self.files(out) == (expected + ["img.dzi"]).sorted())
        #expect(result.levelCount == levels.count && result.tileCount == expected.count)

        let dzi = try String(contentsOfFile: "\(out)/img.dzi", encoding: .utf8)
        #expect(dzi.contains("xmlns=\"http://schemas.microsoft.com/deepzoom/2008\""))
        #expect(dzi.contains("Format=\"png\"") && dzi.contains("Overlap=\"\(overlap)\"") && dzi.contains("TileSize=\"\(tile)\""))
        #expect(dzi.contains("<Size Height=\"\(height)\" Width=\"\(width)\"/>"))

        for (number, size) in levels.enumerated() {
            let source = reference[levels.count - 1 - number]
            #expect((source.width, source.height) == size)
            for c in 0..<((size.0 + tile - 1) / tile) {
                for r in 0..<((size.1 + tile - 1) / tile) {
                    let rect = Self.deepZoomTile(c, r, level: size, tile: tile, overlap: overlap)
                    let png = try Reference.decodePNG(Data(contentsOf: URL(fileURLWithPath: "\(out)/img_files/\(number)/\(c)_\(r).png")))
                    let want = Reference.crop(source, x: rect.x, y: rect.y, width: rect.w, height: rect.h)
                    #expect(png == want, "level \(number) tile \(c)_\(r)")
                }
            }
        }
    }

    /// Levels under 64 pixels are left out: a 29x19 level of this image is all edges, and 4:2:0
    /// chroma costs it 26 dB (measured), as it does any JPEG encoder.
    @Test("DeepZoom JPEG tiles: libjpeg's decode of each within 40 dB of the reference (quality 90)")
    func deepZoomJPEG() throws {
        // Smooth content (photographs are; noise is not what JPEG is for).
        let data = try JPEGEncoder.encode(pixels: Synthetic.smooth(width: 900, height: 600), width: 900, height: 600)
        let out = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: out) }
        var options = ExportOptions()
        options.format = .jpeg(quality: 90)
        options.overlap = 1
        options.tileSize = 254
        _ = try Self.export(data, name: "photo", into: out, options)
        let levels = Self.deepZoomLevels(900, 600)
        let reference = try Self.referenceLevels(data)
        var worst = Double.infinity
        for (number, size) in levels.enumerated() where min(size.0, size.1) >= 64 {
            for c in 0..<((size.0 + 253) / 254) {
                for r in 0..<((size.1 + 253) / 254) {
                    let rect = Self.deepZoomTile(c, r, level: size, tile: 254, overlap: 1)
                    let jpeg = try Data(contentsOf: URL(fileURLWithPath: "\(out)/photo_files/\(number)/\(c)_\(r).jpg"))
                    let tile = try Reference.decode(jpeg).image
                    let want = Reference.crop(reference[levels.count - 1 - number], x: rect.x, y: rect.y, width: rect.w, height: rect.h)
                    #expect((tile.width, tile.height) == (want.width, want.height))
                    worst = min(worst, Reference.psnr(tile, want))
                }
            }
        }
        #expect(worst >= 40, "worst tile \(worst) dB")
    }

    @Test("IIIF 3: info.json and every tile at its canonical path, from the specification's arithmetic")
    func iiif() throws {
        let (width, height) = (1000, 700)
        let data = try Synthetic.jpeg(.init(width: width, height: height, quality: 90))
        let out = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: out) }
        var options = ExportOptions()
        options.layout = .iiif3(baseURL: "https://example.org/iiif/")
        options.format = .png
        let result = try Self.export(data, name: "page", into: out, options)
        #expect(result.paths == ["\(out)/page"])

        let info = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: "\(out)/page/info.json"))) as! [String: Any]
        #expect(info["@context"] as? String == "http://iiif.io/api/image/3/context.json")
        #expect(info["id"] as? String == "https://example.org/iiif/page")
        #expect(info["type"] as? String == "ImageService3" && info["profile"] as? String == "level0")
        #expect(info["protocol"] as? String == "http://iiif.io/api/image")
        #expect(info["width"] as? Int == width && info["height"] as? Int == height)
        let tiles = info["tiles"] as! [[String: Any]]
        #expect(tiles.count == 1 && tiles[0]["width"] as? Int == 256 && tiles[0]["height"] == nil)
        // Scale factors down to the first that makes the whole image one tile: 1000 -> 500 -> 250.
        #expect(tiles[0]["scaleFactors"] as? [Int] == [1, 2, 4])
        let sizes = (info["sizes"] as! [[String: Int]]).map { ($0["width"]!, $0["height"]!) }
        let wanted: [(Int, Int)] = [(1, 1), (2, 2), (4, 3), (8, 6), (16, 11), (32, 22), (63, 44), (125, 88), (250, 175)]
        #expect(sizes.map { "\($0.0)x\($0.1)" } == wanted.map { "\($0.0)x\($0.1)" })

        // The implementation notes' tile regions: for scale factor s, regions of 256s, the edge ones
        // cut at the image's edge; the size is the region divided by s, rounded up.
        let reference = try Self.referenceLevels(data)
        var expected = Set<String>()
        for (k, s) in [1, 2, 4].enumerated() {
            for y in stride(from: 0, to: height, by: 256 * s) {
                for x in stride(from: 0, to: width, by: 256 * s) {
                    let w = min(256 * s, width - x), h = min(256 * s, height - y)
                    let sw = (w + s - 1) / s, sh = (h + s - 1) / s
                    let path = "page/\(x),\(y),\(w),\(h)/\(sw),\(sh)/0/default.png"
                    expected.insert(path)
                    let png = try Reference.decodePNG(Data(contentsOf: URL(fileURLWithPath: "\(out)/\(path)")))
                    #expect(png == Reference.crop(reference[k], x: x / s, y: y / s, width: sw, height: sh), "\(path)")
                }
            }
        }
        for (w, h) in wanted {
            let path = "page/full/\(w),\(h)/0/default.png"
            expected.insert(path)
            let level = reference.first { $0.width == w && $0.height == h }!
            #expect(try Reference.decodePNG(Data(contentsOf: URL(fileURLWithPath: "\(out)/\(path)"))) == level)
        }
        expected.formUnion(["page/info.json", "page/manifest.json", "page/index.html"])
        #expect(Set(Self.files(out)) == expected)

        // The manifest beside it (Presentation 3.0): its ids under the base URL, each image it names an
        // exported file of the size it states, its service the level-0 info.json's id.
        let manifest = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: "\(out)/page/manifest.json"))) as? [String: Any])
        #expect(manifest["id"] as? String == "https://example.org/iiif/page/manifest.json" && manifest["type"] as? String == "Manifest")
        let canvas = try #require((manifest["items"] as? [[String: Any]])?.first)
        #expect(canvas["width"] as? Int == width && canvas["height"] as? Int == height)
        let annotation = try #require(((canvas["items"] as? [[String: Any]])?.first?["items"] as? [[String: Any]])?.first)
        let images = [annotation["body"]] + (canvas["thumbnail"] as? [Any] ?? []) + (manifest["thumbnail"] as? [Any] ?? [])
        #expect(images.count == 3)
        for case let image as [String: Any] in images {
            let id = try #require(image["id"] as? String)
            #expect(id.hasPrefix("https://example.org/iiif/page/") && image["format"] as? String == "image/png", "\(id)")
            let png = try Reference.decodePNG(Data(contentsOf: URL(fileURLWithPath: "\(out)/" + id.dropFirst("https://example.org/iiif/".count))))
            #expect(png.width == image["width"] as? Int && png.height == image["height"] as? Int, "\(id)")
            let service = try #require((image["service"] as? [[String: Any]])?.first)
            #expect(service["id"] as? String == info["id"] as? String && service["profile"] as? String == "level0")
        }
        // The viewer page reads the info.json beside it.
        let page = try String(contentsOfFile: "\(out)/page/index.html", encoding: .utf8)
        #expect(page.contains("BASE = \".\"") && page.contains("LIVE = false") && page.contains("EXT = \"png\""))
    }

    @Test("A turned image is exported upright, from its finished pyramid", arguments: [6, 3])
    func turned(orientation: Int) throws {
        let data = try Synthetic.jpeg(.init(width: 600, height: 350, quality: 90))
        var build = BuildOptions()
        build.orientation = .fixed(ImageOrientation(rawValue: orientation)!)
        let out = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: out) }
        var options = ExportOptions()
        options.format = .png
        let result = try Self.export(data, name: "t", into: out, options, build: build)
        let upright = Reference.orient(try Reference.decode(data).image, orientation)
        #expect((result.width, result.height) == (upright.width, upright.height))
        let levels = Self.deepZoomLevels(upright.width, upright.height)
        let top = levels.count - 1
        let tile = try Reference.decodePNG(Data(contentsOf: URL(fileURLWithPath: "\(out)/t_files/\(top)/1_0.png")))
        #expect(tile == Reference.crop(upright, x: 256, y: 0, width: min(256, upright.width - 256), height: 256))
    }

    @Test("From a store: the same files and pixels as from the JPEG")
    func fromStore() throws {
        let data = try Synthetic.jpeg(.init(width: 700, height: 500, quality: 90))
        let out = try Self.folder(), other = try Self.folder()
        defer {
            try? FileManager.default.removeItem(atPath: out)
            try? FileManager.default.removeItem(atPath: other)
        }
        var options = ExportOptions()
        options.format = .png
        options.overlap = 2
        options.tileSize = 200
        _ = try Self.export(data, name: "a", into: out, options)
        let image = try TileBuilder.build(data: data)
        _ = try TileExporter.export(image, name: "a", outputDirectory: other, options: options)
        #expect(Self.files(out) == Self.files(other))
        for file in Self.files(out) where file.hasSuffix(".png") {
            let a = try Reference.decodePNG(Data(contentsOf: URL(fileURLWithPath: "\(out)/\(file)")))
            let b = try Reference.decodePNG(Data(contentsOf: URL(fileURLWithPath: "\(other)/\(file)")))
            #expect(a == b, "\(file)")
        }
    }

    @Test("A store kept beside the export is the pyramid a build makes")
    func keptStore() throws {
        let data = try Synthetic.jpeg(.init(width: 800, height: 530, quality: 90))
        let out = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: out) }
        let exporter = try TileExporter(name: "k", outputDirectory: out, keepingStoreAt: "\(out)/k.tiles")
        try exporter.append(data)
        let result = try exporter.finish()
        #expect(result.storePath == "\(out)/k.tiles")
        let store = try TiledImage.open(store: "\(out)/k.tiles")
        let reference = try Self.referenceLevels(data)
        for level in 0..<store.levelCount { #expect(try store.pixels(level: level) == reference[level]) }
    }

    @Test("Bad input, an output that is not a folder, an existing export: clear errors, nothing left behind")
    func failures() throws {
        let data = try Synthetic.jpeg(.init(width: 900, height: 700, quality: 90))
        let out = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: out) }
        // Cut in the middle of the scan: truncated; the staging folder and every tile are gone.
        let exporter = try TileExporter(name: "cut", outputDirectory: out)
        try exporter.append(data.prefix(data.count / 2))
        #expect(thrownCode { try exporter.finish() } == .truncated)
        #expect(try FileManager.default.contentsOfDirectory(atPath: out).isEmpty)
        // Not a JPEG at all.
        let garbage = try TileExporter(name: "garbage", outputDirectory: out)
        #expect(thrownCode { try garbage.append(Data(repeating: 0x41, count: 5000)) } == .corrupt)
        #expect(try FileManager.default.contentsOfDirectory(atPath: out).isEmpty)
        // The output is a file; then a folder that does not exist.
        _ = FileManager.default.createFile(atPath: "\(out)/file", contents: Data("x".utf8))
        #expect(thrownCode { try TileExporter(name: "x", outputDirectory: "\(out)/file") } == .invalidArgument)
        #expect(thrownCode { try TileExporter(name: "x", outputDirectory: "\(out)/missing") } == .io)
        #expect(thrownCode { try TileExporter(name: "x", outputDirectory: "/proc") } == .io)  // not writable, even for root
        // Names that are not plain file names, options out of range.
        for name in ["", "../up", "a/b", ".hidden"] {
            #expect(thrownCode { try TileExporter(name: name, outputDirectory: out) } == .invalidArgument)
        }
        var options = ExportOptions()
        options.overlap = 256
        #expect(thrownCode { try TileExporter(name: "o", outputDirectory: out, options: options) } == .invalidArgument)
        // An existing export is refused, unless replacing it is asked for.
        _ = try Self.export(data, name: "x", into: out, ExportOptions())
        #expect(thrownCode { try TileExporter(name: "x", outputDirectory: out) } == .invalidArgument)
        let again = try TileExporter(name: "x", outputDirectory: out, replacingExisting: true)
        try again.append(data)
        _ = try again.finish()
        #expect(try FileManager.default.contentsOfDirectory(atPath: out).sorted() == ["file", "x.dzi", "x_files"])
        // A cancelled export leaves nothing.
        let cancelled = try TileExporter(name: "c", outputDirectory: out)
        try cancelled.append(data.prefix(data.count - 100))
        cancelled.cancel()
        #expect(try FileManager.default.contentsOfDirectory(atPath: out).sorted() == ["file", "x.dzi", "x_files"])
    }
}
