import AsyncHTTPClient
import Foundation
import NIOConcurrencyHelpers
import NIOPosix
import Testing
import TestSupport
import TileActors
import TileCore
import TileNetwork
@testable import TileServer

/// A bucket's shelf whose copies wait until the test opens its gate: the store is read where it lies
/// (``S3StoreShelf/open(_:)``) while the copy cannot have happened.
final class GatedShelf: StoreShelf {
    let shelf: S3StoreShelf
    /// Whether its copies fail once let go (as a bucket's connection cut).
    let failsCopies: Bool
    private let gate = NIOLockedValueBox((isOpen: false, waiting: [CheckedContinuation<Void, Never>]()))
    private let counts = NIOLockedValueBox([String: Int]())

    init(_ shelf: S3StoreShelf, failsCopies: Bool = false) { (self.shelf, self.failsCopies) = (shelf, failsCopies) }

    var description: String { shelf.description }
    func count(_ what: String) -> Int { counts.withLockedValue { $0[what] ?? 0 } }
    private func add(_ what: String) { counts.withLockedValue { $0[what, default: 0] += 1 } }

    func check() async throws { try await shelf.check() }
    func isUnavailable(_ error: any Error) -> Bool { shelf.isUnavailable(error) }
    func find(_ id: String) async throws -> ShelvedStore? { try await shelf.find(id) }
    func publish(_ id: String, store path: String, masterVersion: String?) async throws {
        try await shelf.publish(id, store: path, masterVersion: masterVersion)
    }

    func open(_ store: ShelvedStore) async throws -> (any ShelvedPyramid)? {
        add("opened")
        return try await shelf.open(store)
    }

    func copy(_ store: ShelvedStore, to path: String) async throws {
        add("copy waiting")
        await withCheckedContinuation { continuation in
            let isOpen = gate.withLockedValue { gate in
                if !gate.isOpen { gate.waiting.append(continuation) }
                return gate.isOpen
            }
            if isOpen { continuation.resume() }
        }
        if failsCopies { throw TileError(.io, "the copy was cut") }
        try await shelf.copy(store, to: path)
        add("copied")
    }

    /// Waits until a copy has reached the gate (the catalog's copy job runs beside the requests).
    func waitForCopy() async throws {
        let deadline = ContinuousClock.now + .seconds(120)
        while count("copy waiting") == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
    }

    /// Lets the copies waiting, and all later ones, go on.
    func openGate() {
        let waiting = gate.withLockedValue { gate in
            gate.isOpen = true
            defer { gate.waiting = [] }
            return gate.waiting
        }
        for continuation in waiting { continuation.resume() }
    }
}

