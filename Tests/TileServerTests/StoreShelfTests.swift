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

    func publish(_ id: String, store path: String) async throws {
        do { try await shelf.publish(id, store: path) } catch {
            add("publish failed")
            throw error
        }
        add("published")
    }

    /// Waits until `what` or `failed` has been counted (a publish runs after its build, in a task of
    /// the catalog's own).
    func waitFor(_ what: String, or failed: String) async throws {
        let deadline = ContinuousClock.now + .seconds(120)
        while count(what) + count(failed) == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
    }
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
        let client = S3Client(
            configuration: S3Configuration(
                endpoint: server.endpoint, region: server.region,
                credentials: S3Credentials(accessKeyID: server.accessKey, secretAccessKey: server.secretKey)))
        try await client.createBucket("shelf")
        let folder = NSTemporaryDirectory() + "shelf-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: "\(folder)/masters", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try Inputs.jpeg(width: 3000, height: 2000).write(to: URL(fileURLWithPath: "\(folder)/masters/photo.jpg"))
        let pool = NIOThreadPool(numberOfThreads: 2)
        pool.start()
        let prefix = try #require(S3Location("s3://shelf/stores/"))
        func catalog(_ name: String, root: String = "\(folder)/masters") throws -> (ImageCatalog, CountingShelf, Task<Void, Never>) {
            let shelf = CountingShelf(S3StoreShelf(client: client, prefix: prefix, threadPool: pool))
            let catalog = try ImageCatalog(root: root, cache: "\(folder)/\(name)", threadPool: pool, shelf: shelf)
            return (catalog, shelf, catalog.started())
        }

        // The first server builds, then publishes its store.
        let (first, firstShelf, firstService) = try catalog("first")
        defer { firstService.cancel() }
        _ = try await first.image("photo")
        while await first.isBuilding("photo") { try await Task.sleep(for: .milliseconds(10)) }
        try await firstShelf.waitFor("published", or: "publish failed")
        #expect(firstShelf.count("published") == 1 && firstShelf.count("copied") == 0)
        let shelved = try #require(try await client.store(at: S3Location(bucket: "shelf", key: "stores/photo.tiles")))
        let built = try Data(contentsOf: URL(fileURLWithPath: "\(first.cache)/photo.tiles/pyramid.tif"))
        #expect(shelved.tiffByteCount == built.count)

        // A second server, its cache empty: the store copied, whole at once, never built (nor published).
        let (second, secondShelf, secondService) = try catalog("second")
        defer { secondService.cancel() }
        let copied = try await second.image("photo")
        #expect(copied.pyramid.isComplete && copied.pyramid.geometry.width == 3000)
        #expect(secondShelf.count("copied") == 1 && secondShelf.count("published") == 0)
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

        // Another version of the master (another folder, the same identifier): not the shelf's, built here.
        try FileManager.default.createDirectory(atPath: "\(folder)/other", withIntermediateDirectories: true)
        try Inputs.jpeg(width: 2000, height: 1500, seed: 2).write(to: URL(fileURLWithPath: "\(folder)/other/photo.jpg"))
        let (third, thirdShelf, thirdService) = try catalog("third", root: "\(folder)/other")
        defer { thirdService.cancel() }
        _ = try await third.image("photo")
        while await third.isBuilding("photo") { try await Task.sleep(for: .milliseconds(10)) }
        #expect(thirdShelf.count("copied") == 0)
        #expect(try await third.image("photo").pyramid.geometry.width == 2000)
        try await thirdShelf.waitFor("published", or: "publish failed")
        #expect(thirdShelf.count("published") == 1)

        // The bucket down: a server asks, fails, builds the image itself and serves it; its publish fails.
        server.stop()
        let (fourth, fourthShelf, fourthService) = try catalog("fourth")
        defer { fourthService.cancel() }
        _ = try await fourth.image("photo")
        while await fourth.isBuilding("photo") { try await Task.sleep(for: .milliseconds(10)) }
        let alone = try await fourth.image("photo")
        #expect(alone.pyramid.isComplete && alone.pyramid.geometry.width == 3000 && fourthShelf.count("find failed") == 1)
        try await fourthShelf.waitFor("published", or: "publish failed")
        #expect(fourthShelf.count("publish failed") == 1)

        for service in [firstService, secondService, thirdService, fourthService] {
            service.cancel()
            await service.value
        }
        try await pool.shutdownGracefully()
    }
}
