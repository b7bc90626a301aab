import Foundation
import Testing
import TestSupport
import TileCore
@testable import TileServer

/// PNG masters dropped in the served folder: built on their first request, as JPEGs are, into the
/// server's store format; their tiles against the PNG's own pixels (a lossless file of known pixels).
@Suite("Serving PNG masters", .serialized)
struct PNGServingTests {
    @Test("a PNG in the folder is built and served (DeepZoom and IIIF), in TIFF and raw stores", arguments: [StoreFormat.tiff(), .raw])
    func servesPNG(format: StoreFormat) async throws {
        let folder = try ServerLimitsTests.folder([:])
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let source = RGBAImage(width: 700, height: 500, pixels: Synthetic.smooth(width: 700, height: 500))
        let png = try RGBAPixels(width: 700, height: 500, bytes: source.pixels).encoded(as: .png)
        try png.write(to: URL(fileURLWithPath: "\(folder)/scan.png"))
        try await TileServerTests.withServer(folder, format: format) { base, client in
            let info = try await TileServerTests.settled(client, "\(base)/iiif/3/scan/info.json")
            let json = try #require(try JSONSerialization.jsonObject(with: info.body) as? [String: Any])
            #expect(info.status == 200 && json["width"] as? Int == 700 && json["height"] as? Int == 500)
            // DeepZoom's full size is level 10 (700 px); tile (1, 1) is 256..511 x 256..499.
            let tile = try Reference.decode(try await TileServerTests.settled(client, "\(base)/dzi/scan_files/10/1_1.jpg").body).image
            #expect(tile.width == 256 && tile.height == 244)
            let psnr = Reference.psnr(tile, Reference.crop(source, x: 256, y: 256, width: 256, height: 244))
            #expect(psnr >= 30, "\(psnr) dB")
            let region = try await TileServerTests.settled(client, "\(base)/iiif/3/scan/100,50,300,200/150,/0/default.png")
            #expect(region.status == 200 && region.headers["content-type"] == "image/png")
        }
    }

    @Test("a PNG with alpha under the TIFF default gets WebP tiles: PNG regions keep its alpha, JPEG tiles are composited onto white")
    func servesAlpha() async throws {
        let folder = try ServerLimitsTests.folder([:])
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // Left half transparent over black, right half opaque red.
        var pixels = [UInt8]()
        for _ in 0..<300 { for x in 0..<400 { pixels += x < 200 ? [0, 0, 0, 0] : [255, 0, 0, 255] } }
        let png = try RGBAPixels(width: 400, height: 300, bytes: pixels).encoded(as: .png)
        try png.write(to: URL(fileURLWithPath: "\(folder)/sign.png"))
        try await TileServerTests.withServer(folder, format: .tiff()) { base, client in
            let region = try await TileServerTests.settled(client, "\(base)/iiif/3/sign/full/max/0/default.png")
            #expect(region.status == 200)
            // Alpha exactly (WebP keeps it losslessly); the visible red as lossy WebP keeps it, but for the
            // first visible column, whose chroma (4:2:0) is shared with the transparent black beside it.
            let decoded = try Reference.decodePNG(region.body)
            #expect(decoded.width == 400 && decoded.height == 300)
            let alphaEqual = stride(from: 3, to: pixels.count, by: 4).allSatisfy { decoded.pixels[$0] == pixels[$0] }
            let redClose = stride(from: 0, to: pixels.count, by: 4).allSatisfy { i in
                pixels[i + 3] == 0 || (i / 4) % 400 == 200
                    || (decoded.pixels[i] >= 245 && decoded.pixels[i + 1] <= 10 && decoded.pixels[i + 2] <= 10)
            }
            #expect(alphaEqual && redClose)
            let tile = try Reference.decode(try await TileServerTests.settled(client, "\(base)/dzi/sign_files/9/0_0.jpg").body).image
            #expect(tile[10, 10].prefix(3).allSatisfy { $0 >= 250 }, "\(Array(tile[10, 10]))")  // white, not black
            #expect(tile[230, 10][tile[230, 10].startIndex] >= 240 && tile[230, 10].dropFirst().prefix(2).allSatisfy { $0 <= 15 })
        }
    }
}
