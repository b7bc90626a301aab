import Foundation
import NIOConcurrencyHelpers
import NIOPosix
import Testing
import TestSupport
import TileActors
import TileCore
import TileNetwork
@testable import TileServer

/// A bucket's shelf that counts what the catalog asks of it (the bucket does the work).
final class CountingShelf: StoreShelf {
    let shelf: S3StoreShelf
    private let counts = NIOLockedValueBox([String: Int]())

    init(_ shelf: S3StoreShelf) { self.shelf = shelf }

    var description: String { shelf.description }
    func count(_ what: String) -> Int { counts.withLockedValue { $0[what] ?? 0 } }
    private func add(_ what: String) { counts.withLockedValue { $0[what, default: 0] += 1 } }

    func check() async throws { try await shelf.check() }
    func isUnavailable(_ error: any Error) -> Bool { shelf.isUnavailable(error) }

    func find(_ id: String) async throws -> ShelvedStore? {
        do { return try await shelf.find(id) } catch {
            add("find failed")
            throw error
        }
    }

    func copy(_ store: ShelvedStore, to path: String) async throws {
        try await shelf.copy(store, to: path)
        add("copied")
    }

    func publish(_ id: String, store path: String, masterVersion: String?) async throws {
        do { try await shelf.publish(id, store: path, masterVersion: masterVersion) } catch {
            add("publish failed")
            throw error
        }
        add("published")
    }

    /// Waits until `what` has been counted `count` times (a publish again once the bucket is back).
    func waitFor(_ what: String, count wanted: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(120)
        while count(what) < wanted, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        if count(what) < wanted { Issue.record("\(what) counted \(count(what)) times in 120 s, not \(wanted)") }
    }

    /// Waits until `what` or `failed` has been counted (a publish runs after its build, in a task of
    /// the catalog's own).
    func waitFor(_ what: String, or failed: String) async throws {
        let deadline = ContinuousClock.now + .seconds(120)
        while count(what) + count(failed) == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        if count(what) + count(failed) == 0 { Issue.record("neither \(what) nor \(failed) in 120 s") }
    }
}

extension ImageCatalog {
    /// Waits until `id`'s build (if any) has its whole pyramid written: a continuation the build's
    /// progress resumes, recorded as an issue past two minutes.
    func waitUntilBuilt(_ id: String) async {
        let built = await waitUntil(id, deadline: .now + .seconds(120)) { $0.isComplete }
        if !built { Issue.record("\(id) was not built in 120 s") }
    }
}

/// The JPEG `jpeg` with one value of its first quantisation table one higher: a master of the same
/// size, other bytes (and pixels).
func requantised(_ jpeg: Data) throws -> Data {
    var bytes = [UInt8](jpeg)
    let dqt = try #require((0..<(bytes.count - 1)).first { bytes[$0] == 0xFF && bytes[$0 + 1] == 0xDB })
    let value = dqt + 5 + 9  // marker, length, precision and table: the tenth value (8-bit tables)
    try #require(bytes[dqt + 4] >> 4 == 0 && bytes[value] < 254)
    bytes[value] += 1
    return Data(bytes)
}

