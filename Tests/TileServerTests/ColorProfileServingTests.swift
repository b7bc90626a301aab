import Foundation
import Testing
import TestSupport
import TileCore
@testable import TileServer

/// A master's ICC profile in what the server sends, read back by `djpeg -icc` and vips: tiles as stored
/// (the connection handler's page-cache path), edge tiles cropped, regions rendered, PNGs.
@Suite(
    "Serving colour profiles", .serialized, .enabled(if: Tools.have("djpeg", "vipsheader"), Comment(rawValue: Tools.missing("djpeg", "vipsheader"))))
struct ColorProfileServingTests {
    @Test("tiles, regions and PNGs of a JPEG with a profile carry it, from TIFF and raw stores", arguments: [StoreFormat.tiff(), .raw])
    func servesProfile(format: StoreFormat) async throws {
        let folder = try ServerLimitsTests.folder([:])
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let profile = ICCProfiles.profile(padding: 5000)
        try ICCProfiles.jpeg(width: 700, height: 500, profile: profile).write(to: URL(fileURLWithPath: "\(folder)/photo.jpg"))
        try await TileServerTests.withServer(folder, format: format) { base, client in
            _ = try await TileServerTests.settled(client, "\(base)/iiif/3/photo/info.json")
            // Level 10 is full size (700 px): tile (0, 0) is a whole stored tile, (2, 1) an edge tile.
            for path in [
                "dzi/photo_files/10/0_0.jpg", "dzi/photo_files/10/0_0.jpg", "dzi/photo_files/10/2_1.jpg",
                "iiif/3/photo/100,50,300,200/150,/0/default.jpg"
            ] {
                let answer = try await TileServerTests.settled(client, "\(base)/\(path)")
                #expect(answer.status == 200)
                #expect(try ICCProfiles.djpeg(answer.body) == (profile, true), "\(path)")
            }
            let png = try await TileServerTests.settled(client, "\(base)/iiif/3/photo/100,50,300,200/150,/0/default.png")
            #expect(try ICCProfiles.vips(png.body, suffix: "png") == profile)
            let gray = try await TileServerTests.settled(client, "\(base)/iiif/3/photo/100,50,300,200/150,/0/gray.jpg")
            #expect(try ICCProfiles.djpeg(gray.body) == (nil, true))
        }
    }

    @Test("WebP tiles of a WebP TIFF store of a JPEG with a profile carry it (whole tiles too: rendered, not stored)")
    func webpStoreProfile() async throws {
        let folder = try ServerLimitsTests.folder([:])
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let profile = ICCProfiles.profile(padding: 5000)
        try ICCProfiles.jpeg(width: 700, height: 500, profile: profile).write(to: URL(fileURLWithPath: "\(folder)/photo.jpg"))
        try await TileServerTests.withServer(folder, format: .tiff(TIFFWriting(compression: .webp))) { base, client in
            for region in ["0,0,256,256/256,", "512,256,188,244/188,"] {
                let answer = try await TileServerTests.settled(client, "\(base)/iiif/3/photo/\(region)/0/default.webp")
                #expect(answer.status == 200 && answer.headers["content-type"] == "image/webp")
                #expect(try ICCProfiles.vips(answer.body, suffix: "webp") == profile, "\(region)")
            }
        }
    }
}
