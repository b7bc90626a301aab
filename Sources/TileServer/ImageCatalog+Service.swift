import NIOConcurrencyHelpers
public import ServiceLifecycle
import TileActors
import TileCore

extension ImageCatalog: Service {
    /// Runs the catalog's own tasks (lookups, builds, deadlines: nothing is looked up or built
    /// while the catalog does not run) until the service group shuts down (gracefully, or by
    /// cancellation), then ``shutDown()``: run the catalog in the same group as the server, after
    /// it, so that requests in flight finish first.
    public func run() async throws {
        await withDiscardingTaskGroup { group in
            group.addTask { [tasks, taskExecutor] in await tasks.run(preferring: taskExecutor) }
            // The shelf looked at when the catalog starts (a bucket missing or refused is said by /ready at
            // once), then again while it fails.
            if let shelf { _ = tasks.spawn { await self.watchShelf(shelf) } }
            if let masters { _ = tasks.spawn { await self.watchMasters(masters) } }
            try? await gracefulShutdown()
            await shutDown()
            group.cancelAll()  // the lookups and deadlines left, and any admin build
        }
    }

    /// Cancels every build still running (JPEGs built into the cache, uploads) and copy from the shelf,
    /// and waits for them to end; a cancelled build or copy removes its unfinished files. No build starts afterwards.
    public func shutDown() async {
        isShutDown = true
        var running: [(builder: ImageBuilder, feed: TaskNursery.Handle<Void>?, watcher: TaskNursery.Handle<Void>?)] = []
        var copies: [TaskNursery.Handle<Void>] = []
        for (id, entry) in entries {
            forgetReady(id)
            if case .building(let build) = entry.phase { running.append((build.builder, build.task, build.watcher)) }
            if case .copying(let copy) = entry.phase, let job = copy.job { copies.append(job) }
        }
        readyImages.shelved.withLockedValue { $0 = [:] }
        for copy in copies { copy.cancel() }
        for build in running {
            build.feed?.cancel()
            await build.builder.cancel()
        }
        for build in running {
            await build.feed?.value
            await build.watcher?.value
        }
        for copy in copies { await copy.value }
    }
}
