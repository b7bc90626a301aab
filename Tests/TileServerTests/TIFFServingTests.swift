import Foundation
import NIOCore
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
                ("/iiif/2/photo/512,256,256,256/256,/0/default.jpg", ["etag", "last-modified", "cache-control", "content-type", "link"])
            ] {
                let connection = try LoopbackConnection(port: port)
                try connection.send(Data("GET \(target) HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".utf8))
                let routed = try #require(await HTTPAnswers.received(connection, count: 1, timeout: .seconds(60)).answers.first)
                let again = try LoopbackConnection(port: port)
                try again.send(Data("GET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
                let handled = try #require(await HTTPAnswers.received(again, count: 1, timeout: .seconds(60)).answers.first)
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

    /// A folder with `photo.jpg` (1300x900, smooth, the encoder's default quality) and a service over it that builds TIFF stores, with `cache`.
    static func photoService(cache: EncodedTileCache) throws -> (folder: String, service: TileService) {
        let folder = try ServerLimitsTests.folder([:])
        let jpeg = try JPEGEncoder.encode(pixels: Synthetic.smooth(width: 1300, height: 900), width: 1300, height: 900)
        try jpeg.write(to: URL(fileURLWithPath: "\(folder)/photo.jpg"))
        // The source trusted for an hour once checked: the connection handler's answer, made below right
        // after the routes' (which checks it), does not depend on how long a loaded machine takes between the two.
        let catalog = try ImageCatalog(root: folder, cache: "\(folder)/.cache", storeFormat: .tiff(), sourceRecheckInterval: .seconds(3600))
        return (folder, TileService(catalog: catalog, cache: cache))
    }

    @Test("a whole stored tile is kept in the cache once it is asked for again; tiles asked for once each are not")
    func repeatedTilesKept() async throws {
        let (folder, service) = try Self.photoService(cache: EncodedTileCache())
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await TileServerTests.withServer(TileServer(service: service)) { base, client in
            // A scan: every whole level-0 tile but one (columns 0-4, rows 0-2 of 1300x900), each asked for once.
            let whole = (0..<3).flatMap { row in (0..<5).map { column in "/dzi/photo_files/11/\(column)_\(row).jpg" } }
            var first: [String: TileServerTests.Reply] = [:]
            for path in whole.dropLast() { first[path] = try await TileServerTests.settled(client, base + path) }
            for path in whole.dropLast() {
                #expect(first[path]?.status == 200 && service.cache.image(for: path) == nil, "\(path): kept after one request")
            }
            // The last one asked for again and again: kept, with the bytes and validator it was sent with.
            let repeated = whole.last!
            let reply = try await TileServerTests.settled(client, base + repeated)
            #expect(reply.status == 200 && service.cache.image(for: repeated) == nil)
            var kept: EncodedImage?
            // Its next request keeps it; more are allowed for a catalogue that looks at the source again
            // (after a second the routes answer, and they do not keep whole tiles) on a busy machine.
            let deadline = ContinuousClock.now + .seconds(60)
            while kept == nil, ContinuousClock.now < deadline {
                let again = try await TileServerTests.get(client, base + repeated)
                #expect(again.status == 200 && again.body == reply.body && again.headers["etag"] == reply.headers["etag"])
                kept = service.cache.image(for: repeated)
            }
            let image = try #require(kept, "a whole tile asked for again for a minute was never kept")
            #expect(Data(image.body.readableBytesView) == reply.body && image.entityTag == reply.headers["etag"])
            let fromCache = try await TileServerTests.get(client, base + repeated)
            #expect(fromCache.status == 200 && fromCache.body == reply.body)
            for field in ["etag", "last-modified", "cache-control", "content-type", "content-length"] {
                #expect(reply.headers[field] != nil && fromCache.headers[field] == reply.headers[field], "\(field)")
            }
        }
    }

    @Test("tiles the connection handler answers from a TIFF store, edge tiles cropped there too, equal the routes' answers")
    func handlerAnswersEqualRoutes() async throws {
        // Nothing cached: every answer below is made anew, by whichever path takes it.
        let (folder, service) = try Self.photoService(cache: EncodedTileCache(capacity: 0))
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await TileServerTests.withServer(TileServer(service: service)) { base, client in
            _ = try await TileServerTests.settled(client, "\(base)/dzi/photo_files/11/0_0.jpg")
            let port = try #require(UInt16(base.split(separator: ":").last ?? ""))
            let fields = ["etag", "last-modified", "cache-control", "content-type", "content-length"]
            for target in [
                "/dzi/photo_files/11/1_2.jpg",  // whole
                "/dzi/photo_files/11/5_1.jpg",  // right edge, 20 pixels wide
                "/dzi/photo_files/11/2_3.jpg",  // bottom edge, 132 pixels high
                "/dzi/photo_files/11/5_3.jpg",  // the corner
                "/dzi/photo_files/10/2_1.jpg",  // a lower level's corner (650x450)
                "/iiif/3/photo/1280,256,20,256/20,/0/default.jpg",
                "/iiif/2/photo/1280,768,20,132/20,/0/default.jpg",
                "/iiif/3/photo/256,512,256,256/256,/0/default.jpg"  // whole, through IIIF
            ] {
                // The routes' answer (HTTP/1.0 is never answered by the connection handler); its read
                // puts the stored tile in the page cache (the build wrote past it). Then the connection
                // handler's answer, as it makes it (nil: it would pass the request on; also when the
                // catalog last looked at the source over a second ago: the routes look again).
                var (routedAnswer, directAnswer): (HTTPAnswers.Answer?, EncodedImage?) = (nil, nil)
                var stored: TileService.StoredTile?
                for _ in 0..<10 where directAnswer == nil {
                    let connection = try LoopbackConnection(port: port)
                    try connection.send(Data("GET \(target) HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".utf8))
                    routedAnswer = await HTTPAnswers.received(connection, count: 1, timeout: .seconds(60)).answers.first
                    stored = TileAddress(path: target[...]).image.flatMap(service.storedTile)
                    directAnswer = stored.flatMap { service.storedImage($0, path: target) }
                }
                let routed = try #require(routedAnswer)
                let direct = try #require(directAnswer, "\(target): not answered by the connection handler")
                let again = try LoopbackConnection(port: port)
                try again.send(Data("GET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
                let handled = try #require(await HTTPAnswers.received(again, count: 1, timeout: .seconds(60)).answers.first)
                #expect(routed.status == 200 && handled.status == 200, "\(target)")
                #expect(routed.body == handled.body && Data(direct.body.readableBytesView) == routed.body, "\(target)")
                #expect(direct.entityTag == routed.headers["etag"] && direct.lastModified == routed.headers["last-modified"], "\(target)")
                for field in fields {
                    #expect(routed.headers[field] != nil && routed.headers[field] == handled.headers[field], "\(target): \(field)")
                }
                #expect((routed.headers["link"] != nil) == target.hasPrefix("/iiif/") && routed.headers["link"] == handled.headers["link"])
                // The entity tag as the releases before made it: 64-bit FNV-1a of the source's version,
                // how the answer was made and the request after the identifier, written out plainly here.
                let version = direct.version  // the source's fingerprint as the answer was made (not re-read: the catalog trusts it for a second)
                #expect(!version.isEmpty)
                let variant =
                    target.hasPrefix("/dzi/")
                    ? "dzi/" + target.split(separator: "/").suffix(2).joined(separator: "/")
                    : (target.hasPrefix("/iiif/2/") ? "iiif2/" : "") + target.split(separator: "/").dropFirst(3).joined(separator: "/")
                var fnv: UInt64 = 0xcbf2_9ce4_8422_2325
                for byte in "\(version)|stored|\(variant)".utf8 { fnv = (fnv ^ UInt64(byte)) &* 0x100_0000_01b3 }
                #expect(routed.headers["etag"] == "\"\(String(fnv, radix: 16))\"", "\(target)")
                // A plain GET of a whole tile: the one-buffer answer, byte for byte the routes' but for `Date`.
                if let stored, stored.isWhole {
                    let (response, bodyBytes) = try #require(service.storedResponse(stored, dateLine: HTTPDate.line()), "\(target)")
                    let raw = Data(response.readableBytesView)
                    let answer = try #require(HTTPAnswers.split(raw).first)
                    let headLines = String(decoding: raw[..<raw.range(of: Data("\r\n\r\n".utf8))!.lowerBound], as: UTF8.self)
                        .components(separatedBy: "\r\n").dropFirst()
                    let ignored: Set = ["date", "connection"]
                    #expect(answer.status == 200 && answer.body == routed.body && bodyBytes == routed.body.count, "\(target)")
                    #expect(headLines.count == answer.headers.count, "\(target): a field twice")
                    #expect(answer.headers.filter { !ignored.contains($0.key) } == routed.headers.filter { !ignored.contains($0.key) }, "\(target)")
                } else {
                    #expect(!target.contains("1_2") && !target.contains("256,512"), "\(target): a whole tile not taken as one")
                }
                // The edge tile's size, as libjpeg decodes it.
                let decoded = try Reference.decode(routed.body).image
                let expected = [
                    "1_2": (256, 256), "5_1": (20, 256), "2_3": (256, 132), "5_3": (20, 132), "2_1": (138, 194), "1280,256": (20, 256),
                    "1280,768": (20, 132), "256,512": (256, 256)
                ].first { target.contains("/\($0.key)") }?.value
                #expect(expected.map { $0 == (decoded.width, decoded.height) } == true, "\(target): \(decoded.width)x\(decoded.height)")
            }
        }
    }

    @Test(
        "a tiled pyramidal TIFF dropped in the folder (vips tiffsave) is served as it is, nothing built",
        .enabled(if: Tools.have("vips"), Comment(rawValue: Tools.missing("vips"))))
    func droppedTIFF() async throws {
        let folder = try ServerLimitsTests.folder([:])
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let jpeg = try JPEGEncoder.encode(pixels: Synthetic.smooth(width: 1300, height: 900), width: 1300, height: 900)
        let input = NSTemporaryDirectory() + "tiff-source-\(UUID().uuidString).jpg"
        try jpeg.write(to: URL(fileURLWithPath: input))
        defer { try? FileManager.default.removeItem(atPath: input) }
        let run = try Tools.run(
            "vips",
            [
                "tiffsave", input, "\(folder)/scan.tif", "--tile", "--pyramid", "--compression", "jpeg", "--Q", "85",
                "--tile-width", "256", "--tile-height", "256"
            ])
        try #require(run.status == 0, "vips tiffsave failed: \(run.stderr)")
        try await TileServerTests.withServer(folder, format: .tiff()) { base, client in
            let info =
                try JSONSerialization.jsonObject(with: try await TileServerTests.get(client, "\(base)/iiif/3/scan/info.json").body) as? [String: Any]
            #expect(info?["width"] as? Int == 1300 && info?["height"] as? Int == 900)
            let tile = try await TileServerTests.get(client, "\(base)/dzi/scan_files/11/1_1.jpg")
            #expect(tile.status == 200)
            let decoded = try Reference.decode(tile.body).image
            #expect(Reference.psnr(decoded, Reference.crop(try Reference.decode(jpeg).image, x: 256, y: 256, width: 256, height: 256)) >= 30)
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: "\(folder)/.cache").isEmpty, "something was built")
    }
}
