import Foundation
import Testing
import TestTraits
import TileActors
import TestSupport
import TileCore

@Suite("DiskCacheBudget", .ownThreads)
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

    @Test("a budget of Int.max (no limit) takes reservations of half of it while their sum fits, and refuses the next: no sum traps")
    func largestBudget() async throws {
        let budget = DiskCacheBudget(totalByteBudget: .max)
        let half = Int.max / 2 + (1 << 20)  // what an upload of an unlimited size reserves (TileRoutes.storeByteCount)
        let first = await budget.reserve(byteCount: half, path: "/nonexistent/a.tiles")
        #expect(first != nil)
        // Int.max / 2 + 1 MiB twice is past Int.max: refused (its sum overflowed, a trap, before).
        #expect(await budget.reserve(byteCount: half, path: "/nonexistent/b.tiles") == nil)
        #expect(await budget.reserve(byteCount: 1 << 30, path: "/nonexistent/c.tiles") != nil)
        #expect(await budget.availableByteCount == Int.max - half - (1 << 30))
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
        // Counted: the coefficient file, or the store's reservation while the build runs if larger
        // (its raw store, written plainly: 4x3 + 2x2 + 1 tiles of 256 x 256 x 4 bytes).
        let reserved = (4 * 3 + 2 * 2 + 1) * 256 * 256 * 4
        #expect(await budget.totalBytes == max(coefficientBytes, reserved))
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

    @Test("room made for a full disk: the least recently used unopened stores go until the bytes asked for are free, within the budget")
    func makesRoomForAFullDisk() async throws {
        let folder = try Inputs.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let paths = try Self.threeStores(in: folder)
        // A budget far larger than the three: nothing is evicted for it.
        let roomy = DiskCacheBudget(dirtyByteThreshold: 1 << 40, totalByteBudget: 1 << 40)
        var ids: [DiskCacheBudget.StoreID] = []
        for path in paths { ids.append(await roomy.register(image: try TiledImage.open(store: path), path: path)) }
        let each = await roomy.totalBytes / 3
        #expect(each > 0)
        // The disk is full all the same: room for one byte more than one store takes, so two go, "a" and
        // "b", the least recently used; "c" stays.
        await roomy.makeRoom(byteCount: each + 1)
        #expect(!FileManager.default.fileExists(atPath: paths[0]) && !FileManager.default.fileExists(atPath: paths[1]))
        let kept = await roomy.isRegistered(ids[2])
        #expect(FileManager.default.fileExists(atPath: paths[2]) && kept)
    }

    @Test("room made for a full disk under a budget of Int.max (none): the least recently used go first, all when more is asked; nothing traps")
    func makesRoomUnderTheLargestBudget() async throws {
        let folder = try Inputs.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let paths = try Self.threeStores(in: folder)
        let unlimited = DiskCacheBudget(dirtyByteThreshold: 1 << 40, totalByteBudget: .max)
        var ids: [DiskCacheBudget.StoreID] = []
        for path in paths { ids.append(await unlimited.register(image: try TiledImage.open(store: path), path: path)) }
        let each = await unlimited.totalBytes / 3
        await unlimited.makeRoom(byteCount: each + 1)
        #expect(!FileManager.default.fileExists(atPath: paths[0]) && !FileManager.default.fileExists(atPath: paths[1]))
        let kept = await unlimited.isRegistered(ids[2])
        #expect(FileManager.default.fileExists(atPath: paths[2]) && kept)
        // More than the stores hold: the budget's room and the bytes were summed (past Int.max: a trap) before.
        await unlimited.makeRoom(byteCount: 4 * each)
        let gone = await unlimited.isRegistered(ids[2])
        #expect(!FileManager.default.fileExists(atPath: paths[2]) && !gone)
    }

    @Test(
        "a store another process has open (its folder held shared, as by an instance sharing the cache) is not evicted",
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

    /// Full-range noise (every pixel's channels drawn at random): what JPEG compresses worst.
    static func noise(width: Int, height: Int) -> [UInt8] {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        return (0..<(width * height * 4)).map { i in
            if i % 4 == 3 { return 255 }
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return UInt8(truncatingIfNeeded: state >> 56)
        }
    }

    @Test("a build is refused before it writes when its store cannot fit, and stopped when it writes past what fits")
    func buildsStayWithinTheBudget() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("budget-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let (width, height) = (1200, 1000)
        var encoding = JPEGEncoder.Options()
        encoding.quality = 98
        encoding.subsampling = .s444
        let jpeg = try JPEGEncoder.encode(pixels: Self.noise(width: width, height: height), width: width, height: height, options: encoding)
        // A raw store's size, written plainly: every level's 256-pixel tiles, 4 bytes a pixel.
        var (w, h, raw) = (width, height, 0)
        while true {
            raw += ((w + 255) / 256) * ((h + 255) / 256) * 256 * 256 * 4
            if w <= 256 && h <= 256 { break }
            (w, h) = ((w + 1) / 2, (h + 1) / 2)
        }
        // Refused from the header: a raw store of `raw` bytes in half that, nothing made.
        var options = BuildOptions()
        options.storage = .persistent(path: folder.appendingPathComponent("raw.tiles").path)
        let small = DiskCacheBudget(totalByteBudget: raw / 2)
        let refused = try ImageBuilder(options: options, budget: small)
        await #expect(throws: TileError.self) { try await refused.append(jpeg) }
        if case .failed(let error) = await refused.currentState { #expect(error.code == .overBudget) } else { Issue.record("not failed") }
        #expect(await small.totalBytes == 0)
        // A TIFF store of noise at quality 98 takes far more than the 2 bits a pixel reserved for it:
        // level 0 alone is the source's bytes. Within the reservation, past the budget: stopped.
        options.storage = .persistent(path: folder.appendingPathComponent("tiff.tiles").path)
        options.format = .tiff()
        let reserved = TileBuilder.storeByteEstimate(try TileGeometry(storedWidth: width, storedHeight: height), tiff: true)
        #expect(jpeg.count > 2 * reserved)
        let tight = DiskCacheBudget(dirtyByteThreshold: 1, totalByteBudget: reserved + reserved / 2)
        let stopped = try ImageBuilder(options: options, budget: tight)
        var offset = 0
        while offset < jpeg.count, (try? await stopped.append(jpeg[offset..<min(offset + 64 * 1024, jpeg.count)])) != nil {
            offset += 64 * 1024
        }
        _ = try? await stopped.finish()
        if case .failed(let error) = await stopped.currentState {
            #expect(error.code == .overBudget, "\(error)")
        } else {
            Issue.record("the build was not stopped: \(await stopped.currentState)")
        }
        #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("tiff.tiles").path))
        #expect(await tight.totalBytes == 0)
        // The same with room for it: built.
        let roomy = DiskCacheBudget(totalByteBudget: 4 * jpeg.count + raw)
        let built = try ImageBuilder(options: options, budget: roomy)
        try await built.append(jpeg)
        _ = try await built.finish()
    }
}
