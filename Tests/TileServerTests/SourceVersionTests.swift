import AsyncHTTPClient
import Foundation
import NIOConcurrencyHelpers
import Testing
import TestSupport
import TileCore
@testable import TileServer

/// Which version of a source an answer shows: entity tags change exactly when the source does (and
/// survive a restart while it does not), a replaced or fixed source is built again without a restart,
/// and concurrent first requests open a store once. Pixels are compared with libjpeg's decode.
@Suite("Source versions", .serialized)
struct SourceVersionTests {
    static func folder(_ images: [String: Data]) throws -> String {
        try ServerLimitsTests.folder(images)
    }

    static func jpeg(_ seed: Int, width: Int = 600, height: Int = 400) throws -> Data {
        let pixels = seed == 0 ? Synthetic.smooth(width: width, height: height) : Synthetic.pixels(width: width, height: height)
        return try JPEGEncoder.encode(pixels: pixels, width: width, height: height)
    }

    /// Replaces `path` with `data` as a deployment would: written beside it, renamed over it.
    static func replace(_ path: String, with data: Data) throws {
        try data.write(to: URL(fileURLWithPath: path + ".new"))
        guard rename(path + ".new", path) == 0 else { throw TileError(.io, "rename failed") }
    }

    /// Asks again while the answer is 503 (a build in progress), as a client would.
    static func get(_ client: HTTPClient, _ url: String, headers: [(String, String)] = []) async throws -> TileServerTests.Reply {
        var reply = try await TileServerTests.get(client, url, headers: headers)
        let deadline = ContinuousClock.now + .seconds(60)
        while reply.status == 503, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
            reply = try await TileServerTests.get(client, url, headers: headers)
        }
        return reply
    }

    @Test("a replaced source: new entity tags for info.json and tiles, and no old pixels once the change is seen")
    func replaced() async throws {
        let (old, new) = (try Self.jpeg(0), try Self.jpeg(1))
        let folder = try Self.folder(["photo.jpg": old])
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let catalog = try ImageCatalog(root: folder, cache: "\(folder)/.cache", storeFormat: .raw)
        try await TileServerTests.withServer(TileServer(catalog: catalog)) { base, client in
            let tile = "\(base)/iiif/3/photo/0,0,256,256/max/0/default.png"
            let info = try await Self.get(client, "\(base)/iiif/3/photo/info.json")
            var first = try await Self.get(client, tile)
            while first.headers["etag"] == nil {  // built while asked: no-store until complete
                try await Task.sleep(for: .milliseconds(20))
                first = try await Self.get(client, tile)
            }
            let cached = try await Self.get(client, tile)
            #expect(cached.headers["etag"] == first.headers["etag"] && cached.body == first.body)
            let oldTile = Reference.crop(try Reference.decode(old).image, x: 0, y: 0, width: 256, height: 256)
            #expect(try Reference.decodePNG(first.body) == oldTile)

            try Self.replace("\(folder)/photo.jpg", with: new)
            // The folder watcher forgets the ready image as the rename lands (at most a second without it,
            // on an idle machine; the test allows a loaded one ten).
            let seen = ContinuousClock.now
            while catalog.readyImage("photo") != nil, ContinuousClock.now - seen < .seconds(10) { try await Task.sleep(for: .milliseconds(5)) }
            #expect(catalog.readyImage("photo") == nil, "the change was not seen within 10 s")
            var after = try await Self.get(client, tile)
            let newTile = Reference.crop(try Reference.decode(new).image, x: 0, y: 0, width: 256, height: 256)
            while after.headers["etag"] == nil {
                #expect(try Reference.decodePNG(after.body) == newTile, "a tile of the rebuild in progress is not the new source's")
                try await Task.sleep(for: .milliseconds(20))
                after = try await Self.get(client, tile)
            }
            #expect(try Reference.decodePNG(after.body) == newTile)
            #expect(after.headers["etag"] != first.headers["etag"])
            let revalidated = try await Self.get(client, tile, headers: [("If-None-Match", first.headers["etag"] ?? "")])
            #expect(revalidated.status == 200, "the old entity tag still validates")
            let newInfo = try await Self.get(client, "\(base)/iiif/3/photo/info.json")
            #expect(info.headers["etag"] != nil && newInfo.headers["etag"] != nil && newInfo.headers["etag"] != info.headers["etag"])
        }
    }

    @Test("a source whose build failed is built when it is fixed, without a restart")
    func fixed() async throws {
        let whole = try Self.jpeg(0)
        let folder = try Self.folder(["photo.jpg": whole.prefix(whole.count / 2)])
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await TileServerTests.withServer(folder) { base, client in
            let url = "\(base)/iiif/3/photo/full/max/0/default.png"
            let broken = try await Self.get(client, url)
            #expect(broken.status == 422, "\(broken.status) \(String(decoding: broken.body, as: UTF8.self))")
            try Self.replace("\(folder)/photo.jpg", with: whole)
            let repaired = try await Self.get(client, url)
            #expect(repaired.status == 200)
            #expect(try Reference.decodePNG(repaired.body) == (try Reference.decode(whole).image))
        }
    }

    @Test("a restarted server keeps the entity tags of unchanged sources, and reuses their stores")
    func restarted() async throws {
        let folder = try Self.folder(["photo.jpg": try Self.jpeg(0)])
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var tags: [[String?]] = []
        for _ in 0..<2 {
            let catalog = try ImageCatalog(root: folder, cache: "\(folder)/.cache", storeFormat: .raw)
            // info.json names the service's URL: the same for both (not each one's loopback port).
            let server = TileServer(catalog: catalog, publicBaseURL: "https://example.org/iiif/3")
            try await TileServerTests.withServer(server) { base, client in
                var tile = try await Self.get(client, "\(base)/dzi/photo_files/10/1_0.jpg")
                while tile.headers["etag"] == nil {
                    try await Task.sleep(for: .milliseconds(20))
                    tile = try await Self.get(client, "\(base)/dzi/photo_files/10/1_0.jpg")
                }
                let info = try await Self.get(client, "\(base)/iiif/3/photo/info.json")
                let dzi = try await Self.get(client, "\(base)/dzi/photo.dzi")
                tags.append([tile.headers["etag"], info.headers["etag"], dzi.headers["etag"]])
            }
            if tags.count == 2 {
                let (opened, building) = (await catalog.storesOpened, await catalog.isBuilding("photo"))
                #expect(opened == 1 && !building, "the restarted server built again")
            }
        }
        #expect(tags[0].allSatisfy { $0 != nil } && tags[0] == tags[1], "\(tags)")
    }

    @Test("64 concurrent first requests of a fresh server open an existing store once, and are all answered")
    func stampede() async throws {
        let (folder, jpeg) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let catalog = try ImageCatalog(root: folder, cache: "\(folder)/.cache", storeFormat: .raw)
        try await TileServerTests.withServer(TileServer(catalog: catalog)) { base, client in
            let port = UInt16(base.split(separator: ":").last!)!
            // 64 connections, each asking one distinct tile of level 0 or 1 at once.
            let tiles = (0..<64).map { i in i < 24 ? "11/\(i % 6)_\(i / 6).jpg" : "10/\(i % 3)_\((i / 3) % 2).jpg" }
            // Blocking sockets, one thread each (not Swift's cooperative pool, which the server's handlers need).
            let replies = await withCheckedContinuation { (continuation: CheckedContinuation<[Int], Never>) in
                let statuses = NIOLockedValueBox([Int]())
                let group = DispatchGroup()
                for tile in tiles {
                    group.enter()
                    Thread {
                        let request = "GET /dzi/kept_files/\(tile) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
                        let status = (try? PipeliningTests.blockingExchange(port, [request]))?.first?.status ?? 0
                        statuses.withLockedValue { $0.append(status) }
                        group.leave()
                    }.start()
                }
                group.notify(queue: .global()) { continuation.resume(returning: statuses.withLockedValue { $0 }) }
            }
            #expect(replies.count == 64 && replies.allSatisfy { $0 == 200 }, "\(replies)")
            #expect(await catalog.storesOpened == 1)
            _ = jpeg
        }
    }
}