/// Tiles of a store in the bucket answered where it lies (issue 43, point 3), against the real store
/// (``TestSupport/S3TestServer``): a server whose cache is empty answers the whole stored tiles of an
/// image another server built and published while it copies the store, each read by one ranged GET,
/// every answer (body, entity tag, dates, type) the building server's own; the rest waits for the copy.
@Suite("Stored tiles answered from the bucket (loopback store)", .serialized, .enabled(if: S3TestServer.isAvailable, S3TestServer.skip))
struct ShelvedTileTests {
    @Test("while the copy waits: info.json and whole stored tiles (DeepZoom, IIIF) equal the building server's; a render waits; no build")
    func answeredWhereItLies() async throws {
        let server = try S3TestServer()
        defer { server.stop() }
        let client = try await BucketMasterTests.bucket("lying", in: server)
        let folder = NSTemporaryDirectory() + "shelved-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: "\(folder)/masters", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try Inputs.jpeg(width: 3000, height: 2000).write(to: URL(fileURLWithPath: "\(folder)/masters/photo.jpg"))
        let pool = NIOThreadPool(numberOfThreads: 2)
        pool.start()
        let prefix = try #require(S3Location("s3://lying/stores/"))

        // The first server builds and publishes; the second's cache is empty, its copies held at the gate.
        let counting = CountingShelf(S3StoreShelf(client: client, prefix: prefix, threadPool: pool))
        let first = try ImageCatalog(
            root: "\(folder)/masters", cache: "\(folder)/first", headerWaitLimit: .seconds(120), threadPool: pool, shelf: counting)
        let gated = GatedShelf(S3StoreShelf(client: client, prefix: prefix, threadPool: pool))
        defer { gated.openGate() }
        let second = try ImageCatalog(
            root: "\(folder)/masters", cache: "\(folder)/second", headerWaitLimit: .seconds(120), threadPool: pool, shelf: gated)
        await second.setShelfCopyGrace(.seconds(600))  // the gate's wait is not the bucket's slowness
        // A store whose opening where it lies gives up is copied within the lookup, and a stored tile
        // whose read gives up waits for the copy: both wait at the gate the test holds. Under the other
        // suites' load one of them gave up once (after 10 s), and its request waited for the gate until
        // the client's deadline. They wait here as long as the test's own waits allow.
        await second.setShelfReadLimit(.seconds(90))
        await second.setShelfLookLimit(.seconds(90))  // its look at the bucket too: a build here is not what is tested

        // Whole tiles of levels 0 (DeepZoom 12) and 1, through DeepZoom and IIIF (3.0 and 2.1); edge tiles
        // and renders are not stored tiles: they wait for the copy.
        let stored = [
            "dzi/photo_files/12/0_0.jpg", "dzi/photo_files/12/5_3.jpg", "dzi/photo_files/12/10_6.jpg", "dzi/photo_files/11/2_1.jpg",
            "iiif/3/photo/256,512,256,256/256,/0/default.jpg", "iiif/2/photo/512,0,256,256/256,/0/default.jpg",
            "iiif/3/photo/0,0,512,512/256,/0/default.jpg"
        ]
        let waiting = ["dzi/photo_files/12/11_7.jpg", "iiif/3/photo/full/300,/0/default.png"]
        let fields = ["etag", "last-modified", "content-type", "cache-control", "link"]
        var reference: [String: TileServerTests.Reply] = [:]
        var firstBase = ""
        try await TileServerTests.withServer(TileServer(service: TileService(catalog: first))) { base, http in
            firstBase = base
            for path in ["iiif/3/photo/info.json"] + stored + waiting {
                reference[path] = try await TileServerTests.settled(http, "\(base)/\(path)")
                #expect(reference[path]?.status == 200, "\(path)")
            }
            try await counting.waitFor("published", or: "publish failed")
            #expect(counting.count("published") == 1)
        }

        try await TileServerTests.withServer(TileServer(service: TileService(catalog: second))) { base, http in
            for path in stored {
                let reply = try await TileServerTests.get(http, "\(base)/\(path)")
                let expected = try #require(reference[path])
                #expect(reply.status == 200 && reply.body == expected.body, "\(path): \(reply.status), \(reply.body.count) bytes")
                for field in fields { #expect(reply.headers[field] == expected.headers[field], "\(path): \(field)") }
            }
            // info.json from the store's directories: the same but for the server's address in it (and in its entity tag).
            let info = try await TileServerTests.get(http, "\(base)/iiif/3/photo/info.json")
            let expectedInfo = try #require(reference["iiif/3/photo/info.json"])
            let rebased = String(decoding: expectedInfo.body, as: UTF8.self).replacingOccurrences(of: firstBase, with: base)
            #expect(info.status == 200 && String(decoding: info.body, as: UTF8.self) == rebased)
            #expect(info.headers["last-modified"] == expectedInfo.headers["last-modified"])
            // All of it while the copy waited: the store opened where it lies, nothing copied, nothing built.
            try await gated.waitForCopy()
            #expect(gated.count("opened") == 1 && gated.count("copy waiting") == 1 && gated.count("copied") == 0)
            #expect(await second.buildsStarted == 0)
            #expect(try await second.summary("photo").state == .building)

            // A request that is no stored tile waits for the copy, then gets the building server's answer.
            let pending = waiting.map { path in
                (path, Task { try await TileServerTests.get(http, "\(base)/\(path)") })
            }
            gated.openGate()
            for (path, task) in pending {
                let reply = try await task.value
                #expect(reply.status == 200 && reply.body == reference[path]?.body, "\(path): \(reply.status)")
                for field in fields { #expect(reply.headers[field] == reference[path]?.headers[field], "\(path): \(field)") }
            }
            // Copied, never built: the stored tiles, now read from the cache, are the same answers.
            let builds = await second.buildsStarted
            #expect(gated.count("copied") == 1 && builds == 0)
            #expect(try await second.summary("photo").state == .ready)
            for path in stored {
                let reply = try await TileServerTests.get(http, "\(base)/\(path)")
                #expect(reply.status == 200 && reply.body == reference[path]?.body, "\(path) after the copy")
                #expect(reply.headers["etag"] == reference[path]?.headers["etag"], "\(path) after the copy")
            }
        }

        // A copy that fails once let go: the image is built here, and answers the same.
        let failing = GatedShelf(S3StoreShelf(client: client, prefix: prefix, threadPool: pool), failsCopies: true)
        defer { failing.openGate() }
        let third = try ImageCatalog(
            root: "\(folder)/masters", cache: "\(folder)/third", headerWaitLimit: .seconds(120), threadPool: pool, shelf: failing)
        await third.setShelfCopyGrace(.seconds(600))
        await third.setShelfReadLimit(.seconds(90))
        await third.setShelfLookLimit(.seconds(90))  // its look at the bucket too: a build here is not what is tested
        try await TileServerTests.withServer(TileServer(service: TileService(catalog: third))) { base, http in
            let path = stored[1]
            let reply = try await TileServerTests.get(http, "\(base)/\(path)")
            try await failing.waitForCopy()
            #expect(reply.status == 200 && reply.body == reference[path]?.body && failing.count("copy waiting") == 1)
            failing.openGate()
            for path in waiting + stored {
                let reply = try await TileServerTests.settled(http, "\(base)/\(path)")
                #expect(reply.status == 200 && reply.body == reference[path]?.body, "\(path) built here")
            }
            #expect(await third.buildsStarted == 1)
        }
        failing.openGate()
        try await pool.shutdownGracefully()  // its threads' queue is not left behind (LeakSanitizer)
    }
}
