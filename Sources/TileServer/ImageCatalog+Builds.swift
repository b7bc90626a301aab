import Foundation
import Logging
import NIOPosix
import TileActors
public import TileCore

extension ImageCatalog {
    /// Half of `a + b`, or of `Int.max` when the sum is past it (``maximumPendingBuilds`` of `Int.max`,
    /// as "no limit", trapped).
    nonisolated static func halfOfSum(_ a: Int, _ b: Int) -> Int {
        let (sum, overflows) = a.addingReportingOverflow(b)
        return (overflows ? .max : sum) / 2
    }

    /// One build in progress (a JPEG of the folder into the cache, or an upload into the folder): its
    /// builder, its image once the header is read, and the requests waiting on its progress.
    /// Confined to the catalog's actor.
    final class Build {
        let builder: ImageBuilder
        /// The version of the JPEG being built; nil for an upload.
        let fingerprint: SourceFingerprint?
        /// The file of the folder being built; nil for an upload, or a master of the master shelf.
        let sourcePath: String?
        let isUpload: Bool
        var image: TiledImage?
        /// Feeds the builder (a JPEG of the folder); an upload's route feeds it instead.
        var task: TaskNursery.Handle<Void>?
        /// Follows the builder's progress and settles the image's state when the build ends.
        var watcher: TaskNursery.Handle<Void>?
        var waiters: [Int: Waiter] = [:]
        /// Set when the build has ended: nothing waits on it any more.
        var hasEnded = false
        /// An upload's room in the budget (``ImageCatalog/reserveUpload(_:byteCount:)``).
        var reservation: DiskCacheBudget.StoreID?
        /// The cache folder's lock on this image, held until the build has ended (a JPEG's build).
        var lock: BuildLock?
        /// Earlier builds of this version of the source that failed in a row.
        var attempts = 0
        /// Who asked first (an address), when it was asked for: its builds count against it.
        var client: String?
        let started = ContinuousClock.now

        init(builder: ImageBuilder, fingerprint: SourceFingerprint?, sourcePath: String?, isUpload: Bool = false) {
            (self.builder, self.fingerprint, self.sourcePath, self.isUpload) = (builder, fingerprint, sourcePath, isUpload)
        }
    }

    /// A request waiting until the build's image satisfies `condition` (or the build ends, or its
    /// deadline passes).
    struct Waiter {
        let condition: @Sendable (TiledImage) -> Bool
        let continuation: CheckedContinuation<Bool, Never>
        /// The job that ends the wait at its deadline: stopped when the wait ends before.
        var deadline: TaskNursery.Handle<Void>?

        func resume(_ satisfied: Bool) {
            deadline?.cancel()
            continuation.resume(returning: satisfied)
        }
    }

    /// Why one more build (or copy from the shelf) may not start now: past ``maximumPendingBuilds``
    /// builds and copies waiting, or `client`'s share (``maximumBuildsPerClient``); nil when it may.
    func admission(for client: String?) -> LookupError? {
        let building = entries.values.count { if case .building(let b) = $0.phase { !b.isUpload } else { false } }
        guard building + shelfCopyCount - concurrentBuilds < maximumPendingBuilds else { return .busy }
        if let client, builds(of: client) >= maximumBuildsPerClient { return .busy }
        return nil
    }

    /// Builds running or waiting that `client` started, and its copies from the shelf in progress.
    func builds(of client: String) -> Int {
        entries.values.count { if case .building(let b) = $0.phase { !b.isUpload && b.client == client } else { false } } + (shelfCopies[client] ?? 0)
    }

