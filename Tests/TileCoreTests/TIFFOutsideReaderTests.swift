import Foundation
import Testing
import TestTraits
import TestSupport
import TileCore

/// Other programs read the TIFFs this package writes (libtiff's tools, libvips, IIPImage, OpenSlide),
/// and this package reads libvips' TIFFs with the pixels libvips decodes. Each test skips with a
/// message where its program is not installed; CI installs them all.
@Suite("TIFFs and outside readers", .ownThreads)
struct TIFFOutsideReaderTests {
    /// A TIFF store of a generated 1100x700 JPEG with an ICC profile; its folder (removed by the caller).
    static func store() throws -> (folder: String, tiff: String, image: TiledImage) {
        let folder = try TIFFStoreTests.folder()
        var options = JPEGEncoder.Options()
        options.quality = 90
        let encoder = try JPEGEncoder(width: 1100, height: 700, options: options)
        try encoder.writeICCProfile(ICCProfiles.profile(padding: 3000 - 132))  // an ICC header: garbage is not a profile
        let pixels = Synthetic.pixels(width: 1100, height: 700)
        try pixels.withUnsafeBytes { try encoder.writeRows($0, stride: 1100 * 4, count: 700) }
        let jpeg = try encoder.finish()
        let image = try TileBuilder.build(
            data: jpeg, options: TIFFChecks.options { $0.storage = .persistent(path: "\(folder)/s.tiles") })
        return (folder, "\(folder)/s.tiles/pyramid.tif", image)
    }

    /// `vips rawsave` of one page (or SubIFD) of a TIFF: its RGB (or gray) samples.
    static func vipsPixels(_ tiff: String, page: Int, subifd: Int? = nil) throws -> [UInt8] {
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("vips-\(UUID().uuidString).raw").path
        defer { try? FileManager.default.removeItem(atPath: out) }
        let source = subifd.map { "\(tiff)[subifd=\($0)]" } ?? "\(tiff)[page=\(page)]"
        let run = try Tools.run("vips", ["rawsave", source, out])
        guard run.status == 0 else { throw CocoaError(.fileReadCorruptFile, userInfo: [NSLocalizedDescriptionKey: run.stderr]) }
        return Tools.readAll(out)
    }

    /// A level's pixels as `bands` samples a pixel (3: RGB, 1: gray, 4: RGBA).
    static func ourPixels(_ image: TiledImage, level: Int, bands: Int) throws -> [UInt8] {
        var out: [UInt8] = []
        try image.forEachRow(level: level) { _, row in
            for p in stride(from: 0, to: row.count, by: 4) { out.append(contentsOf: row[p..<(p + bands)]) }
        }
        return out
    }

    static func psnr(_ a: [UInt8], _ b: [UInt8]) -> Double {
        precondition(a.count == b.count, "sizes differ: \(a.count) and \(b.count)")
        let squared = zip(a, b).reduce(0.0) { $0 + Double((Int($1.0) - Int($1.1)) * (Int($1.0) - Int($1.1))) }
        return squared == 0 ? .infinity : 10 * log10(255 * 255 / (squared / Double(a.count)))
    }

    @Test(
        "tiffinfo and tiffdump read every directory without a warning",
        .enabled(if: Tools.have("tiffinfo", "tiffdump"), Comment(rawValue: Tools.missing("tiffinfo", "tiffdump"))))
    func libtiffTools() throws {
        let (folder, tiff, image) = try Self.store()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        for tool in ["tiffinfo", "tiffdump"] {
            let run = try Tools.run(tool, [tiff])
            #expect(run.status == 0 && run.stderr.isEmpty, "\(tool): \(run.stderr)")
            #expect(run.text.components(separatedBy: tool == "tiffinfo" ? "TIFF Directory at offset" : "Directory ").count - 1 == image.levelCount)
        }
        let info = try Tools.run("tiffinfo", [tiff]).text
        #expect(info.contains("Compression Scheme: JPEG") && info.contains("YCbCr Subsampling: 2, 2"))
        #expect(info.contains("reduced-resolution image") && info.contains("ICC Profile: <present>, 3000 bytes"))
    }

