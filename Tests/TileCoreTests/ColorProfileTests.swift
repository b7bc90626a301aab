import Foundation
import Testing
import TestTraits
import TestSupport
@testable import TileCore

/// ICC profiles carried from a master into its stores and every output they describe (issue 28).
/// References: libjpeg's `djpeg -icc` reads a JPEG output's APP2 chunks, `vipsheader -f
/// icc-profile-data` a PNG's iCCP and a TIFF's InterColorProfile; the profiles are made plainly here
/// (an ICC header and an empty tag table, padded to the size asked) or are a fixture's, as djpeg reads it.
@Suite("Colour profiles", .enabled(if: Tools.have("djpeg"), Comment(rawValue: Tools.missing("djpeg"))), .ownThreads)
struct ColorProfileTests {
    static func request(_ path: String, _ image: TiledImage) throws -> ImageRequest.Resolved {
        try ImageRequest(path: path).resolve(width: image.geometry.width, height: image.geometry.height)
    }

    @Test("a header is read: the colour space, what it describes; a header without `acsp` or with a size past its bytes is no profile")
    func header() throws {
        #expect(ColorProfile(ICCProfiles.profile())?.colorSpace == .rgb)
        #expect(ColorProfile(ICCProfiles.profile(space: "GRAY"))?.describes(channels: 1) == true)
        #expect(ColorProfile(ICCProfiles.profile(space: "GRAY"))?.describes(channels: 3) == false)
        #expect(ColorProfile(ICCProfiles.profile(space: "CMYK"))?.describes(channels: 3) == false)
        var broken = ICCProfiles.profile()
        broken[36] = UInt8(ascii: "x")
        #expect(ColorProfile(broken) == nil)
        var long = ICCProfiles.profile()
        long[1] = 0x10  // declares more bytes than there are
        #expect(ColorProfile(long) == nil)
        #expect(ColorProfile([UInt8](repeating: 7, count: 3000)) == nil)
    }

    @Test(
        "raw and TIFF stores keep the profile; JPEG tiles, regions and stored tiles carry it (djpeg), PNGs too (vips); gray outputs of an RGB profile go without",
        .enabled(if: Tools.have("vipsheader"), Comment(rawValue: Tools.missing("vipsheader"))),
        arguments: [StoreFormat.raw, .tiff()], [400, 150_000])
    func storesAndOutputs(format: StoreFormat, padding: Int) throws {
        let profile = ICCProfiles.profile(padding: padding)  // 150,000 bytes: three APP2 chunks
        let folder = try ICCProfiles.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let source = "\(folder)/source.jpg"
        try ICCProfiles.jpeg(width: 700, height: 500, profile: profile).write(to: URL(fileURLWithPath: source))
        var options = BuildOptions()
        options.format = format
        options.storage = .persistent(path: "\(folder)/s.tiles")
        _ = try TileBuilder.build(contentsOfFile: source, options: options)
        let image = try TiledImage.open(store: "\(folder)/s.tiles")
        #expect(image.colorProfile?.bytes == profile)
        if case .tiff = format {
            #expect(try ICCProfiles.vips(file: "\(folder)/s.tiles/pyramid.tif") == profile)
            // Stored tiles as the server sends them: whole (and read as from the page cache), and an edge tile cropped.
            let whole = try #require(try image.storedJPEGTile(level: 0, column: 0, row: 0))
            #expect(try ICCProfiles.djpeg(whole) == (profile, true))
            let location = try #require(try image.storedJPEGTileLocation(level: 0, column: 0, row: 0))
            var read = [UInt8](repeating: 0, count: location.byteCount)
            let cached = try read.withUnsafeMutableBytes { try image.readStoredJPEGTileIfCached(location, into: $0) }
            #expect(cached, "the tile just read is in the page cache: readIfCached must find it")
            #expect(read == [UInt8](whole))
            let edge = try #require(try image.exactJPEGTile(level: 0, column: 2, row: 1))
            #expect(try ICCProfiles.djpeg(edge) == (profile, true))
            #expect(try Reference.decode(edge).image.width == 700 - 512)
        } else {
            #expect(try FileManager.default.contentsOfDirectory(atPath: "\(folder)/s.tiles").contains("profile.icc"))
        }
        let tile = try image.renderEncoded(Self.request("256,256,256,244/256,/0/default.jpg", image))
        #expect(try ICCProfiles.djpeg(tile) == (profile, true))
        let region = try image.renderEncoded(Self.request("100,50,300,200/150,/0/default.jpg", image))
        #expect(try ICCProfiles.djpeg(region) == (profile, true))
        let png = try image.renderEncoded(Self.request("100,50,300,200/150,/0/default.png", image))
        #expect(try ICCProfiles.vips(png, suffix: "png") == profile)
        let gray = try image.renderEncoded(Self.request("100,50,300,200/150,/0/gray.jpg", image))
        #expect(try ICCProfiles.djpeg(gray) == (nil, true))
        let grayPNG = try image.renderEncoded(Self.request("100,50,300,200/150,/0/gray.png", image))
        #expect(try ICCProfiles.vips(grayPNG, suffix: "png") == nil)
    }