    /// Reuses the cache store of `source` when it was built from this version, else starts a build,
    /// holding the cache folder's lock on `id`; while another server sharing the folder holds it (and
    /// builds the image), waits for its store, up to ``headerWaitLimit``.
    func buildOrReuse(_ id: String, _ source: SourceFile, attempts: Int = 0, for client: String? = nil) async -> LookupError? {
        let store = "\(cache)/\(Self.cacheName(id)).tiles"
        // An eviction of this store (it leaves the budget's accounts before its files are deleted) done
        // before anything is read or built there.
        await budget.waitForRemoval(at: store)
        let deadline = ContinuousClock.now + headerWaitLimit
        let lock: BuildLock
        let cache = self.cache
        do { lock = try await threadPool.blocking { () throws(TileError) in try BuildLock.open(id, in: cache) } } catch {
            setFailed(id, error, source.fingerprint, attempts: attempts + 1)
            return nil
        }
        let lockName = BuildLock.fileName(id)
        while true {
            let changes = cacheChanges.count(of: lockName)
            if await reuse(id, source, store) { return nil }
            // A client past its share of the builds starts none (nor waits for another server's).
            if let client, builds(of: client) >= maximumBuildsPerClient { return .busy }
            if lock.tryTake() { break }
            // Another server is building it: its store is reused once it releases its lock (closes the
            // lock file: the cache folder's watcher says so). A look each second all the same, for what
            // inotify does not see (another host's build on a shared file system, a lost event, a
            // folder inotify refused to watch).
            guard ContinuousClock.now < deadline, !Task.isCancelled else {
                return .failed(TileError(.notReady, "another server sharing the cache is building \(id)"))
            }
            await cacheChanges.wait(for: lockName, after: changes, until: min(deadline, .now + .seconds(1)))
        }
        guard !isShutDown else {
            apply(.failed(TileError(.cancelled, "the server is shutting down"), source.fingerprint, attempts: attempts, now: .now), to: id)
            return nil
        }
        if let refusal = admission(for: client) { return refusal }
        switch await copyFromShelf(id, source, to: store, for: client, lock: lock, attempts: attempts) {
        case .copied, .copying: return nil
        case .absent: return startBuild(id, source, store: store, lock: lock, attempts: attempts, for: client)
        }
    }

    /// Starts `id`'s build from `source` into the cache store `store`, with the cache folder's lock on
    /// `id` held (the build keeps it until it ends), unless the catalog is shutting down or the builds
    /// waiting are too many.
    func startBuild(_ id: String, _ source: SourceFile, store: String, lock: BuildLock, attempts: Int, for client: String?) -> LookupError? {
        guard !isShutDown, !Task.isCancelled else {
            apply(.failed(TileError(.cancelled, "the server is shutting down"), source.fingerprint, attempts: attempts, now: .now), to: id)
            return nil
        }
        // Again: other builds may have started while the shelf was asked.
        if let refusal = admission(for: client) { return refusal }
        var options = BuildOptions()
        options.page = source.page
        options.storage = .persistent(path: store)
        options.format = storeFormat
        let builder: ImageBuilder
        let path = source.remote == nil ? source.path : nil
        do { builder = try ImageBuilder(options: options, budget: budget, sourcePath: path, threadPool: threadPool) } catch {
            setFailed(id, error, source.fingerprint, attempts: attempts + 1)
            return nil
        }
        let build = Build(builder: builder, fingerprint: source.fingerprint, sourcePath: path)
        build.attempts = attempts
        build.lock = lock
        build.client = client
        apply(.started(build), to: id)
        buildsStarted += 1
        CacheStoreRecord.remove(forStore: store)  // a record of an older version
        let (queue, pool, remote) = (builds, threadPool, source.remote != nil)
        // A master of the shelf streamed as it downloads (its version's bytes only); a file read on the pool.
        let feed: any ImageSource =
            if let remote = source.remote, let masters { masters.source(of: remote) } else {
                FileImageSource(regularFile: source.path, readingOn: pool)
            }
        build.task = tasks.spawn {
            do {
                try await queue.run { try await feed.feed(into: builder) }
                _ = try await builder.finish()
            } catch {
                await builder.cancel()  // a cancelled feed or turn: the builder removes its files
                if remote { await self.forgetLook(id) }
            }
        }
        watch(build, id)
        return nil
    }