    @Test(
        "the source's JFIF density becomes the resolution tags; gray stays gray",
        .enabled(
            if: Tools.have("tiffinfo") && Corpus.isPresent,
            Comment(rawValue: [Tools.missing("tiffinfo"), Corpus.isPresent ? "" : Corpus.skipMessage].filter { !$0.isEmpty }.joined(separator: "; ")))
    )
    func resolutionAndGray() throws {
        let folder = try TIFFStoreTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        for (file, expected) in [
            ("Landscape_1.jpg", "Photometric Interpretation: YCbCr"), ("grayscale.jpg", "Photometric Interpretation: min-is-black")
        ] {
            let store = "\(folder)/\(file).tiles"
            _ = try TileBuilder.build(
                contentsOfFile: Corpus.folder.appendingPathComponent(file).path,
                options: TIFFChecks.options { $0.storage = .persistent(path: store) })
            let info = try Tools.run("tiffinfo", ["\(store)/pyramid.tif"]).text
            #expect(info.contains(expected), "\(file): \(info)")
            if file == "Landscape_1.jpg" { #expect(info.contains("Resolution: 72, 72 pixels/inch"), "\(info)") }
        }
    }

    @Test(
        "vips reads every level: level 0 as ours exactly, the others within 50 dB",
        .enabled(if: Tools.have("vips"), Comment(rawValue: Tools.missing("vips"))))
    func vipsReads() throws {
        let (folder, tiff, image) = try Self.store()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        for level in 0..<image.levelCount {
            let theirs = try Self.vipsPixels(tiff, page: level)
            let ours = try Self.ourPixels(image, level: level, bands: 3)
            if level == 0 { #expect(theirs == ours) }
            #expect(Self.psnr(theirs, ours) >= 50, "level \(level)")
        }
    }

    @Test(
        "OpenSlide's generic TIFF reader opens it with our levels",
        .enabled(if: Tools.have("openslide-show-properties"), Comment(rawValue: Tools.missing("openslide-show-properties"))))
    func openSlide() throws {
        let (folder, tiff, image) = try Self.store()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let run = try Tools.run("openslide-show-properties", [tiff])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.text.contains("openslide.vendor: 'generic-tiff'"))
        #expect(run.text.contains("openslide.level-count: '\(image.levelCount)'"))
    }

    static let vipsCodings: [(String, [String])] = [
        ("jpeg", ["--compression", "jpeg", "--Q", "90"]), ("deflate", ["--compression", "deflate"]),
        ("lzw", ["--compression", "lzw"]), ("none", ["--compression", "none"]),
        ("jpeg subifd", ["--compression", "jpeg", "--subifd"]), ("deflate subifd", ["--compression", "deflate", "--subifd"])
    ]

    @Test(
        "TiledImage reads vips' pyramidal TIFFs with the pixels vips decodes, at every level",
        .enabled(if: Tools.have("vips"), Comment(rawValue: Tools.missing("vips"))), arguments: vipsCodings.map(\.0))
    func readsVips(_ coding: String) throws {
        let folder = try TIFFStoreTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let source = "\(folder)/source.jpg"
        try Synthetic.jpeg(.init(width: 1300, height: 777)).write(to: URL(fileURLWithPath: source))
        let tiff = "\(folder)/v.tif"
        let arguments = Self.vipsCodings.first { $0.0 == coding }!.1
        let run = try Tools.run("vips", ["tiffsave", source, tiff, "--tile", "--pyramid", "--tile-width", "256", "--tile-height", "256"] + arguments)
        #expect(run.status == 0, "\(run.stderr)")
        let image = try TiledImage.open(tiff: tiff)
        #expect(image.levelCount == 4)  // 1300x777 down to 162x97, as vips rounds down
        for level in 0..<image.levelCount {
            let subifd = coding.hasSuffix("subifd") && level > 0 ? level - 1 : nil
            let theirs = try Self.vipsPixels(tiff, page: level, subifd: subifd)
            #expect(theirs == (try Self.ourPixels(image, level: level, bands: 3)), "\(coding) level \(level)")
        }
        // vips' JPEG tiles, stored: a whole JPEG each once the level's tables are spliced in.
        let stored = try image.storedJPEGTile(level: 0, column: 1, row: 1)
        #expect((stored != nil) == coding.hasPrefix("jpeg"))
        if let stored {
            let decoded = try Reference.decode(stored).image
            let tile = RGBAImage(width: 256, height: 256, pixels: try image.readTile(level: 0, column: 1, row: 1))
            #expect(Reference.psnr(decoded, tile) > 40)  // one decode with the image's whole-tile upsampling, one as tiles
        }
    }

    @Test(
        "TiledImage reads vips' gray and RGBA TIFFs", .enabled(if: Tools.have("vips"), Comment(rawValue: Tools.missing("vips"))),
        arguments: ["gray", "rgba"])
    func readsVipsBands(_ kind: String) throws {
        let folder = try TIFFStoreTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let source = "\(folder)/source.jpg"
        try Synthetic.jpeg(.init(width: 600, height: 400)).write(to: URL(fileURLWithPath: source))
        let made = "\(folder)/\(kind).v"
        let convert = kind == "gray" ? ["colourspace", source, made, "b-w"] : ["bandjoin_const", source, made, "200"]
        #expect(try Tools.run("vips", convert).status == 0)
        let tiff = "\(folder)/\(kind).tif"
        #expect(try Tools.run("vips", ["tiffsave", made, tiff, "--tile", "--pyramid", "--compression", "deflate"]).status == 0)
        let image = try TiledImage.open(tiff: tiff)
        for level in 0..<image.levelCount {
            let theirs = try Self.vipsPixels(tiff, page: level)
            #expect(theirs == (try Self.ourPixels(image, level: level, bands: kind == "gray" ? 1 : 4)), "\(kind) level \(level)")
        }
    }
}
