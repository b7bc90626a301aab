import AsyncHTTPClient
import Foundation
import Testing
import TestSupport
import TileCore
@testable import TileServer

/// IIIF Image API 2.1 beside 3.0 (`/iiif/2/...`), on the same service: its info.json as the 2.1
/// specification's section 5 lays it out, its size syntax (`full`), its profile link; pixels
/// compared with libjpeg's decode of the source.
@Suite("IIIF Image API 2.1", .serialized)
struct IIIF2Tests {
    @Test("info.json 2.1: @context, @id, protocol, profile [level2, description], sizes, tiles; JSON-LD when asked for")
    func information() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await TileServerTests.withServer(folder) { base, client in
            let reply = try await SourceVersionTests.get(client, "\(base)/iiif/2/photo/info.json")
            #expect(reply.status == 200 && reply.headers["content-type"] == "application/json")
            #expect(reply.headers["link"] == "<http://iiif.io/api/image/2/level2.json>;rel=\"profile\"")
            let info = try #require(try JSONSerialization.jsonObject(with: reply.body) as? [String: Any])
            #expect(info["@context"] as? String == "http://iiif.io/api/image/2/context.json")
            #expect(info["@id"] as? String == "\(base)/iiif/2/photo")
            #expect(info["protocol"] as? String == "http://iiif.io/api/image")
            #expect(info["width"] as? Int == 1300 && info["height"] as? Int == 900)
            let profile = try #require(info["profile"] as? [Any])
            #expect(profile.first as? String == "http://iiif.io/api/image/2/level2.json")
            let description = try #require(profile.last as? [String: Any])
            #expect(description["formats"] as? [String] == ["jpg", "png", "webp", "avif"])
            #expect(Set(description["qualities"] as? [String] ?? []) == ["default", "color", "gray", "bitonal"])
            #expect(description["maxWidth"] as? Int == 8192)
            // 1300x900 halved until one tile: 650, 325, 163; the sizes are 163x113 and every smaller level,
            // each half the one above, rounded up (82x57, 41x29, ...).
            let tiles = try #require(info["tiles"] as? [[String: Any]])
            #expect(tiles.first?["width"] as? Int == 256 && tiles.first?["scaleFactors"] as? [Int] == [1, 2, 4, 8])
            let sizes = try #require(info["sizes"] as? [[String: Int]])
            #expect(
                sizes.last == ["width": 163, "height": 113] && sizes.contains(["width": 82, "height": 57])
                    && sizes.contains(["width": 41, "height": 29]))
            #expect(info["id"] == nil && info["type"] == nil, "3.0's keys are not 2.1's")

            let linked = try await SourceVersionTests.get(client, "\(base)/iiif/2/photo/info.json", headers: [("Accept", "application/ld+json")])
            #expect(linked.headers["content-type"] == "application/ld+json;profile=\"http://iiif.io/api/image/2/context.json\"")
            let redirect = try await TileServerTests.get(client, "\(base)/iiif/2/photo")
            #expect(redirect.status == 303 && redirect.headers["location"] == "\(base)/iiif/2/photo/info.json")
        }
    }

    @Test("2.1 image requests: full and the 2.1 sizes, the source's pixels; ^ and upscaling refused")
    func images() async throws {
        let (folder, jpeg) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let source = try Reference.decode(jpeg).image
        try await TileServerTests.withServer(folder) { base, client in
            let region = try await SourceVersionTests.get(client, "\(base)/iiif/2/photo/256,256,256,256/full/0/default.png")
            #expect(region.status == 200 && region.headers["link"] == "<http://iiif.io/api/image/2/level2.json>;rel=\"profile\"")
            #expect(try Reference.decodePNG(region.body) == Reference.crop(source, x: 256, y: 256, width: 256, height: 256))
            let whole = try await SourceVersionTests.get(client, "\(base)/iiif/2/photo/full/full/0/default.png")
            #expect(try Reference.decodePNG(whole.body) == source)
            for (size, width, height) in [("650,", 650, 450), (",450", 650, 450), ("pct:50", 650, 450), ("!325,325", 325, 225), ("max", 1300, 900)] {
                let reply = try await SourceVersionTests.get(client, "\(base)/iiif/2/photo/full/\(size)/0/default.jpg")
                let decoded = try Reference.decode(reply.body).image
                #expect(reply.status == 200 && decoded.width == width && decoded.height == height, "\(size)")
            }
            for size in ["^650,", "2000,", "pct:200"] {
                #expect(try await TileServerTests.get(client, "\(base)/iiif/2/photo/full/\(size)/0/default.jpg").status == 400, "\(size)")
            }
            #expect(try await TileServerTests.get(client, "\(base)/iiif/3/photo/full/full/0/default.jpg").status == 400, "3.0 has no size full")
        }
    }
}
