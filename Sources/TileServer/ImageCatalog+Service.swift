public import ServiceLifecycle
import TileActors
import TileCore

extension ImageCatalog: Service {
    /// Waits until the service group shuts down (gracefully, or by cancellation), then
    /// ``shutDown()``: run the catalog in the same group as the server, after it, so that requests in
    /// flight finish first.
    public func run() async throws {
        try? await gracefulShutdown()
        await shutDown()
    }

    /// Cancels every build still running (JPEGs built into the cache, uploads) and waits for them to
    /// end; a cancelled build removes its unfinished files. No build starts afterwards.
    public func shutDown() async {
        isShutDown = true
        for id in entries.keys { forgetReady(id) }
        var running: [(String, ImageBuilder, Task<TiledImage, any Error>)] = []
        for (id, entry) in entries {
            if case .building(let builder, let task) = entry { running.append((id, builder, task)) }
        }
        for (_, builder, task) in running {
            task.cancel()
            await builder.cancel()
        }
        for (id, _, task) in running {
            _ = await task.result
            if case .building = entries[id] { entries[id] = nil }
            builderImages[id] = nil
        }
    }
}
