import AsyncHTTPClient
import Foundation
import NIOCore
import NIOPosix
import Testing
import TestSupport
import TileActors
import TileCore
import TileNetwork
@testable import TileServer

/// Masters kept in a bucket (issue 43, points 2 and 5), against the real store
/// (``TestSupport/S3TestServer``): each built on its first request from the object's bytes, built
/// again when the object is replaced, listed; a key that is no image answered 422; the bucket
/// stopped: what is built stays served, the rest 503 with `Retry-After`, `/ready` says why, and a
/// build cut off by the stop publishes nothing and is built once the bucket is back.
@Suite("Masters in a bucket (loopback store)", .serialized, .enabled(if: S3TestServer.isAvailable, S3TestServer.skip))
struct BucketMasterTests {
    @Test("built from the bucket's bytes, rebuilt when replaced, listed; no image: 422; the bucket stopped: 503 and /ready, built things served")
    func mastersInABucket() async throws {
        let server = try S3TestServer()
        defer { server.stop() }
        let client = try await Self.bucket("archive", in: server)
        func put(_ key: String, _ data: Data) async throws {
            try await client.put(bucket: "archive", key: "masters/\(key)", body: ByteBuffer(bytes: data))
        }
        let photo = try Inputs.jpeg(width: 1200, height: 800)
        let rome = RGBAImage(width: 700, height: 500, pixels: Synthetic.smooth(width: 700, height: 500))
        try await put("photo.jpg", photo)
        try await put("maps/rome.png", try RGBAPixels(width: 700, height: 500, bytes: rome.pixels).encoded(as: .png))
        try await put("junk.jpg", Data((0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 7919 >> 3) }))
        try await put("notes.txt", Data("not an image".utf8))
        try await put("later.jpg", try Inputs.jpeg(width: 640, height: 480, seed: 5))

