import Foundation
import NIOConcurrencyHelpers
import NIOPosix
import Testing
import TestSupport
import TileCore
@testable import TileServer

#if canImport(Glibc)
import Glibc
#endif

/// Servers sharing one cache folder (instances behind a load balancer): each image is built once.
@Suite("A shared cache folder")
struct SharedCacheTests {
    /// Descriptors of this process open on `path` (`/proc/self/fd`).
    static func descriptors(on path: String) -> Int {
        let links = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return links.filter { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)")) == path }.count
    }

    @Test("a build lock held by another process is waited for until it is released, then built here; another server reuses the store")
    func lockWaitedFor() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let cache = "\(folder)/.cache"
        // A thread pool of the test's own: the catalogs' file checks and lock opens never wait behind
        // other suites' work on NIO's shared pool (two threads here) while the whole suite runs.
        let pool = NIOThreadPool(numberOfThreads: 2)
        pool.start()
        let first = try ImageCatalog(
            root: folder, cache: cache, headerWaitLimit: .seconds(120), threadPool: pool, storeFormat: .raw)
        let firstService = first.started()
        defer { firstService.cancel() }
        // Another instance's build in progress: its lock on the image, held on a descriptor of its own
        // (`flock` locks of two open files conflict, in one process as in two).
        let lockPath = "\(first.cache)/\(BuildLock.fileName("photo"))"
        let other = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        #expect(other >= 0 && flock(other, LOCK_EX | LOCK_NB) == 0)
        let looked = NIOLockedValueBox(false)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                _ = try await first.image("photo")
                looked.withLockedValue { $0 = true }
            }
            // Until the catalog has the lock file open (it then tries the lock, and waits).
            let deadline = ContinuousClock.now + .seconds(120)
            while Self.descriptors(on: lockPath) < 2, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
            let building = await first.isBuilding("photo")
            #expect(Self.descriptors(on: lockPath) == 2, "the catalog never opened the lock file (building: \(building))")
            let endedEarly = looked.withLockedValue { $0 }
            #expect(!endedEarly, "the lookup ended while another process held the lock")
            #expect(!FileManager.default.fileExists(atPath: "\(first.cache)/photo.tiles"))
            close(other)  // the other instance ends without a store: this one builds it
            try await group.waitForAll()
        }
        let ended = looked.withLockedValue { $0 }
        #expect(ended)
        while await first.isBuilding("photo") { try await Task.sleep(for: .milliseconds(10)) }
        let store = "\(first.cache)/photo.tiles"
        let built = try FileManager.default.attributesOfItem(atPath: store)[.systemFileNumber] as? Int
        #expect(built != nil)

        // A second server sharing the folder: the store is reused, not built again.
        let second = try ImageCatalog(root: folder, cache: cache, threadPool: pool, storeFormat: .raw)
        let secondService = second.started()
        defer { secondService.cancel() }
        let image = try await second.imageWhenItsTurnComes("photo")
        #expect(image.pyramid.isComplete && image.pyramid.geometry.width == 1300)
        let (opened, building) = (await second.storesOpened, await second.isBuilding("photo"))
        #expect(opened == 1 && !building)
        #expect(try FileManager.default.attributesOfItem(atPath: store)[.systemFileNumber] as? Int == built)
        for service in [firstService, secondService] {
            service.cancel()
            await service.value
        }
        try await pool.shutdownGracefully()
    }
}
