import AsyncHTTPClient
import Foundation
import Hummingbird
import NIOCore
import NIOHTTP1
import Testing
import TestSupport
import TileCore
import TileServer

/// `TileServer` on loopback, asked by a real HTTP client (AsyncHTTPClient), answers checked against
/// the IIIF specification's rules and libjpeg's decode of the source with a plain box filter.
@Suite("Tile server on loopback", .serialized)
struct TileServerTests {
    struct Reply {
        var status: Int
        var headers: [String: String]
        var body: Data
    }

    /// A folder with `photo.jpg` (1300x900, smooth) and `kept.tiles` (a store of the same image).
    static func folder() throws -> (path: String, jpeg: Data) {
        let path = NSTemporaryDirectory() + "tile-server-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let jpeg = try JPEGEncoder.encode(pixels: Synthetic.smooth(width: 1300, height: 900), width: 1300, height: 900)
        try jpeg.write(to: URL(fileURLWithPath: "\(path)/photo.jpg"))
        var options = BuildOptions()
        options.storage = .persistent(path: "\(path)/kept.tiles")
        _ = try TileBuilder.build(data: jpeg, options: options)
        return (path, jpeg)
    }

    /// Runs `body` against a server on a free loopback port, building JPEGs into `format` stores (raw by
    /// default here: their pixels are exactly the reference's; TIFF stores have tests of their own).
    static func withServer(
        _ folder: String, uploads: UploadPolicy? = nil, format: StoreFormat = .raw, _ body: (String, HTTPClient) async throws -> Void
    ) async throws {
        try await withServer(
            try TileServer(root: folder, cache: "\(folder)/.cache", uploads: uploads, storeFormat: format), body)
    }

