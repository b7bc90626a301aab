import Foundation
import NIOHTTP1
import Testing
import TestSupport
import TileCore
@testable import TileServer

/// JPEG 2000 masters on the server: a `.jp2` or `.j2k` in the folder is built on its first request, and
/// an upload takes a JP2 body. Lossless files made by `opj_compress`: pixels against the source's own.
@Suite(
    "Serving JPEG 2000 masters", .serialized,
    .enabled(if: Tools.have("opj_compress"), Comment(rawValue: Tools.missing("opj_compress"))))
struct JPEG2000ServingTests {
    /// The source (700x500) compressed losslessly by opj_compress into `name` (its suffix says JP2 or J2K).
    static func master(_ name: String, in folder: String, options: [String] = [], encoder: String = "opj_compress") throws -> Data {
        var ppm = Data("P6\n700 500\n255\n".utf8)
        let source = TIFFMasterServingTests.source
        for i in stride(from: 0, to: source.pixels.count, by: 4) { ppm += source.pixels[i..<(i + 3)] }
        try ppm.write(to: URL(fileURLWithPath: "\(folder)/source.ppm"))
        defer { try? FileManager.default.removeItem(atPath: "\(folder)/source.ppm") }
        let run = try Tools.run(encoder, ["-i", "\(folder)/source.ppm", "-o", "\(folder)/\(name)"] + options)
        try #require(run.status == 0, "\(encoder): \(run.stderr)")
        return try Data(contentsOf: URL(fileURLWithPath: "\(folder)/\(name)"))
    }

    @Test("a JP2 and a J2K in the folder are built and served; a JP2 upload is built; a cut one is refused")
    func serves() async throws {
        let folder = try ServerLimitsTests.folder([:])
        defer { try? FileManager.default.removeItem(atPath: folder) }
        _ = try Self.master("tiled.jp2", in: folder, options: ["-t", "256,256"])
        _ = try Self.master("flat.j2k", in: folder)
        let upload = try Self.master("body.jp2", in: folder, options: ["-t", "128,128"])
        try FileManager.default.removeItem(atPath: "\(folder)/body.jp2")
        let policy = UploadPolicy(token: "t", maximumBytes: 8 << 20)
        try await TileServerTests.withServer(folder, uploads: policy) { base, client in
            let created = try await TileServerTests.get(
                client, "\(base)/images/sent", method: .PUT, headers: [("Authorization", "Bearer t")], body: upload)
            #expect(created.status == 201, "\(String(decoding: created.body, as: UTF8.self))")
            for id in ["tiled", "flat", "sent"] {
                let info = try await TileServerTests.settled(client, "\(base)/iiif/3/\(id)/info.json")
                let json = try #require(try JSONSerialization.jsonObject(with: info.body) as? [String: Any])
                #expect(info.status == 200 && json["width"] as? Int == 700 && json["height"] as? Int == 500, "\(id)")
                let region = try await TileServerTests.settled(client, "\(base)/iiif/3/\(id)/256,256,256,244/max/0/default.png")
                #expect(
                    try Reference.decodePNG(region.body) == Reference.crop(TIFFMasterServingTests.source, x: 256, y: 256, width: 256, height: 244),
                    "\(id)")
            }
            let cut = try await TileServerTests.get(
                client, "\(base)/images/cut", method: .PUT, headers: [("Authorization", "Bearer t")], body: upload.prefix(upload.count / 2))
            #expect(cut.status == 400 && !FileManager.default.fileExists(atPath: "\(folder)/cut.tiles"))
        }
    }

    @Test(
        "an HTJ2K .jph (ojph_compress) and .jp2 (grk_compress) in the folder, and an HTJ2K upload, are built and served losslessly",
        .enabled(if: Tools.have("ojph_compress", "grk_compress"), Comment(rawValue: Tools.missing("ojph_compress", "grk_compress"))))
    func servesHighThroughput() async throws {
        let folder = try ServerLimitsTests.folder([:])
        defer { try? FileManager.default.removeItem(atPath: folder) }
        _ = try Self.master("ht.jph", in: folder, options: ["-reversible", "true"], encoder: "ojph_compress")
        _ = try Self.master("grok.jp2", in: folder, options: ["-M", "64", "-t", "256,256"], encoder: "grk_compress")
        let upload = try Self.master("body.j2c", in: folder, options: ["-reversible", "true"], encoder: "ojph_compress")
        try FileManager.default.removeItem(atPath: "\(folder)/body.j2c")
        let policy = UploadPolicy(token: "t", maximumBytes: 8 << 20)
        try await TileServerTests.withServer(folder, uploads: policy) { base, client in
            let created = try await TileServerTests.get(
                client, "\(base)/images/sent", method: .PUT, headers: [("Authorization", "Bearer t")], body: upload)
            #expect(created.status == 201, "\(String(decoding: created.body, as: UTF8.self))")
            for id in ["ht", "grok", "sent"] {
                let region = try await TileServerTests.settled(client, "\(base)/iiif/3/\(id)/100,200,500,300/max/0/default.png")
                #expect(region.status == 200, "\(id)")
                #expect(
                    try Reference.decodePNG(region.body) == Reference.crop(TIFFMasterServingTests.source, x: 100, y: 200, width: 500, height: 300),
                    "\(id)")
            }
        }
    }
}