    /// Opens the cache store of `source` and makes it `id`'s ready image, when it was built from this version.
    /// - Parameter copy: the copy from the shelf that wrote the store, when it ran in a job of its own:
    ///   nothing is opened unless `id` is still in its ``Phase/copying(_:)`` then.
    func reuse(_ id: String, _ source: SourceFile, _ store: String, copiedBy copy: Copy? = nil) async -> Bool {
        storesOpened += 1
        let reused = try? await threadPool.blocking { () throws(TileError) -> TiledImage? in
            CacheStoreRecord.isStore(store, builtFrom: source) ? try TiledImage.open(store: store) : nil
        }
        guard let pyramid = reused ?? nil else { return false }
        let storeID = await budget.register(image: pyramid, path: store)
        if let copy, !isCurrent(copy, id) || Task.isCancelled {  // put away meanwhile: not its phase to set
            await budget.unregister(storeID)
            return false
        }
        apply(.opened(Image(id: id, pyramid: pyramid, fingerprint: source.fingerprint), storeID: storeID), to: id)
        await closeLeastRecentlyUsed()
        return true
    }

    /// Follows `build`'s progress (waking the requests it satisfies) and settles `id`'s state when it ends.
    func watch(_ build: Build, _ id: String) {
        let progress = build.builder.progress
        let held = Confined(build)
        build.watcher = tasks.spawn {
            for await _ in progress { await self.progressed(held) }
            await self.ended(held, id)
        }
    }

    private func progressed(_ held: Confined<Build>) async {
        let build = held.value
        if build.image == nil { build.image = await build.builder.image }
        guard let image = build.image else { return }
        for (key, waiter) in build.waiters where waiter.condition(image) {
            build.waiters[key] = nil
            waiter.resume(true)
        }
    }

    private func ended(_ held: Confined<Build>, _ id: String) async {
        let build = held.value
        build.hasEnded = true
        // Released last, after the record of the source is written: a server waiting for it reuses the store.
        defer { build.lock = nil }
        // The complete pyramid (a turned image's TIFF is another image than the one shown while it was built).
        build.image = await build.builder.image ?? build.image
        let state = await build.builder.currentState
        let storeID = await build.builder.budgetStoreID
        let outcome: String
        switch state {
        case .complete: outcome = "completed"
        case .failed: outcome = "failed"
        default: outcome = "cancelled"
        }
        ServerMetrics.recordBuild(outcome: outcome, duration: .now - build.started)
        defer {
            for waiter in build.waiters.values { waiter.resume(true) }
            build.waiters = [:]
        }
        var completed: DiskCacheBudget.StoreID?
        if case .complete = state { completed = storeID }
        guard await !isReplaced(build, id, completed: completed) else { return }
        switch state {
        case .complete:
            guard let pyramid = build.image else { return }
            var fingerprint = build.fingerprint
            if build.isUpload, let store = pyramid.storePath {
                // An upload: its version is its published manifest's.
                let manifest = "\(store)/\(TiledImage.storeManifestName)"
                fingerprint = try? await threadPool.blocking { () throws(TileError) in try SourceFingerprint.read(path: manifest) }
            } else if let fingerprint {
                let store = "\(cache)/\(Self.cacheName(id)).tiles"
                _ = try? await threadPool.blocking { () throws(TileError) in CacheStoreRecord.write(fingerprint, forStore: store) }
            }
            guard await !isReplaced(build, id, completed: completed) else { return }  // while the record was written
            apply(.opened(Image(id: id, pyramid: pyramid, fingerprint: fingerprint), storeID: build.isUpload ? nil : storeID), to: id)
            if !build.isUpload { publishOnShelf(id, pyramid, masterVersion: fingerprint?.description) }
            await closeLeastRecentlyUsed()
        case .failed(let error):
            // An upload that failed left nothing (the builder removed its files): forgotten.
            if build.isUpload {
                apply(.forgotten, to: id)
                logger.error("upload failed", metadata: ["id": "\(id)", "error": "\(error.message)", "code": "\(error.code)"])
            } else {
                // Not fitting the budget now says nothing of the source: tried again after the
                // first delay, not a longer one.
                setFailed(id, error, build.fingerprint, attempts: error.code == .overBudget ? 1 : build.attempts + 1)
            }
        case .cancelled, .waitingForHeader, .decoding:
            apply(.forgotten, to: id)  // a cancelled build (a shutdown, a newer version) is forgotten, not failed
        }
        if case .complete = state {} else if let reservation = build.reservation { await budget.unregister(reservation) }
    }

