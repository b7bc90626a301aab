import Foundation
import Testing
import TestSupport
import TileCore
@testable import TileServer

/// A server's TIFF stores (the default it builds JPEGs into) and TIFF pyramids dropped in its folder:
/// whole full-resolution tiles sent as they are stored (the source's own quantisation tables: nothing
/// re-encoded), edge tiles at their exact size, pixels against libjpeg's decode of the source.
@Suite("Serving TIFF pyramids", .serialized)
struct TIFFServingTests {
    /// The quantisation tables (DQT segments' payloads) of a JPEG, in order.
    static func quantisationTables(_ jpeg: Data) -> [Data] {
        let bytes = [UInt8](jpeg)
        var (tables, i) = ([Data](), 2)
        while i + 4 <= bytes.count, bytes[i] == 0xFF {
            let marker = bytes[i + 1], length = Int(bytes[i + 2]) << 8 | Int(bytes[i + 3])
            if marker == 0xDB { tables.append(Data(bytes[(i + 4)..<min(bytes.count, i + 2 + length)])) }
            if marker == 0xDA { break }
            i += 2 + length
        }
        return tables
    }

    @Test("JPEGs are built into TIFF stores; a whole level-0 tile is sent as stored, the source's own tables; edge tiles at their exact size")
    func builtStores() async throws {
        let folder = try ServerLimitsTests.folder([:])
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var options = JPEGEncoder.Options()
        options.quality = 92
        let jpeg = try JPEGEncoder.encode(pixels: Synthetic.smooth(width: 1300, height: 900), width: 1300, height: 900, options: options)
        try jpeg.write(to: URL(fileURLWithPath: "\(folder)/photo.jpg"))
        let source = try Reference.decode(jpeg).image
        try await TileServerTests.withServer(folder, format: .tiff()) { base, client in
            let tile = try await TileServerTests.settled(client, "\(base)/dzi/photo_files/11/1_1.jpg")
            #expect(tile.status == 200 && tile.headers["etag"] != nil)
            #expect(FileManager.default.fileExists(atPath: "\(folder)/.cache/photo.tiles/pyramid.tif"))
            // Not re-encoded: the source's quantisation tables, not those of the server's quality 80.
            #expect(Self.quantisationTables(tile.body) == Self.quantisationTables(jpeg) && !Self.quantisationTables(jpeg).isEmpty)
            let decoded = try Reference.decode(tile.body).image
            #expect(decoded.width == 256 && decoded.height == 256)
            let psnr = Reference.psnr(decoded, Reference.crop(source, x: 256, y: 256, width: 256, height: 256))
            #expect(psnr >= 38, "\(psnr) dB")
            // The same tile asked for through IIIF: the same stored bytes.
            let iiif = try await TileServerTests.settled(client, "\(base)/iiif/3/photo/256,256,256,256/256,256/0/default.jpg")
            #expect(iiif.body == tile.body)
            // Whole stored tiles of a ready image are answered by the connection handler from the page
            // cache (HTTP/1.1, kept alive) and by the routes otherwise (HTTP/1.0): the same answer.
            let port = try #require(UInt16(base.split(separator: ":").last ?? ""))
            for (target, fields) in [
                ("/dzi/photo_files/11/2_1.jpg", ["etag", "last-modified", "cache-control", "content-type"]),
                ("/iiif/3/photo/512,256,256,256/256,/0/default.jpg", ["etag", "last-modified", "cache-control", "content-type", "link"]),
                ("/iiif/2/photo/512,256,256,256/256,/0/default.jpg", ["etag", "last-modified", "cache-control", "content-type", "link"]),
            ] {
                let connection = try LoopbackConnection(port: port)
                try connection.send(Data("GET \(target) HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".utf8))
                let routed = try #require(HTTPAnswers.read(connection, count: 1, timeout: .seconds(60)).answers.first)
                let again = try LoopbackConnection(port: port)
                try again.send(Data("GET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
                let handled = try #require(HTTPAnswers.read(again, count: 1, timeout: .seconds(60)).answers.first)
                #expect(routed.status == 200 && handled.status == 200 && routed.body == handled.body, "\(target)")
                #expect(Self.quantisationTables(handled.body) == Self.quantisationTables(jpeg), "\(target)")
                for field in fields {
                    #expect(routed.headers[field] != nil && routed.headers[field] == handled.headers[field], "\(target): \(field)")
                }
            }
            // An edge tile: the stored tile cropped to its 20x132 pixels without decoding (TIFFStoreTests checks it against jpegtran).
            let edge = try Reference.decode(try await TileServerTests.settled(client, "\(base)/dzi/photo_files/11/5_3.jpg").body).image
            #expect(edge.width == 20 && edge.height == 132)
            #expect(Reference.psnr(edge, Reference.crop(source, x: 1280, y: 768, width: 20, height: 132)) >= 30)
            // A lower level: encoded in the store, within JPEG's error of a box filter of the source.
            let half = try Reference.decode(try await TileServerTests.settled(client, "\(base)/dzi/photo_files/10/1_0.jpg").body).image
            #expect(Reference.psnr(half, Reference.crop(Reference.shrink(source), x: 256, y: 0, width: 256, height: 256)) >= 30)
        }
    }

    @Test("a tiled pyramidal TIFF dropped in the folder (vips tiffsave) is served as it is, nothing built",
          .enabled(if: Tools.have("vips"), Comment(rawValue: Tools.missing("vips"))))
    func droppedTIFF() async throws {
        let folder = try ServerLimitsTests.folder([:])
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let jpeg = try JPEGEncoder.encode(pixels: Synthetic.smooth(width: 1300, height: 900), width: 1300, height: 900)
        let input = NSTemporaryDirectory() + "tiff-source-\(UUID().uuidString).jpg"
        try jpeg.write(to: URL(fileURLWithPath: input))
        defer { try? FileManager.default.removeItem(atPath: input) }
        let run = try Tools.run(
            "vips", ["tiffsave", input, "\(folder)/scan.tif", "--tile", "--pyramid", "--compression", "jpeg", "--Q", "85",
                     "--tile-width", "256", "--tile-height", "256"])
        try #require(run.status == 0, "vips tiffsave failed: \(run.stderr)")
        try await TileServerTests.withServer(folder, format: .tiff()) { base, client in
            let info = try JSONSerialization.jsonObject(with: try await TileServerTests.get(client, "\(base)/iiif/3/scan/info.json").body) as? [String: Any]
            #expect(info?["width"] as? Int == 1300 && info?["height"] as? Int == 900)
            let tile = try await TileServerTests.get(client, "\(base)/dzi/scan_files/11/1_1.jpg")
            #expect(tile.status == 200)
            let decoded = try Reference.decode(tile.body).image
            #expect(Reference.psnr(decoded, Reference.crop(try Reference.decode(jpeg).image, x: 256, y: 256, width: 256, height: 256)) >= 30)
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: "\(folder)/.cache").isEmpty, "something was built")
    }
}
