import Foundation
import NIOCore
import NIOHTTP1
import Testing
import TestSupport
import TileCore
@testable import TileServer

/// `.webp` and `.avif` answers over HTTP (issue 39): listed in info.json, encoded as asked, decoded by
/// the outside decoders; entity tags and the answer cache as for JPEG, the format part of both.
@Suite("Serving WebP and AVIF", .serialized, .enabled(if: WebDecoders.installed, Comment(rawValue: WebDecoders.missing)))
struct WebFormatServingTests {
    @Test("info.json lists webp and avif (3.0 extraFormats, 2.1 formats); regions and tiles answer in them")
    func answers() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await TileServerTests.withServer(folder) { base, client in
            let info = try await TileServerTests.settled(client, "\(base)/iiif/3/photo/info.json")
            let json = try #require(try JSONSerialization.jsonObject(with: info.body) as? [String: Any])
            #expect(json["extraFormats"] as? [String] == ["webp", "avif"])
            // The same region in each format: the PNG is the rendered pixels exactly (libpng decodes it),
            // the others are within a JPEG's distance of them, at the same size.
            let region = "\(base)/iiif/3/photo/200,100,600,400/300,/0/default"
            let png = try Reference.decodePNG(try await TileServerTests.settled(client, region + ".png").body)
            for (suffix, type) in [("webp", "image/webp"), ("avif", "image/avif"), ("jpg", "image/jpeg")] {
                let reply = try await TileServerTests.settled(client, "\(region).\(suffix)")
                #expect(reply.status == 200 && reply.headers["content-type"] == type, "\(suffix)")
                let decoded =
                    try suffix == "webp"
                    ? WebDecoders.webp(reply.body) : suffix == "avif" ? WebDecoders.avif(reply.body) : Reference.decode(reply.body).image
                #expect(decoded.width == 300 && decoded.height == 200)
                #expect(Reference.psnr(decoded, png) >= 34, "\(suffix): \(Reference.psnr(decoded, png)) dB")
            }
            // A tile as a viewer asks for it, and a gray one.
            let tile = try await TileServerTests.settled(client, "\(base)/iiif/3/photo/256,256,256,256/256,/0/default.avif")
            #expect(try WebDecoders.avif(tile.body).width == 256)
            let gray = try await TileServerTests.settled(client, "\(base)/iiif/3/photo/0,0,512,512/256,/0/gray.avif")
            #expect(try WebDecoders.avifInfo(gray.body).contains("YUV400"))
            let v2 = try await TileServerTests.settled(client, "\(base)/iiif/2/photo/0,0,512,512/256,/0/default.webp")
            #expect(try v2.status == 200 && WebDecoders.webp(v2.body).width == 256)
        }
    }

    @Test("each format has its own entity tag; a conditional request gets 304; the answer is kept in the cache")
    func caching() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let server = try TileServer(root: folder, cache: "\(folder)/.cache", storeFormat: .raw)
        let cache = server.routes.service.cache
        try await TileServerTests.withServer(server) { base, client in
            let key = "/iiif/3/photo/0,0,512,512/256,/0/default"
            let path = base + key
            let webp = try await TileServerTests.settled(client, path + ".webp")
            let avif = try await TileServerTests.settled(client, path + ".avif")
            let jpeg = try await TileServerTests.settled(client, path + ".jpg")
            let tags = [webp, avif, jpeg].compactMap { $0.headers["etag"] }
            #expect(tags.count == 3 && Set(tags).count == 3, "\(tags)")
            // Kept under its own path, one entry a format.
            #expect(cache.image(for: key + ".webp")?.body.readableBytes == webp.body.count)
            #expect(cache.image(for: key + ".avif")?.mediaType == "image/avif")
            let again = try await TileServerTests.get(client, path + ".webp")
            #expect(again.body == webp.body && again.headers["etag"] == webp.headers["etag"])
            let conditional = try await TileServerTests.get(client, path + ".webp", headers: [("If-None-Match", webp.headers["etag"] ?? "")])
            #expect(conditional.status == 304 && conditional.body.isEmpty)
            let head = try await TileServerTests.get(client, path + ".avif", method: .HEAD)
            #expect(head.status == 200 && head.body.isEmpty && head.headers["content-length"] == String(avif.body.count))
        }
    }

    @Test("a WebP TIFF store's whole tile asked for in WebP is its stored file; an edge tile is rendered at its own size")
    func storedWebPTiles() async throws {
        let folder = try ServerLimitsTests.folder([:])
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var pixels = [UInt8]()
        for y in 0..<400 { for x in 0..<600 { pixels += [UInt8(x % 256), UInt8(y % 256), UInt8((x + y) % 256), UInt8(x / 3 % 256)] } }
        let master = RGBAImage(width: 600, height: 400, pixels: pixels)
        try RGBAPixels(width: 600, height: 400, bytes: pixels).encoded(as: .png).write(to: URL(fileURLWithPath: "\(folder)/alpha.png"))
        try await TileServerTests.withServer(folder, format: .tiff(TIFFWriting(webpLossless: true))) { base, client in
            let whole = try await TileServerTests.settled(client, "\(base)/iiif/3/alpha/256,0,256,256/256,/0/default.webp")
            #expect(whole.status == 200 && whole.headers["content-type"] == "image/webp")
            // dwebp's pixels are the master's (the store is lossless, alpha and all) ...
            #expect(try WebDecoders.webp(whole.body) == Reference.crop(master, x: 256, y: 0, width: 256, height: 256))
            // ... and the bytes are the stored tile's, as the store's TIFF holds it.
            let tiff = try #require(FileManager.default.enumerator(atPath: folder)?.compactMap { $0 as? String }.first { $0.hasSuffix(".tif") })
            let store = try TiledImage.open(tiff: "\(folder)/\(tiff)")
            #expect(whole.body == (try store.storedWebPTile(level: 0, column: 1, row: 0)))
            // An edge tile's stored picture holds padding: rendered, encoded at the server's WebP quality.
            let edge = try WebDecoders.webp(
                try await TileServerTests.settled(client, "\(base)/iiif/3/alpha/512,256,88,144/88,/0/default.webp").body)
            #expect(edge.width == 88 && edge.height == 144)
            #expect(Reference.psnr(edge, Reference.crop(master, x: 512, y: 256, width: 88, height: 144)) >= 30)
        }
    }

    @Test("the server's qualities: a lower WebP quality gives fewer bytes and another tag; lossless WebP gives the pixels")
    func qualities() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = "/iiif/3/photo/200,100,600,400/300,/0/default"
        var defaults: (Data, String?) = (Data(), nil)
        try await TileServerTests.withServer(folder) { base, client in
            let reply = try await TileServerTests.settled(client, "\(base)\(path).webp")
            defaults = (reply.body, reply.headers["etag"])
        }
        let low = try TileServer(root: folder, cache: "\(folder)/.cache", storeFormat: .raw, encoding: OutputEncoding(webpQuality: 30))
        try await TileServerTests.withServer(low) { base, client in
            let reply = try await TileServerTests.settled(client, "\(base)\(path).webp")
            #expect(reply.body.count < defaults.0.count && reply.headers["etag"] != defaults.1)
        }
        let lossless = try TileServer(root: folder, cache: "\(folder)/.cache", storeFormat: .raw, encoding: OutputEncoding(webpLossless: true))
        try await TileServerTests.withServer(lossless) { base, client in
            let png = try Reference.decodePNG(try await TileServerTests.settled(client, "\(base)\(path).png").body)
            let webp = try WebDecoders.webp(try await TileServerTests.settled(client, "\(base)\(path).webp").body)
            #expect(webp == png)
        }
    }

    @Test("the server's effort settings reach the encoders: a 4:4:4 AVIF (avifdec says so) and a slower WebP, each under another tag")
    func effort() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = "/iiif/3/photo/200,100,600,400/300,/0/default"
        var tags: [String: String] = [:]
        try await TileServerTests.withServer(folder) { base, client in
            let avif = try await TileServerTests.settled(client, "\(base)\(path).avif")
            #expect(try WebDecoders.avifInfo(avif.body).contains("YUV420"), "4:2:0 by default")
            tags["avif"] = avif.headers["etag"]
            tags["webp"] = try await TileServerTests.settled(client, "\(base)\(path).webp").headers["etag"]
        }
        let effort = OutputEncoding.Effort(webpMethod: 6, webpSharpYUV: true, avifSpeed: 6, avifFullChroma: true)
        let slower = try TileServer(root: folder, cache: "\(folder)/.cache", storeFormat: .raw, encoding: OutputEncoding(effort: effort))
        try await TileServerTests.withServer(slower) { base, client in
            let avif = try await TileServerTests.settled(client, "\(base)\(path).avif")
            #expect(try WebDecoders.avifInfo(avif.body).contains("YUV444"))
            let webp = try await TileServerTests.settled(client, "\(base)\(path).webp")
            #expect(avif.headers["etag"] != tags["avif"] && webp.headers["etag"] != tags["webp"])
            let png = try Reference.decodePNG(try await TileServerTests.settled(client, "\(base)\(path).png").body)
            let (webpPixels, avifPixels) = (try WebDecoders.webp(webp.body), try WebDecoders.avif(avif.body))
            #expect(Reference.psnr(webpPixels, png) >= 30 && Reference.psnr(avifPixels, png) >= 30)
        }
    }
}