        let folder = NSTemporaryDirectory() + "bucket-masters-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: "\(folder)/empty", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let masters = S3MasterShelf(client: client, prefix: try #require(S3Location("s3://archive/masters/")))
        // Every lookup looks at the bucket: a replaced object is seen at the next request.
        // Raw stores: every pixel a decode of the whole master's (a TIFF store's levels are JPEG tiles).
        let catalog = try ImageCatalog(
            root: "\(folder)/empty", cache: "\(folder)/cache", storeFormat: .raw, sourceRecheckInterval: .zero, masters: masters)
        // A look at the bucket waits as long as the test's own waits (a stopped bucket refuses at once).
        await catalog.setShelfLookLimit(.seconds(90))
        try await TileServerTests.withServer(TileServer(service: TileService(catalog: catalog))) { base, http in
            // Built from the object's bytes: every pixel djpeg's (the reference decoder's).
            let info = try await TileServerTests.get(http, "\(base)/iiif/3/photo/info.json")
            let json = try #require(try JSONSerialization.jsonObject(with: info.body) as? [String: Any])
            #expect(info.status == 200 && json["width"] as? Int == 1200 && json["height"] as? Int == 800, "\(info.status)")
            let full = try await TileServerTests.settled(http, "\(base)/iiif/3/photo/full/max/0/default.png")
            #expect(full.status == 200)
            #expect(try Reference.decodePNG(full.body) == (try Reference.decode(photo).image))
            // A PNG in a folder of the bucket: its pixels as they were encoded.
            let region = try await TileServerTests.settled(http, "\(base)/iiif/3/maps%2Frome/100,200,500,300/max/0/default.png")
            #expect(region.status == 200)
            #expect(try Reference.decodePNG(region.body) == Reference.crop(rome, x: 100, y: 200, width: 500, height: 300))

            // Listed with the folder's images; a key of another kind is none.
            let top = try #require(await catalog.contents(ofFolder: ""))
            #expect(top.images == ["junk", "later", "photo"] && top.folders == ["maps"], "\(top)")
            #expect(await catalog.contents(ofFolder: "maps")?.images == ["maps/rome"])

            // A key that is no image: 422 for it; no key: 404.
            let junk = try await TileServerTests.get(http, "\(base)/iiif/3/junk/info.json")
            #expect(junk.status == 422, "\(junk.status) \(String(decoding: junk.body, as: UTF8.self))")
            #expect(try await TileServerTests.get(http, "\(base)/iiif/3/nothing/info.json").status == 404)

            // The object replaced: built again from the new bytes.
            let builds = await catalog.buildsStarted
            let replaced = try Inputs.jpeg(width: 1000, height: 700, seed: 9)
            try await put("photo.jpg", replaced)
            let newInfo = try await TileServerTests.get(http, "\(base)/iiif/3/photo/info.json")
            let newJSON = try #require(try JSONSerialization.jsonObject(with: newInfo.body) as? [String: Any])
            #expect(newJSON["width"] as? Int == 1000 && newJSON["height"] as? Int == 700)
            let newFull = try await TileServerTests.settled(http, "\(base)/iiif/3/photo/full/max/0/default.png")
            #expect(try Reference.decodePNG(newFull.body) == (try Reference.decode(replaced).image))
            #expect(await catalog.buildsStarted == builds + 1)

            // The bucket stopped: a built image is still served from the cache; one never built is 503
            // with Retry-After; /ready says why.
            server.pause()
            let tile = try await TileServerTests.get(http, "\(base)/iiif/3/photo/0,0,512,512/512,/0/default.jpg")
            #expect(tile.status == 200, "\(tile.status)")
            let later = try await TileServerTests.get(http, "\(base)/iiif/3/later/info.json")
            #expect(later.status == 503 && later.headers["retry-after"] != nil, "\(later.status)")
            let ready = try await TileServerTests.get(http, "\(base)/ready")
            let says = String(decoding: ready.body, as: UTF8.self)
            #expect(ready.status == 503 && says.contains("s3://archive/masters"), "\(ready.status) \(says)")

            // Back: its watch looks again at once (then every 100 ms), and /ready is ready again; then built.
            try server.resume()
            await catalog.setShelfRest(.milliseconds(100))
            try await Self.waitUntil { await catalog.health().isReady }
            let back = try await TileServerTests.get(http, "\(base)/iiif/3/later/info.json")
            #expect(back.status == 200, "\(back.status)")
        }
    }

    @Test("the bucket stopped during a build: it fails, nothing is left or published, and it is built once the bucket is back")
    func stoppedDuringABuild() async throws {
        let server = try S3TestServer()
        defer { server.stop() }
        let client = try await Self.bucket("archive", in: server)
        let photo = try Inputs.jpeg(width: 1600, height: 1200, seed: 4)
        try await client.put(bucket: "archive", key: "photo.jpg", body: ByteBuffer(bytes: photo))
        let folder = NSTemporaryDirectory() + "bucket-stop-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: "\(folder)/empty", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let pool = NIOThreadPool(numberOfThreads: 2)
        pool.start()
        let queue = HeavyWorkQueue(maximumConcurrency: 1, threadPool: pool)
        let masters = S3MasterShelf(client: client, prefix: try #require(S3Location("s3://archive")))
        let shelf = CountingShelf(S3StoreShelf(client: client, prefix: try #require(S3Location("s3://archive/stores")), threadPool: pool))
        let catalog = try ImageCatalog(
            root: "\(folder)/empty", cache: "\(folder)/cache", buildQueue: queue, headerWaitLimit: .seconds(1), threadPool: pool,
            shelf: shelf, masters: masters)
        await catalog.setShelfLookLimit(.seconds(90))  // as the test's own waits (a stopped bucket refuses at once)
        let service = catalog.started()

        // The queue's one turn held (taken before the build asks): the build is started (its master
        // looked up) but waits to download.
        let (gate, open) = AsyncStream.makeStream(of: Void.self)
        let (taken, took) = AsyncStream.makeStream(of: Void.self)
        let holder = Task {
            try await queue.run {
                took.yield()
                for await _ in gate {}
            }
        }
        var turns = taken.makeAsyncIterator()
        _ = await turns.next()
        let first = Task { try? await catalog.image("photo") }
        try await Self.waitUntil { await catalog.isBuilding("photo") }
        server.pause()
        open.finish()
        try await holder.value
        _ = await first.value
        try await Self.waitUntil { await !catalog.isBuilding("photo") }
        // Nothing of it left in the cache (its staging folder removed by its builder), nothing published.
        let cache = "\(folder)/cache"
        try await Self.waitUntil { ((try? FileManager.default.contentsOfDirectory(atPath: cache)) ?? ["?"]).allSatisfy { $0.hasSuffix(".lock") } }
        #expect(shelf.count("published") == 0)

        // Back: the next request builds it, from every byte.
        try server.resume()
        _ = try await catalog.image("photo")
        await catalog.waitUntilBuilt("photo")
        let image = try await catalog.image("photo")
        #expect(image.pyramid.isComplete && image.pyramid.geometry.width == 1600)
        try await shelf.waitFor("published", or: "publish failed")
        let published = try #require(try await client.store(at: S3Location(bucket: "archive", key: "stores/photo.tiles")))
        // Its master known by its version (the object's size, date and entity tag), for another server to compare.
        let object = try #require(try await client.head(bucket: "archive", key: "photo.jpg"))
        let version = try #require(published.masterVersion?.split(separator: "-").map { String($0) })
        #expect(version.count == 6 && version[0] == "0" && version[1] == "0" && Int(version[2], radix: 16) == photo.count, "\(version)")
        var tag: UInt64 = 0xcbf2_9ce4_8422_2325  // FNV-1a 64, written plainly
        for byte in object.entityTag.utf8 { tag = (tag ^ UInt64(byte)) &* 0x100_0000_01b3 }
        #expect(UInt64(version[5], radix: 16) == tag, "the entity tag's hash")
        service.cancel()
        await service.value
        try await pool.shutdownGracefully()
    }

    /// A client of `server`, with the bucket `name` made.
    static func bucket(_ name: String, in server: S3TestServer) async throws -> S3Client {
        let client = S3Client(
            configuration: S3Configuration(
                endpoint: server.endpoint, region: server.region,
                credentials: S3Credentials(accessKeyID: server.accessKey, secretAccessKey: server.secretKey)))
        try await client.createBucket(name)
        // The store may answer NoSuchBucket just after the bucket's creation (seen once): its listing
        // answered is the state waited for, not a time.
        let deadline = ContinuousClock.now + .seconds(60)
        while (try? await client.list(bucket: name, maximum: 1)) == nil, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        return client
    }

    /// Waits until `condition` holds: a state, looked at each 10 ms, recorded as an issue past two minutes.
    static func waitUntil(_ condition: () async -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(120)
        while await !condition(), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        if await !condition() { Issue.record("a state not reached in 120 s") }
    }
}