/// Servers sharing their stores through a bucket (issue 43, points 3 and 4), against the real store
/// (``TestSupport/S3TestServer``): a store one builds, another copies instead of building; a store of
/// another version of the master is not taken; the bucket down, each builds alone.
@Suite("Stores shared through a bucket (loopback store)", .serialized, .enabled(if: S3TestServer.isAvailable, S3TestServer.skip))
struct StoreShelfTests {
    @Test("built once: another server copies the store byte for byte; another version of the master is built; the bucket down: built here")
    func sharedThroughABucket() async throws {
        let server = try S3TestServer()
        defer { server.stop() }
        let client = try await BucketMasterTests.bucket("shelf", in: server)
        let folder = NSTemporaryDirectory() + "shelf-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: "\(folder)/masters", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try Inputs.jpeg(width: 3000, height: 2000).write(to: URL(fileURLWithPath: "\(folder)/masters/photo.jpg"))
        let pool = NIOThreadPool(numberOfThreads: 2)
        pool.start()
        let prefix = try #require(S3Location("s3://shelf/stores/"))
        // Looks at the bucket wait as long as the test's own waits too (the loopback store, under the other
        // suites' load, once took more than the default 10 s): but for a stopped bucket's, which is what they test.
        func catalog(_ name: String, root: String = "\(folder)/masters", waitsForLooks: Bool = true) async throws
            -> (ImageCatalog, CountingShelf, Task<Void, Never>)
        {
            let shelf = CountingShelf(S3StoreShelf(client: client, prefix: prefix, threadPool: pool))
            // A lookup waits for its build's header as long as the test's own waits: under a sanitizer and the
            // other suites' load, the default 20 s has passed before a build's turn came.
            let catalog = try ImageCatalog(
                root: root, cache: "\(folder)/\(name)", headerWaitLimit: .seconds(120), threadPool: pool, shelf: shelf)
            if waitsForLooks { await catalog.setShelfLookLimit(.seconds(90)) }
            return (catalog, shelf, catalog.started())
        }

        // The first server builds, then publishes its store.
        let (first, firstShelf, firstService) = try await catalog("first")
        defer { firstService.cancel() }
        _ = try await first.imageWhenItsTurnComes("photo")
        await first.waitUntilBuilt("photo")
        try await firstShelf.waitFor("published", or: "publish failed")
        #expect(firstShelf.count("published") == 1 && firstShelf.count("copied") == 0 && firstShelf.count("find failed") == 0)
        let shelved = try #require(try await client.store(at: S3Location(bucket: "shelf", key: "stores/photo.tiles")))
        let built = try Data(contentsOf: URL(fileURLWithPath: "\(first.cache)/photo.tiles/pyramid.tif"))
        #expect(shelved.tiffByteCount == built.count)

        // A second server, its cache empty: the store copied, whole at once, never built.
        let (second, secondShelf, secondService) = try await catalog("second")
        defer { secondService.cancel() }
        let copied = try await second.image("photo")
        #expect(copied.pyramid.isComplete && copied.pyramid.geometry.width == 3000)
        #expect(secondShelf.count("copied") == 1 && secondShelf.count("find failed") == 0)
        let (builtHere, builtFirst) = (await second.buildsStarted, await first.buildsStarted)
        #expect(builtHere == 0 && builtFirst == 1)
        #expect(try Data(contentsOf: URL(fileURLWithPath: "\(second.cache)/photo.tiles/pyramid.tif")) == built)
        let level = copied.pyramid.geometry.levels[0]
        let original = try await first.image("photo").pyramid
        for row in 0..<level.rows {
            for column in 0..<level.columns {
                let reference = try original.storedJPEGTile(level: 0, column: column, row: row)
                #expect(try copied.pyramid.storedJPEGTile(level: 0, column: column, row: row) == reference, "tile \(column)/\(row)")
            }
        }
        // Nothing else left in its cache: no staging folder of the copy.
        let names = try FileManager.default.contentsOfDirectory(atPath: second.cache).filter { !$0.hasSuffix(".lock") }.sorted()
        #expect(names == ["photo.source", "photo.tiles"], "\(names)")

        // Another version of the master (another folder, the same identifier), of the same size: its bytes'
        // fingerprint is not the shelf's store's, so it is built here.
        try FileManager.default.createDirectory(atPath: "\(folder)/other", withIntermediateDirectories: true)
        let master = try Data(contentsOf: URL(fileURLWithPath: "\(folder)/masters/photo.jpg"))
        let other = try requantised(master)
        #expect(other.count == master.count && other != master)
        try other.write(to: URL(fileURLWithPath: "\(folder)/other/photo.jpg"))
        let (third, thirdShelf, thirdService) = try await catalog("third", root: "\(folder)/other")
        defer { thirdService.cancel() }
        _ = try await third.imageWhenItsTurnComes("photo")
        await third.waitUntilBuilt("photo")
        let builtThird = await third.buildsStarted
        #expect(thirdShelf.count("copied") == 0 && thirdShelf.count("find failed") == 0 && builtThird == 1)
        let rebuilt = try await third.image("photo").pyramid
        #expect(try rebuilt.storedJPEGTile(level: 0, column: 0, row: 0) != original.storedJPEGTile(level: 0, column: 0, row: 0))
        try await thirdShelf.waitFor("published", or: "publish failed")
        #expect(thirdShelf.count("published") == 1)

        // The bucket down: a server builds the image itself and serves it (whether its look at start or
        // its look for the image found the bucket down first); its publish fails, and /ready says why.
        server.pause()
        let (fourth, fourthShelf, fourthService) = try await catalog("fourth", waitsForLooks: false)
        defer { fourthService.cancel() }
        // A rest of an hour after the failure: no look at the bucket until the test says so.
        await fourth.setShelfRest(.seconds(3600))
        _ = try await fourth.image("photo")
        await fourth.waitUntilBuilt("photo")
        let alone = try await fourth.image("photo")
        #expect(alone.pyramid.isComplete && alone.pyramid.geometry.width == 3000)
        try await fourthShelf.waitFor("published", or: "publish failed")
        #expect(fourthShelf.count("publish failed") == 1)
        let health = await fourth.health()
        #expect(!health.isReady && health.problems.contains { $0.contains("the store shelf s3://shelf/stores cannot be used") }, "\(health)")
        // Within the rest after a failure, the next image is built without asking the bucket.
        let looks = fourthShelf.count("find failed")
        try Inputs.jpeg(width: 800, height: 600, seed: 3).write(to: URL(fileURLWithPath: "\(folder)/masters/later.jpg"))
        _ = try await fourth.image("later")
        await fourth.waitUntilBuilt("later")
        #expect(fourthShelf.count("find failed") == looks)
        try await fourthShelf.waitFor("publish failed", count: 2)
        #expect(fourthShelf.count("published") == 0, "nothing published while the bucket is down")
        // The bucket back: the server's watch finds it (at its next look, which the shorter rest brings
        // now) and publishes both stores, one after the other; /ready is ready again.
        try server.resume()
        await fourth.setShelfRest(.milliseconds(100))
        try await fourthShelf.waitFor("published", count: 2)
        let health2 = await fourth.health()
        #expect(fourthShelf.count("published") == 2 && health2.isReady, "\(health2)")
        let photo = try await client.store(at: S3Location(bucket: "shelf", key: "stores/photo.tiles"))
        let masterFingerprint = try TiledImage.sourceFingerprint(ofFile: "\(folder)/masters/photo.jpg").fingerprint
        #expect(photo?.sourceFingerprint == masterFingerprint, "the bucket's photo is the fourth server's again, not the third's")
        #expect(try await client.store(at: S3Location(bucket: "shelf", key: "stores/later.tiles")) != nil)

        for service in [firstService, secondService, thirdService, fourthService] {
            service.cancel()
            await service.value
        }
        try await pool.shutdownGracefully()
    }
}