    /// Runs `body` against `server` on a free loopback port. Blocking calls on an event loop, or in a
    /// request handler's own task, stop the process from now on (`BlockingCallCheck`).
    static func withServer(_ server: TileServer, _ body: (String, HTTPClient) async throws -> Void) async throws {
        BlockingCallCheck.enable()
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let app = server.application(host: "127.0.0.1", port: 0) { channel in
            continuation.yield(channel.localAddress?.port ?? 0)
        }
        // On Swift's cooperative pool, as in production: the tests that hold their thread run on threads
        // of their own (`OwnThreads`), so nothing blocks the pool under the server.
        let running = Task { try await app.runService(gracefulShutdownSignals: []) }
        var iterator = ports.makeAsyncIterator()
        let port = await iterator.next() ?? 0
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(redirectConfiguration: .disallow))
        do {
            try await body("http://127.0.0.1:\(port)", client)
        } catch {
            try? await client.shutdown()
            running.cancel()
            throw error
        }
        try await client.shutdown()
        running.cancel()
        _ = await running.result
    }

    /// Asks until the answer is final: not 503, and (an image) not of a pyramid still being built.
    static func settled(_ client: HTTPClient, _ url: String, headers: [(String, String)] = []) async throws -> Reply {
        var reply = try await get(client, url, headers: headers)
        let deadline = ContinuousClock.now + .seconds(60)
        // (`private, no-store`: a restricted image's.)
        while reply.status == 503 || (reply.status == 200 && reply.headers["cache-control"]?.hasSuffix("no-store") == true),
            ContinuousClock.now < deadline
        {
            try await Task.sleep(for: .milliseconds(20))
            reply = try await get(client, url, headers: headers)
        }
        return reply
    }

    static func get(
        _ client: HTTPClient, _ url: String, method: HTTPMethod = .GET, headers: [(String, String)] = [], body: Data? = nil
    ) async throws -> Reply {
        var request = HTTPClientRequest(url: url)
        request.method = method
        // A body of known length (the server reads it part by part as it arrives either way). Not an
        // unbounded stream: a server that answers before reading it (401, 409, 413) leaves the
        // client's stream writer behind, which the leak checker reports at exit.
        if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        let response = try await client.execute(request, timeout: .init(LoopbackConnection.answerTimeout))
        let body = try await response.body.collect(upTo: 64 << 20)
        var fields: [String: String] = [:]
        for header in response.headers { fields[header.name.lowercased()] = header.value }
        return Reply(status: Int(response.status.code), headers: fields, body: Data(body.readableBytesView))
    }

    @Test("info.json: context, id from the Host header, level 2, sizes and tiles; 303 from the base URI, 404 for no image")
    func info() async throws {
        let (folder, _) = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await Self.withServer(folder) { base, client in
            let reply = try await Self.get(client, "\(base)/iiif/3/photo/info.json", headers: [("Accept", "application/ld+json")])
            #expect(reply.status == 200)
            #expect(reply.headers["content-type"] == "application/ld+json;profile=\"http://iiif.io/api/image/3/context.json\"")
            #expect(reply.headers["access-control-allow-origin"] == "*")
            #expect(reply.headers["link"] == "<http://iiif.io/api/image/3/level2.json>;rel=\"profile\"")
            let info = try JSONSerialization.jsonObject(with: reply.body) as! [String: Any]
            #expect(info["@context"] as? String == "http://iiif.io/api/image/3/context.json")
            #expect(info["id"] as? String == "\(base)/iiif/3/photo")
            #expect(info["type"] as? String == "ImageService3" && info["profile"] as? String == "level2")
            #expect(info["width"] as? Int == 1300 && info["height"] as? Int == 900)
            let tiles = info["tiles"] as! [[String: Any]]
            // 1300 -> 650 -> 325 -> 163: the first level in one 256-pixel tile is the fourth.
            #expect(tiles[0]["width"] as? Int == 256 && tiles[0]["scaleFactors"] as? [Int] == [1, 2, 4, 8])
            let redirect = try await Self.get(client, "\(base)/iiif/3/photo")
            #expect(redirect.status == 303 && redirect.headers["location"] == "\(base)/iiif/3/photo/info.json")
            // No redirect to an info.json that would answer 404 or 400.
            #expect(try await Self.get(client, "\(base)/iiif/3/nothing").status == 404)
            #expect(try await Self.get(client, "\(base)/iiif/2/nothing").status == 404)
            #expect(try await Self.get(client, "\(base)/iiif/3/..%2Fphoto").status == 400)
            let store = try await Self.get(client, "\(base)/iiif/3/kept/info.json")
            #expect(store.status == 200)
        }
    }

    @Test("image requests and DeepZoom tiles have the reference's pixels")
    func pixels() async throws {
        let (folder, jpeg) = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let full = try Reference.decode(jpeg).image
        let half = Reference.shrink(full)
        try await Self.withServer(folder) { base, client in
            // Level 1's tile (1, 1): exactly its pixels, as PNG (asked again after a 503, as a client
            // would: photo's build may take longer than the wait for its header on a loaded machine).
            for id in ["photo", "kept"] {
                let reply = try await Self.settled(client, "\(base)/iiif/3/\(id)/512,512,512,388/256,/0/default.png")
                #expect(reply.status == 200 && reply.headers["content-type"] == "image/png")
                let png = try Reference.decodePNG(reply.body)
                #expect(png == Reference.crop(half, x: 256, y: 256, width: 256, height: 194), "\(id)")
            }
            let dzi = try await Self.get(client, "\(base)/dzi/photo.dzi")
            let xml = String(decoding: dzi.body, as: UTF8.self)
            #expect(dzi.status == 200 && xml.contains("TileSize=\"256\"") && xml.contains("<Size Height=\"900\" Width=\"1300\"/>"))
            // DeepZoom level 11 is the full size (2^11 >= 1300); its tile 4_3 is the 276x132 corner...
            let tile = try await Self.get(client, "\(base)/dzi/photo_files/11/5_3.jpg")
            #expect(tile.status == 200 && tile.headers["content-type"] == "image/jpeg")
            let decoded = try Reference.decode(tile.body).image
            let want = Reference.crop(full, x: 1280, y: 768, width: 20, height: 132)
            #expect(decoded.width == 20 && decoded.height == 132)
            #expect(Reference.psnr(decoded, want) >= 30)
            // DeepZoom level 0 is 1x1.
            let dot = try Reference.decode(try await Self.get(client, "\(base)/dzi/photo_files/0/0_0.jpg").body).image
            #expect(dot.width == 1 && dot.height == 1)
        }
    }

    @Test("complete images carry an ETag and Cache-Control, 304 on If-None-Match; HEAD; bitonal is black and white")
    func caching() async throws {
        let (folder, _) = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await Self.withServer(folder) { base, client in
            let url = "\(base)/iiif/3/kept/0,0,256,256/max/0/default.jpg"
            let first = try await Self.get(client, url)
            let tag = try #require(first.headers["etag"])
            #expect(first.status == 200 && first.headers["cache-control"] == "public, max-age=86400")
            let again = try await Self.get(client, url)
            #expect(again.body == first.body && again.headers["etag"] == tag)
            let unchanged = try await Self.get(client, url, headers: [("If-None-Match", tag)])
            #expect(unchanged.status == 304 && unchanged.body.isEmpty)
            let other = try await Self.get(client, "\(base)/iiif/3/kept/256,0,256,256/max/0/default.jpg", headers: [("If-None-Match", tag)])
            #expect(other.status == 200 && other.headers["etag"] != tag)
            let head = try await Self.get(client, url, method: .HEAD)
            #expect(head.status == 200 && head.body.isEmpty && head.headers["content-type"] == "image/jpeg")
            let bitonal = try Reference.decodePNG(try await Self.get(client, "\(base)/iiif/3/kept/full/200,/0/bitonal.png").body)
            #expect(bitonal.pixels.enumerated().allSatisfy { $0.offset % 4 == 3 || $0.element == 0 || $0.element == 255 })
        }
    }

    @Test(
        "a repeated request is answered from the cache with the same bytes and headers; HEAD and 304 too; a render waiting on the application keeps the order"
    )
    func cachedAnswers() async throws {
        let (folder, _) = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await Self.withServer(folder) { base, client in
            for path in ["/iiif/3/kept/256,256,256,256/max/0/default.jpg", "/dzi/kept_files/10/1_1.jpg", "/iiif/3/kept/full/100,/0/gray.png?x=1"] {
                let first = try await Self.get(client, base + path)  // rendered by the application
                let second = try await Self.get(client, base + path)  // from the cache, before the router
                #expect(first.status == 200 && second.status == 200 && second.body == first.body, "\(path)")
                var (a, b) = (first.headers, second.headers)
                for name in ["date", "transfer-encoding"] { (a[name], b[name]) = (nil, nil) }
                #expect(a == b, "\(path): \(a) vs \(b)")
                #expect(second.headers["date"] != nil && second.headers["content-length"] == String(first.body.count))
                let head = try await Self.get(client, base + path, method: .HEAD)
                #expect(head.status == 200 && head.body.isEmpty && head.headers["content-length"] == String(first.body.count))
                let unchanged = try await Self.get(client, base + path, headers: [("If-None-Match", first.headers["etag"] ?? "-")])
                #expect(unchanged.status == 304 && unchanged.body.isEmpty)
            }
        }
    }

    @Test("the listing page and an image's build state: not built, then ready after its first request")
    func pages() async throws {
        let (folder, _) = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await Self.withServer(folder) { base, client in
            let page = try await Self.get(client, "\(base)/")
            let html = String(decoding: page.body, as: UTF8.self)
            #expect(page.status == 200 && page.headers["content-type"] == "text/html; charset=utf-8")
            #expect(html.contains("<a href=\"view/photo\">photo</a></td><td>1300 x 900</td><td>not built</td>"), "\(html)")
            #expect(html.contains(">kept</a></td><td>1300 x 900</td><td>ready</td>"))
            #expect(html.contains("<img src=\"iiif/3/photo/full/!160,160/0/default.jpg\""))
            func state() async throws -> [String: Any] {
                try JSONSerialization.jsonObject(with: try await Self.get(client, "\(base)/images/photo").body) as! [String: Any]
            }
            #expect(try await state()["state"] as? String == "not built")
            // The first request starts the build; its answer may be 503 while the build waits for a thread
            // of the process's pool, which the other suites share (a CI run's did, past 20 s).
            #expect(try await Self.settled(client, "\(base)/iiif/3/photo/full/!160,160/0/default.jpg").status == 200)
            var ready = try await state()
            let deadline = ContinuousClock.now + .seconds(60)
            while ready["state"] as? String != "ready", ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
                ready = try await state()
            }
            #expect(ready["state"] as? String == "ready" && ready["width"] as? Int == 1300)
            #expect(ready["levelsComplete"] as? Int == 4 && ready["levelCount"] as? Int == 4 && ready["tileRowsComplete"] as? Int == 4)
            #expect(try await Self.get(client, "\(base)/images/nothing").status == 404)
            #expect(try await Self.get(client, "\(base)/images/..%2Fphoto").status == 400)
        }
    }

    @Test("uploads: off by default, a bearer token, streamed and built, 409 for a name in use, 400 for half a JPEG, 413 past the limit")
    func uploads() async throws {
        let (folder, jpeg) = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await Self.withServer(folder) { base, client in
            let refused = try await Self.get(client, "\(base)/images/up", method: .PUT, body: jpeg)
            #expect(refused.status == 403)
        }
        let policy = UploadPolicy(token: "s3cret", maximumBytes: jpeg.count * 2)
        try await Self.withServer(folder, uploads: policy) { base, client in
            let auth = [("Authorization", "Bearer s3cret")]
            #expect(try await Self.get(client, "\(base)/images/up", method: .PUT, body: jpeg).status == 401)
            #expect(
                try await Self.get(client, "\(base)/images/up", method: .PUT, headers: [("Authorization", "Bearer nope")], body: jpeg).status == 401)
            let created = try await Self.get(client, "\(base)/images/up", method: .PUT, headers: auth, body: jpeg)
            #expect(created.status == 201, "\(String(decoding: created.body, as: UTF8.self))")
            let state = try JSONSerialization.jsonObject(with: created.body) as! [String: Any]
            #expect(state["state"] as? String == "ready" && state["width"] as? Int == 1300)
            #expect(FileManager.default.fileExists(atPath: "\(folder)/up.tiles/manifest.json"))
            let png = try Reference.decodePNG(try await Self.get(client, "\(base)/iiif/3/up/512,512,512,388/256,/0/default.png").body)
            #expect(png == Reference.crop(Reference.shrink(try Reference.decode(jpeg).image), x: 256, y: 256, width: 256, height: 194))
            #expect(try await Self.get(client, "\(base)/images/up", method: .PUT, headers: auth, body: jpeg).status == 409)
            #expect(try await Self.get(client, "\(base)/images/photo", method: .PUT, headers: auth, body: jpeg).status == 409)
            let half = try await Self.get(client, "\(base)/images/half", method: .PUT, headers: auth, body: jpeg.prefix(jpeg.count / 2))
            #expect(half.status == 400 && !FileManager.default.fileExists(atPath: "\(folder)/half.tiles"))
            #expect(try await Self.get(client, "\(base)/images/half").status == 404)
            let big = try await Self.get(client, "\(base)/images/big", method: .PUT, headers: auth, body: jpeg + jpeg + jpeg)
            #expect(big.status == 413 && !FileManager.default.fileExists(atPath: "\(folder)/big.tiles"))
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasPrefix(".half") || $0.hasPrefix(".big") }
            #expect(leftovers.isEmpty, "\(leftovers)")
        }
    }

    @Test("status codes: 400 for bad syntax or regions outside, 404 for unknown images, 501 for formats not offered")
    func statuses() async throws {
        let (folder, _) = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // A symlink out of the folder is never followed.
        let outside = NSTemporaryDirectory() + "outside-\(UUID().uuidString).jpg"
        try FileManager.default.copyItem(atPath: "\(folder)/photo.jpg", toPath: outside)
        defer { try? FileManager.default.removeItem(atPath: outside) }
        try FileManager.default.createSymbolicLink(atPath: "\(folder)/link.jpg", withDestinationPath: outside)
        try await Self.withServer(folder) { base, client in
            let cases: [(String, Int)] = [
                ("/iiif/3/nothing/info.json", 404),
                ("/iiif/3/link/info.json", 404),
                ("/iiif/3/..%2Fphoto/info.json", 400),
                ("/iiif/3/.hidden/info.json", 400),
                ("/iiif/3/photo/bogus/max/0/default.jpg", 400),
                ("/iiif/3/photo/5000,5000,10,10/max/0/default.jpg", 400),
                ("/iiif/3/photo/full/max/45/default.jpg", 501),
                ("/iiif/3/photo/full/max/0/default.gif", 501),
                ("/iiif/3/photo/full/100000,/0/default.jpg", 400),
                ("/dzi/photo_files/12/0_0.jpg", 404),
                ("/dzi/photo_files/11/6_0.jpg", 404),
                ("/dzi/nothing.dzi", 404)
            ]
            for (path, status) in cases {
                let reply = try await Self.get(client, base + path)
                #expect(reply.status == status, "\(path): \(reply.status) \(String(decoding: reply.body, as: UTF8.self))")
                #expect(reply.headers["access-control-allow-origin"] == "*", "\(path)")
            }
            // Numbers that overflow when multiplied or subtracted, once the image is complete (its tiles
            // then answered before the router, by the cached-tile responder) and before.
            let huge = "9223372036854775807"
            let absurd: [(String, Int)] = [
                ("/dzi/photo_files/-\(huge)/0_0.jpg", 404), ("/dzi/photo_files/\(huge)/0_0.jpg", 404),
                ("/dzi/photo_files/11/36028797018963968_0.jpg", 404), ("/dzi/photo_files/11/0_36028797018963968.jpg", 404),
                ("/dzi/photo_files/11/\(huge)_\(huge).jpg", 404), ("/dzi/photo_files/11/-1_0.jpg", 404),
                ("/iiif/3/photo/full/pct:\(huge)/0/default.jpg", 400), ("/iiif/3/photo/full/^pct:\(huge)/0/default.jpg", 400),
                ("/iiif/3/photo/pct:\(huge),0,10,10/max/0/default.jpg", 400)
            ]
            #expect(try await Self.get(client, base + "/dzi/photo_files/11/0_0.jpg").status == 200)
            for (path, status) in absurd {
                let reply = try await Self.get(client, base + path)
                #expect(reply.status == status, "\(path): \(reply.status) \(String(decoding: reply.body, as: UTF8.self))")
            }
            #expect(try await Self.get(client, base + "/dzi/photo_files/11/0_0.jpg").status == 200, "the server still serves")
            let preflight = try await Self.get(
                client, "\(base)/iiif/3/photo/info.json", method: .OPTIONS,
                headers: [("Origin", "https://viewer.example"), ("Access-Control-Request-Method", "GET")])
            #expect(preflight.status < 300 && preflight.headers["access-control-allow-origin"] == "*")
        }
    }

    @Test("1,500 random paths made of hostile pieces get a status, and the server keeps serving")
    func randomHostilePaths() async throws {
        let (folder, _) = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var state: UInt64 = 0x2545_F491_4F6C_DD1D  // xorshift, fixed seed: a failure can be replayed
        func next(_ bound: Int) -> Int {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return Int(state % UInt64(bound))
        }
        let pieces = [
            "0", "1", "-1", "11", "10", "12", "5", "9223372036854775807", "-9223372036854775808", "36028797018963968",
            "999999999", "pct:50", "pct:9223372036854775807", "^pct:9223372036854775807", "full", "max", "^max", "square",
            "!1,1", "0,0,1,1", "..", "%2e%2e", "%2F", "%00", "photo", "kept", "nothing", ".cache", "default.jpg",
            "gray.png", "0_0.jpg", "-1_-1.jpg", "9223372036854775807_0.jpg", "0_0.png", "x.jpg", "info.json", "", "%ZZ",
            "a%20b", "\u{e9}t\u{e9}", String(repeating: "a", count: 300)
        ]
        let numbers = [
            "0", "1", "-1", "5", "10", "11", "12", "90", "100", "9223372036854775807", "-9223372036854775808",
            "36028797018963968", "999999999", "1e308", "0.5", "99999999999999999999999999999999"
        ]
        let prefixes = ["/dzi/photo_files/", "/dzi/kept_files/", "/dzi/", "/iiif/3/photo/", "/iiif/3/kept/", "/iiif/3/", "/images/", "/view/", "/"]
        let allowed: Set<Int> = [200, 303, 304, 400, 401, 403, 404, 405, 413, 501, 503]
        try await Self.withServer(folder) { base, client in
            let first = try await Self.get(client, base + "/dzi/photo_files/11/0_0.jpg")  // complete: the cached path on
            #expect(first.status == 200)
            for _ in 0..<1500 {
                func piece() -> String { pieces[next(pieces.count)] }
                func number() -> String { numbers[next(numbers.count)] }
                let path: String
                switch next(3) {
                case 0:  // a DeepZoom tile's shape, hostile numbers
                    path = "/dzi/\(["photo", "kept", "nothing"][next(3)])_files/\(number())/\(number())_\(number()).\(["jpg", "png", "gif"][next(3)])"
                case 1:  // an IIIF request's shape
                    let region = [
                        "full", "square", "\(number()),\(number()),\(number()),\(number())", "pct:\(number()),\(number()),\(number()),\(number())"
                    ][next(4)]
                    let size = [
                        "max", "^max", "\(number()),", ",\(number())", "pct:\(number())", "^pct:\(number())", "!\(number()),\(number())",
                        "^\(number()),\(number())"
                    ][next(8)]
                    path =
                        "/iiif/3/\(["photo", "kept", "nothing"][next(3)])/\(region)/\(size)/\(number())/\(["default", "gray", "bitonal"][next(3)]).\(["jpg", "png", "webp"][next(3)])"
                default:
                    let segments = (0..<(1 + next(5))).map { _ in piece() }
                    path = prefixes[next(prefixes.count)] + segments.joined(separator: next(4) == 0 ? "_" : "/")
                }
                guard let encoded = path.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.union(["%"])) else { continue }
                let reply: Reply
                do { reply = try await Self.get(client, base + encoded) } catch { continue }  // a URL the client refuses
                #expect(allowed.contains(reply.status), "\(encoded): \(reply.status)")
            }
            let tile = try await Self.get(client, base + "/dzi/photo_files/11/0_0.jpg")
            let info = try await Self.get(client, base + "/iiif/3/photo/info.json")
            #expect(tile.status == 200 && info.status == 200, "the server still serves")
        }
        // Nothing outside the folder and its cache was written.
        let names = try FileManager.default.contentsOfDirectory(atPath: folder).sorted()
        #expect(names == [".cache", "kept.tiles", "photo.jpg"], "\(names)")
    }
}

extension ImageCatalog {
    /// Starts the catalog as a service (its lookups, builds and deadlines run in it: nothing is looked
    /// up before). Cancel the task to shut the catalog down.
    nonisolated func started() -> Task<Void, Never> {
        Task { try? await self.run() }
    }

    /// `id`'s image, asked for again while its build waits for its turn (``LookupError/failed(_:)`` with
    /// `notReady`: a 503 a client would ask again after), for up to `limit`. The builds of every test
    /// in the process share one heavy-work queue: under the whole suite a build may wait longer than
    /// the catalogue's header wait (20 s).
    func imageWhenItsTurnComes(_ id: String, for client: String? = nil, limit: Duration = .seconds(300)) async throws -> Image {
        let deadline = ContinuousClock.now + limit
        while true {
            try Task.checkCancellation()
            // Each look waits for the header again (a continuation, not a poll); only that answer is asked again.
            do { return try await image(id, for: client) } catch {
                guard case .failed(let failure) = error, failure.code == .notReady, failure.message.contains("waiting for its turn"),
                    ContinuousClock.now < deadline
                else { throw error }
            }
            try await Task.sleep(for: .milliseconds(100))  // a look that answers at once is not repeated hot
        }
    }
}