    /// Whether `build` is no longer `id`'s (a newer version of the source, a purge replaced it): not its
    /// state to set. A store it `completed` all the same leaves the budget (the next build replaces its files).
    private func isReplaced(_ build: Build, _ id: String, completed storeID: DiskCacheBudget.StoreID?) async -> Bool {
        if case .building(let current) = phase(of: id), current === build { return false }
        if !build.isUpload, let storeID { await budget.unregister(storeID) }
        return true
    }

    /// The image of a build once its header is read, or the build's outcome; `notReady` past
    /// ``headerWaitLimit``.
    func header(of build: Build, _ id: String) async throws(LookupError) -> Image {
        // An upload's header comes when its client sends it: said at once, not waited for.
        if build.image == nil, !build.isUpload { _ = await waitFor(build, until: .now + headerWaitLimit) { _ in true } }
        // Ended, its outcome being settled (its watcher reads the builder's state): that outcome, not "building".
        if build.hasEnded, case .building(let current) = phase(of: id), current === build { await build.watcher?.value }
        if let pyramid = build.image, case .building(let current) = phase(of: id), current === build {
            return Image(id: id, pyramid: pyramid, fingerprint: nil)
        }
        switch phase(of: id) {
        case .ready(let image, _): return image
        case .failed(let error, _, _, _): throw .failed(error)
        case .building:
            let waiting = build.isUpload ? "\(id) is being uploaded; its header has not arrived yet" : "the image is waiting for its turn to be built"
            throw .failed(TileError(.notReady, waiting))
        case .refused: throw .forbidden
        case .copying, .closed, .unknown: throw .failed(TileError(.cancelled, "the build of \(id) was stopped"))
        }
    }

    /// Waits until the image of `id`'s build satisfies `condition`, the build ends, or `deadline`
    /// passes: a continuation resumed by the build's progress, never a poll.
    /// - Returns: false when the deadline passed first; true at once when `id` is not being built.
    public func waitUntil(
        _ id: String, deadline: ContinuousClock.Instant, _ condition: @escaping @Sendable (TiledImage) -> Bool
    ) async -> Bool {
        guard case .building(let build) = phase(of: id) else { return true }
        return await waitFor(build, until: deadline, condition)
    }

    private func waitFor(
        _ build: Build, until deadline: ContinuousClock.Instant, _ condition: @escaping @Sendable (TiledImage) -> Bool
    ) async -> Bool {
        if let image = build.image, condition(image) { return true }
        guard !build.hasEnded else { return true }
        nextWaiter += 1
        let key = nextWaiter
        // Weakly: a pending deadline must not keep an ended build (and its pyramid, which the budget
        // evicts only once released) alive.
        let held = WeakBuild(build)
        // A cancelled wait ends as one past its deadline (its waiter is registered before the actor
        // runs the expiry, even when the task was cancelled before it began).
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let expiry = tasks.spawn {
                    guard (try? await Task.sleep(until: deadline)) != nil else { return }  // the wait ended first
                    await self.expire(held, key)
                }
                build.waiters[key] = Waiter(condition: condition, continuation: continuation, deadline: expiry)
            }
        } onCancel: { [tasks] in
            _ = tasks.spawn { await self.expire(held, key) }
        }
    }

    private func expire(_ held: WeakBuild, _ key: Int) {
        held.build?.waiters.removeValue(forKey: key)?.continuation.resume(returning: false)
    }

    /// A value confined to the catalog's actor, carried by one of its tasks back to the actor.
    ///
    /// @unchecked Sendable: `value` is only read on the catalog's actor; the task that carries it
    /// never touches it.
    struct Confined<Value>: @unchecked Sendable {
        let value: Value
        init(_ value: Value) { self.value = value }
    }

    /// A build held weakly by a waiter's deadline task.
    ///
    /// @unchecked Sendable: `build` is only read on the catalog's actor (``expire(_:_:)``), where the
    /// build is confined; the task that carries the box never touches it.
    final class WeakBuild: @unchecked Sendable {
        weak var build: Build?
        init(_ build: Build) { self.build = build }
    }
}
