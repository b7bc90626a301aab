import Foundation
import NIOHTTP1
import Testing
import TestSupport
import TileCore
@testable import TileServer

/// TIFF masters on the server: a TIFF in the folder that is not a whole tiled pyramid (stripped, or
/// tiled in one level) is built like a JPEG; a tiled pyramid is served as it is; uploads take TIFF and
/// PNG bodies. Pixels against the source's own (lossless files made by netpbm and libtiff's tools).
@Suite("Serving TIFF masters", .serialized)
struct TIFFMasterServingTests {
    static let tools = Tools.have("pnmtotiff", "tiffcp", "vips")
    static let skip = Comment(rawValue: Tools.missing("pnmtotiff", "tiffcp", "vips"))

    static let source = RGBAImage(width: 700, height: 500, pixels: Synthetic.smooth(width: 700, height: 500))

    /// The source as a stripped RGB TIFF (`pnmtotiff -truecolor -lzw`).
    static func stripped(in folder: String) throws -> Data {
        var ppm = Data("P6\n700 500\n255\n".utf8)
        for i in stride(from: 0, to: source.pixels.count, by: 4) { ppm += source.pixels[i..<(i + 3)] }
        try ppm.write(to: URL(fileURLWithPath: "\(folder)/source.ppm"))
        let run = try Tools.run("pnmtotiff", ["-truecolor", "-lzw", "\(folder)/source.ppm"])
        try #require(run.status == 0, "pnmtotiff: \(run.stderr)")
        try FileManager.default.removeItem(atPath: "\(folder)/source.ppm")
        return run.stdout
    }

    @Test(
        "stripped and one-level tiled TIFFs in the folder are built; a tiled pyramid is served as it is",
        .enabled(if: tools, skip))
    func folderTIFFs() async throws {
        let folder = try ServerLimitsTests.folder([:])
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try Self.stripped(in: folder).write(to: URL(fileURLWithPath: "\(folder)/scan.tif"))
        _ = try Tools.run("tiffcp", ["-t", "-w", "256", "-l", "256", "\(folder)/scan.tif", "\(folder)/flat.tiff"])
        _ = try Tools.run("vips", ["tiffsave", "\(folder)/scan.tif", "\(folder)/pyramid.tif", "--tile", "--pyramid", "--compression", "deflate"])
        try await TileServerTests.withServer(folder) { base, client in
            for id in ["scan", "flat", "pyramid"] {
                let info = try await TileServerTests.settled(client, "\(base)/iiif/3/\(id)/info.json")
                let json = try #require(try JSONSerialization.jsonObject(with: info.body) as? [String: Any])
                #expect(info.status == 200 && json["width"] as? Int == 700 && json["height"] as? Int == 500, "\(id)")
                // A raw store (built) or deflate tiles (served): lossless, the source's own pixels.
                let region = try await TileServerTests.settled(client, "\(base)/iiif/3/\(id)/256,256,256,244/max/0/default.png")
                #expect(region.status == 200, "\(id)")
                let pixels = try Reference.decodePNG(region.body)
                #expect(pixels == Reference.crop(Self.source, x: 256, y: 256, width: 256, height: 244), "\(id)")
            }
        }
        // The masters were built into the cache; the pyramid was not.
        let cache = try FileManager.default.contentsOfDirectory(atPath: "\(folder)/.cache")
        #expect(cache.contains("scan.tiles") && cache.contains("flat.tiles") && !cache.contains("pyramid.tiles"), "\(cache)")
    }

    @Test("uploads take TIFF and PNG bodies; a cut TIFF is refused and leaves nothing", .enabled(if: tools, skip))
    func uploads() async throws {
        let folder = try ServerLimitsTests.folder([:])
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let tiff = try Self.stripped(in: folder)
        let png = try RGBAPixels(width: 700, height: 500, bytes: Self.source.pixels).encoded(as: .png)
        let policy = UploadPolicy(token: "t", maximumBytes: 8 << 20)
        try await TileServerTests.withServer(folder, uploads: policy) { base, client in
            let auth = [("Authorization", "Bearer t")]
            for (id, body) in [("up-tiff", tiff), ("up-png", png)] {
                let created = try await TileServerTests.get(client, "\(base)/images/\(id)", method: .PUT, headers: auth, body: body)
                #expect(created.status == 201, "\(id): \(String(decoding: created.body, as: UTF8.self))")
                let region = try await TileServerTests.get(client, "\(base)/iiif/3/\(id)/0,0,256,256/max/0/default.png")
                #expect(try Reference.decodePNG(region.body) == Reference.crop(Self.source, x: 0, y: 0, width: 256, height: 256), "\(id)")
            }
            let cut = try await TileServerTests.get(client, "\(base)/images/cut", method: .PUT, headers: auth, body: tiff.prefix(tiff.count / 2))
            #expect(cut.status == 400 && !FileManager.default.fileExists(atPath: "\(folder)/cut.tiles"))
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasPrefix(".") && $0 != ".cache" }
            #expect(leftovers.isEmpty, "\(leftovers)")
        }
    }
}
