import Foundation
import Testing
import TestTraits
import TileActors
import TestSupport
import TileCore

@Suite("Thumbnailer", .ownThreads)
struct ThumbnailerTests {
    @Test("copies go through the heavy queue; decoded thumbnails are cached until unloaded")
    func copiesAndCache() async throws {
        let folder = try Inputs.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let source = folder.appendingPathComponent("photo.jpg").path
        #expect(FileManager.default.createFile(atPath: source, contents: try Inputs.jpeg(width: 800, height: 600)))
        let thumbnailer = Thumbnailer()
        let results = try await thumbnailer.makeCopies(
            of: source,
            targets: [
                .init(maxEdge: 400, path: folder.appendingPathComponent("a.jpg").path),
                .init(maxEdge: 100, path: folder.appendingPathComponent("b.jpg").path)
            ])
        #expect(results.map { [$0.width, $0.height] } == [[400, 300], [100, 75]])
        let pixels = try await thumbnailer.pixels(of: source, maxEdge: 64)
        #expect(pixels.width == 64 && pixels.height == 48)
        #expect(await thumbnailer.cachedByteCount == 64 * 48 * 4)
        #expect(try await thumbnailer.pixels(of: source, maxEdge: 64) == pixels)
        await thumbnailer.unload(source)
        #expect(await thumbnailer.cachedByteCount == 0)
    }

    @Test("past the cache's limit the least recently used thumbnail goes first")
    func leastRecentlyUsedGoesFirst() async throws {
        let folder = try Inputs.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        var paths: [String] = []
        for name in ["a", "b", "c"] {
            paths.append(folder.appendingPathComponent("\(name).jpg").path)
            #expect(FileManager.default.createFile(atPath: paths.last!, contents: try Inputs.jpeg(width: 400, height: 300)))
        }
        // 64x48 RGBA each: room for two.
        let bytes = 64 * 48 * 4
        let thumbnailer = Thumbnailer(cacheByteLimit: 2 * bytes)
        _ = try await thumbnailer.pixels(of: paths[0], maxEdge: 64)
        _ = try await thumbnailer.pixels(of: paths[1], maxEdge: 64)
        _ = try await thumbnailer.pixels(of: paths[0], maxEdge: 64)  // a used again: b is now the oldest
        _ = try await thumbnailer.pixels(of: paths[2], maxEdge: 64)
        #expect(await thumbnailer.cachedByteCount == 2 * bytes)
        // What is left is a and c: unloading b frees nothing, unloading a frees one.
        await thumbnailer.unload(paths[1])
        #expect(await thumbnailer.cachedByteCount == 2 * bytes)
        await thumbnailer.unload(paths[0])
        #expect(await thumbnailer.cachedByteCount == bytes)
    }

    @Test("a job whose caller is cancelled while it waits never runs and writes nothing")
    func cancelledWhileWaiting() async throws {
        let folder = try Inputs.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let source = folder.appendingPathComponent("photo.jpg").path
        #expect(FileManager.default.createFile(atPath: source, contents: try Inputs.jpeg(width: 400, height: 300)))
        let queue = HeavyWorkQueue(maximumConcurrency: 1)
        let thumbnailer = Thumbnailer(queue: queue)
        let gate = Gate()
        let blocker = Task { try await queue.run { await gate.wait() } }
        while queue.currentCounts.active == 0 { await Task.yield() }
        let output = folder.appendingPathComponent("never.jpg").path
        let job = Task { try await thumbnailer.makeCopies(of: source, targets: [.init(maxEdge: 100, path: output)]) }
        while queue.currentCounts.pending == 0 { await Task.yield() }
        job.cancel()
        await #expect(throws: CancellationError.self) { try await job.value }
        await gate.open()
        try await blocker.value
        #expect(!FileManager.default.fileExists(atPath: output))
    }
}