    @Test("a gray JPEG's gray profile: kept in its gray TIFF tiles and gray outputs, left out of RGB renders")
    func grayProfile() throws {
        let profile = ICCProfiles.profile(space: "GRAY")
        let image = try TileBuilder.build(
            data: ICCProfiles.jpeg(width: 300, height: 300, gray: true, profile: profile), options: TIFFChecks.options())
        #expect(image.colorProfile?.bytes == profile)
        let stored = try #require(try image.storedJPEGTile(level: 0, column: 0, row: 0))
        #expect(try ICCProfiles.djpeg(stored) == (profile, true))
        #expect(try ICCProfiles.djpeg(image.renderEncoded(Self.request("0,0,300,300/100,/0/gray.jpg", image))) == (profile, true))
        #expect(try ICCProfiles.djpeg(image.renderEncoded(Self.request("0,0,300,300/100,/0/default.jpg", image))) == (nil, true))
    }

    @Test(
        "PNG and TIFF masters: an iCCP chunk and an InterColorProfile reach the outputs",
        .enabled(if: Tools.have("vips"), Comment(rawValue: Tools.missing("vips"))))
    func otherMasters() throws {
        let profile = ICCProfiles.profile(padding: 2000)
        let folder = try ICCProfiles.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try ICCProfiles.jpeg(width: 400, height: 300, profile: profile).write(to: URL(fileURLWithPath: "\(folder)/a.jpg"))
        for name in ["a.png", "a.tif[compression=lzw]"] {
            let run = try Tools.run("vips", ["copy", "\(folder)/a.jpg", "\(folder)/\(name)"])
            #expect(run.status == 0, "\(run.stderr)")
            let file = "\(folder)/\(name.prefix { $0 != "[" })"
            #expect(try ICCProfiles.vips(file: file) == profile, "vips wrote the profile into \(file)")
            let image = try TileBuilder.build(contentsOfFile: file)
            #expect(image.colorProfile?.bytes == profile, "\(file)")
            #expect(try ICCProfiles.djpeg(image.renderEncoded(Self.request("full/max/0/default.jpg", image))) == (profile, true))
        }
    }

    @Test("exports: every DeepZoom tile carries the profile, streamed from a build or read from a store")
    func exports() throws {
        let profile = ICCProfiles.profile(padding: 1000)
        let data = try ICCProfiles.jpeg(width: 600, height: 400, profile: profile)
        let out = try ICCProfiles.folder()
        defer { try? FileManager.default.removeItem(atPath: out) }
        _ = try ExportTests.export(data, name: "s", into: out, ExportOptions())
        let image = try TileBuilder.build(data: data)
        _ = try TileExporter.export(image, name: "r", outputDirectory: out, options: ExportOptions())
        for name in ["s", "r"] {
            let tiles = try FileManager.default.subpathsOfDirectory(atPath: "\(out)/\(name)_files").filter { $0.hasSuffix(".jpg") }
            #expect(tiles.count > 10)
            for tile in tiles.prefix(12) {
                #expect(
                    try ICCProfiles.djpeg(Data(contentsOf: URL(fileURLWithPath: "\(out)/\(name)_files/\(tile)"))) == (profile, true),
                    "\(name) \(tile)")
            }
        }
    }

    @Test(
        "fixtures: icc_profile_big.jpg's 400 KB profile (7 chunks) as djpeg reads it, through a TIFF store's stored tiles and a raw store's renders",
        .enabled(if: Corpus.isPresent, Comment(rawValue: Corpus.skipMessage)))
    func fixture() throws {
        let file = Corpus.folder.appendingPathComponent("icc_profile_big.jpg").path
        let source = try #require(try ICCProfiles.djpeg(Data(contentsOf: URL(fileURLWithPath: file))).profile)
        #expect(source.count > 300_000)
        for format in [StoreFormat.raw, .tiff()] {
            var options = BuildOptions()
            options.format = format
            let image = try TileBuilder.build(contentsOfFile: file, options: options)
            #expect(image.colorProfile?.bytes == source)
            #expect(try ICCProfiles.djpeg(image.renderEncoded(Self.request("0,0,256,250/256,/0/default.jpg", image))) == (source, true))
            if case .tiff = format {
                let stored = try #require(try image.exactJPEGTile(level: 0, column: 1, row: 0))
                #expect(try ICCProfiles.djpeg(stored) == (source, true))
            }
        }
    }
}
