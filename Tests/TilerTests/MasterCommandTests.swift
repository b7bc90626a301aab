import Foundation
import Testing
import TestSupport
import TestTraits
import TileCore

/// `tiler` on PNG and TIFF masters, as a user types it: info reads the header only, build tiles them
/// (the page asked for), and a cut file's error offers `--allow-truncated` only for a JPEG.
@Suite("tiler and PNG, TIFF masters", .ownThreads)
struct MasterCommandTests {
    static let tools = Tools.have("pnmtopng", "pnmtotiff", "tiffcp")
    static let skip = Comment(rawValue: Tools.missing("pnmtopng", "pnmtotiff", "tiffcp"))

    /// `folder/name` made by `program` from a 40x30 PPM of a ramp.
    static func make(_ name: String, _ program: String, _ options: [String], in folder: String) throws {
        var ppm = Data("P6\n40 30\n255\n".utf8)
        for y in 0..<30 { for x in 0..<40 { ppm += [UInt8(x * 6), UInt8(y * 8), UInt8((x + y) * 3)] } }
        try ppm.write(to: URL(fileURLWithPath: "\(folder)/ramp.ppm"))
        let run = try Tools.run(program, options + ["\(folder)/ramp.ppm"])
        try #require(run.status == 0, "\(program): \(run.stderr)")
        try run.stdout.write(to: URL(fileURLWithPath: "\(folder)/\(name)"))
    }

    @Test("info describes a TIFF and a PNG master from their headers; build tiles them", .enabled(if: tools, skip))
    func infoAndBuild() throws {
        let folder = try TilerCommandTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try Self.make("m.tif", "pnmtotiff", ["-truecolor", "-lzw"], in: folder)
        try Self.make("m.png", "pnmtopng", [], in: folder)
        let tiff = try TilerCommandTests.run(["info", "m.tif"], in: folder)
        #expect(tiff.status == 0 && tiff.stdout.contains("m.tif: TIFF, 40x30, 3 components, rgb, 8-bit"), "\(tiff)")
        #expect(tiff.stdout.contains("TIFF: LZW, photometric 2, 3 samples a pixel, strips, little-endian, 1 page"), "\(tiff)")
        let json = try TilerCommandTests.run(["info", "m.tif", "--json"], in: folder)
        #expect(json.stdout.contains("\"format\" : \"tiff\"") && json.stdout.contains("\"compressionName\" : \"LZW\""), "\(json)")
        let png = try TilerCommandTests.run(["info", "m.png"], in: folder)
        #expect(png.status == 0 && png.stdout.contains("m.png: PNG, 40x30, 3 components, rgb, 8-bit"), "\(png)")
        for name in ["m.tif", "m.png"] {
            let build = try TilerCommandTests.run(["build", name, "--out", "\(name).tiles"], in: folder)
            #expect(build.status == 0, "\(build)")
            let image = try TiledImage.open(store: "\(folder)/\(name).tiles")
            #expect(image.geometry.width == 40 && image.geometry.height == 30)
        }
        // Thumbnails of both, as JPEGs.
        for name in ["m.tif", "m.png"] {
            let thumb = try TilerCommandTests.run(["thumb", name, "--max-edge", "20", "--out", "\(name).jpg"], in: folder)
            #expect(thumb.status == 0, "\(thumb)")
            let info = try ImageInfo.read(data: Data(contentsOf: URL(fileURLWithPath: "\(folder)/\(name).jpg")))
            #expect(info.format == .jpeg && info.width == 20 && info.height == 15)
        }
        // A JPEG 2000 (when OpenJPEG's tools are installed): info from its header, a build, a thumbnail.
        if Tools.have("opj_compress") {
            _ = try Tools.run("opj_compress", ["-i", "\(folder)/ramp.ppm", "-o", "\(folder)/m.jp2", "-t", "16,16", "-n", "3"])
            let jp2 = try TilerCommandTests.run(["info", "m.jp2"], in: folder)
            #expect(jp2.status == 0 && jp2.stdout.contains("m.jp2: JPEG2000, 40x30, 3 components, rgb, 8-bit"), "\(jp2)")
            #expect(jp2.stdout.contains("JPEG 2000: JP2 file, 6 tiles of 16x16, 3 resolution levels"), "\(jp2)")
            #expect(try TilerCommandTests.run(["build", "m.jp2", "--out", "j.tiles"], in: folder).status == 0)
            #expect(try TilerCommandTests.run(["thumb", "m.jp2", "--max-edge", "20", "--out", "j.jpg"], in: folder).status == 0)
        }
        // Pages: the second of two, and one past the last.
        _ = try Tools.run("tiffcp", ["\(folder)/m.tif", "\(folder)/m.tif", "\(folder)/pages.tif"])
        #expect(try TilerCommandTests.run(["build", "pages.tif", "--page", "1", "--out", "p.tiles"], in: folder).status == 0)
        let missing = try TilerCommandTests.run(["build", "pages.tif", "--page", "2", "--out", "q.tiles"], in: folder)
        #expect(missing.status != 0 && missing.stderr.contains("has no page 2 (it has 2"), "\(missing)")
        #expect(try TilerCommandTests.run(["build", "pages.tif", "--page", "-1"], in: folder).status == 64)
    }

    @Test(
        "a cut JPEG's error offers --allow-truncated; a cut TIFF's, a cut PNG's and an empty input's do not",
        .enabled(if: tools, skip))
    func truncationHint() throws {
        let folder = try TilerCommandTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try Self.make("m.tif", "pnmtotiff", ["-truecolor"], in: folder)
        try Self.make("m.png", "pnmtopng", [], in: folder)
        for name in ["base.jpg", "m.tif", "m.png"] {
            let bytes = Tools.readAll("\(folder)/\(name)")
            try Data(bytes.prefix(bytes.count * 2 / 3)).write(to: URL(fileURLWithPath: "\(folder)/cut-\(name)"))
            let run = try TilerCommandTests.run(["build", "cut-\(name)", "--format", "raw", "--out", "c.tiles"], in: folder)
            #expect(run.status != 0, "\(name)")
            #expect(run.stderr.contains("--allow-truncated accepts it") == (name == "base.jpg"), "\(name): \(run.stderr)")
        }
        let empty = try TilerCommandTests.run(["info", "-"], in: folder, stdin: "")
        #expect(empty.status != 0 && !empty.stderr.contains("--allow-truncated"), "\(empty)")
    }
}
