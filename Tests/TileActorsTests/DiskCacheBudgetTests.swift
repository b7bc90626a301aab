import Foundation
import Testing
import TileActors
import TestSupport
import TileCore

@Suite("DiskCacheBudget")
struct DiskCacheBudgetTests {
    /// Three small persistent stores, `a.tiles`, `b.tiles`, `c.tiles`, built in that order: their paths.
    static func threeStores(in folder: URL) throws -> [String] {
        try ["a", "b", "c"].map { name in
            var options = BuildOptions()
            let path = folder.appendingPathComponent("\(name).tiles").path
            options.storage = .persistent(path: path)
            _ = try TileBuilder.build(data: try Inputs.jpeg(width: 300, height: 200), options: options)
            return path
        }
    }

    @Test("past a tiny dirty threshold, flushes happen and writers wait for them")
    func flushesAndWaits() async throws {
        let budget = DiskCacheBudget(dirtyByteThreshold: 1, totalByteBudget: 1 << 40)
        let data = try Inputs.jpeg(width: 700, height: 600)
        var options = BuildOptions()
        options.writer = .bands(.init(bypassesPageCache: false))
        let builder = try ImageBuilder(options: options, budget: budget)
        var offset = 0
        while offset < data.count {
            let end = min(offset + 10_000, data.count)
            try await builder.append(data[offset..<end])
            // The writer waited: whatever it had written is flushed by the time append returns.
            #expect(await budget.dirtyBytes <= 1)
            offset = end
        }
        _ = try await builder.finish()
        var flushes = 0
        for await event in budget.events {
            if case .flushed = event { flushes += 1 }
            if flushes >= 2 { break }
        }
        #expect(flushes >= 2)
    }

    @Test("a progressive JPEG's coefficient file counts against the budget while it exists, and is not flushed")
    func coefficientFileCounts() async throws {
        // 1000x700 4:2:0: blocks of 8x8, luma rounded up to 2x2 blocks (the MCU), chroma 1 block each.
        let (width, height) = (1000, 700)
        let lumaBlocks = ((width + 15) / 16 * 2) * ((height + 15) / 16 * 2)
        let chromaBlocks = ((width + 15) / 16) * ((height + 15) / 16)
        let coefficientBytes = (lumaBlocks + 2 * chromaBlocks) * 128
        let data = try Synthetic.jpeg(.init(width: width, height: height, progressive: true))
        let budget = DiskCacheBudget(dirtyByteThreshold: 1 << 40, totalByteBudget: 1 << 40)
        var options = BuildOptions()
        options.coefficientStorage = .disk
        let builder = try ImageBuilder(options: options, budget: budget)
        try await builder.append(data.prefix(data.count / 3))  // scans are still arriving
        let image = try #require(await builder.image)
        #expect(image.scratchByteCount == coefficientBytes)
        #expect(image.bytesWritten == 0)
        #expect(await budget.totalBytes == coefficientBytes)
        #expect(await budget.dirtyBytes == 0)
        try await builder.append(data.dropFirst(data.count / 3))
        let complete = try await builder.finish()
        #expect(complete.scratchByteCount == 0)
        #expect(await budget.totalBytes == complete.totalByteCount)
    }

    @Test("past a tiny total budget, the least recently used unopened store is evicted, an open one never")
    func evictsLeastRecentlyUsedUnopened() async throws {
        let folder = try Inputs.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let paths = try Self.threeStores(in: folder)
        let tight = DiskCacheBudget(dirtyByteThreshold: 1 << 40, totalByteBudget: 1)
        var ids: [DiskCacheBudget.StoreID] = []
        // Registered in order a, b, c; the images passed here are released at once, so only the
        // explicit open below holds a store.
        for path in paths { ids.append(await tight.register(image: try TiledImage.open(store: path), path: path)) }
        // "a" is the oldest but open: "b" is the least recently used unopened store, then "c".
        let openA = try await tight.open(ids[0])
        await tight.close(ids[2])  // an accounting call: the budget acts on it
        #expect(FileManager.default.fileExists(atPath: paths[0]))
        #expect(!FileManager.default.fileExists(atPath: paths[1]))
        #expect(!FileManager.default.fileExists(atPath: paths[2]))
        var evicted: [String] = []
        for await event in tight.events {
            if case .evicted(let path, _) = event { evicted.append(path) }
            if evicted.count == 2 { break }
        }
        #expect(evicted == [paths[1], paths[2]])
        #expect(await tight.isRegistered(ids[0]))
        _ = try openA.readTile(level: 0, column: 0, row: 0)
    }

    @Test("a store another process has open (its folder held shared, as by an instance sharing the cache) is not evicted",
          .enabled(if: Tools.have("flock"), Comment(rawValue: Tools.missing("flock"))))
    func keepsStoresOpenElsewhere() async throws {
        let folder = try Inputs.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let paths = try Self.threeStores(in: folder)
        // Another process reads "a": util-linux's flock(1) holds its folder shared (-o: flock itself).
        let reader = try Daemon(Tools.path("flock")!, ["-s", "-o", paths[0], "sleep", "600"])
        defer { reader.stop(SIGKILL) }
        // Once flock holds it, an exclusive try on the folder fails.
        func isHeld() -> Bool {
            let fd = open(paths[0], O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            defer { close(fd) }
            return flock(fd, LOCK_EX | LOCK_NB) != 0
        }
        let deadline = ContinuousClock.now + .seconds(10)
        while !isHeld(), ContinuousClock.now < deadline { usleep(20_000) }
        #expect(isHeld())
        let tight = DiskCacheBudget(dirtyByteThreshold: 1 << 40, totalByteBudget: 1)
        var ids: [DiskCacheBudget.StoreID] = []
        for path in paths { ids.append(await tight.register(image: try TiledImage.open(store: path), path: path)) }
        await tight.close(ids[2])  // an accounting call: the budget evicts what it may
        #expect(FileManager.default.fileExists(atPath: paths[0]))
        #expect(!FileManager.default.fileExists(atPath: paths[1]) && !FileManager.default.fileExists(atPath: paths[2]))
        #expect(await tight.isRegistered(ids[0]))
        // The other process ends: the store is unused everywhere, and goes at the next accounting.
        reader.stop(SIGKILL)
        await tight.close(ids[0])
        #expect(!FileManager.default.fileExists(atPath: paths[0]))
        #expect(!(await tight.isRegistered(ids[0])))
    }

    @Test("an evicted store leaves the accounts before its files are gone; waitForRemoval returns once they are")
    func waitsForRemoval() async throws {
        let folder = try Inputs.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("big.tiles").path
        var options = BuildOptions()
        options.storage = .persistent(path: path)
        // 64 MB of tiles: deleting them takes the kernel a moment.
        _ = try TileBuilder.build(data: try Inputs.jpeg(width: 4000, height: 3000), options: options)
        let budget = DiskCacheBudget(dirtyByteThreshold: 1 << 40, totalByteBudget: 1)
        let id = await budget.register(image: try TiledImage.open(store: path), path: path)
        let eviction = Task { await budget.close(id) }  // over budget: evicted
        while await budget.isRegistered(id) { await Task.yield() }
        // What a catalog about to build the store again at the same path does.
        await budget.waitForRemoval(at: path)
        #expect(!FileManager.default.fileExists(atPath: path), "the store's files outlived waitForRemoval")
        await eviction.value
        await budget.waitForRemoval(at: folder.appendingPathComponent("never.tiles").path)  // none: returns at once
    }
}
