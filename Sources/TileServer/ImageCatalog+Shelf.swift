import Foundation
import Logging
import TileActors
import TileCore

extension ImageCatalog {
    /// How long a look at the shelf (``StoreShelf/find(_:)``) may take before the image is built here.
    static let shelfLookLimit: Duration = .seconds(10)
    /// How long after a failed request the shelf is not asked again (each new image built here at once),
    /// by default; also how often a failing shelf is looked at again.
    static let shelfDownInterval: Duration = .seconds(30)
    /// The slowest a copy may go on average (bytes a second), after its first ``shelfLookLimit`` (or bucket timeout): a
    /// bucket that sends a store slower is given up on, and the image built here.
    static let slowestCopy = 4 << 20

    /// Remembers how the shelf's last request went: a failure of the shelf's own (``isShelfFailure(_:of:)``)
    /// becomes ``shelfProblem``, which `/ready` says, and rests the shelf for ``shelfRest``; a success
    /// clears them. Nothing is noted of a request cut short by a shutdown.
    func noteShelf<T>(_ outcome: Result<T, any Error>) {
        switch outcome {
        case .success: (shelfProblem, shelfDownUntil) = (nil, nil)
        case .failure(let error):
            guard !Task.isCancelled, !isShutDown, Self.isShelfFailure(error, of: shelf) else { return }
            (shelfProblem, shelfDownUntil) = ("\(error)", .now + shelfRest)
        }
    }

    /// Whether `error` says the shelf cannot be used now (unreachable, refusing, too slow: a time up of
    /// ``within(_:_:_:)``), as opposed to something of one store (a manifest naming a TIFF replaced
    /// since) or of this server's own files, or a cancellation.
    static func isShelfFailure(_ error: any Error, of shelf: (any StoreShelf)?) -> Bool {
        if error is CancellationError { return false }
        if let error = error as? TileError { return error.code == .notReady }
        return shelf?.isUnavailable(error) ?? true
    }

    /// Looks at the shelf when the catalog starts, then, while it fails or stores wait to be published,
    /// again each ``shelfRest``: a bucket that comes back is known without waiting for a request, and
    /// given the stores it missed, one at a time. A job of the catalog's own, until it shuts down.
    func watchShelf(_ shelf: any StoreShelf) async {
        var looked = false
        while !isShutDown {
            if ContinuousClock.now >= shelfNextLook, shelfProblem != nil || !unpublished.isEmpty || !looked {
                looked = true
                let lookWait = shelfLookWait
                let outcome = await Result { try await Self.within(lookWait, "a look at the shelf") { try await shelf.check() } }
                noteShelf(outcome)
                if case .success = outcome { await republish(on: shelf) }
                shelfNextLook = .now + shelfRest
            }
            guard (try? await Task.sleep(for: min(shelfRest, .seconds(1)))) != nil else { return }
        }
    }

    /// Publishes, one at a time, the stores whose publishing the shelf failed, of the images still
    /// ready or closed with them (a closed one checked out of the budget meanwhile: not evicted); stops
    /// at the shelf's next failure (its watch tries again after its rest).
    private func republish(on shelf: any StoreShelf) async {
        while let id = unpublished.first, !isShutDown, shelfProblem == nil {
            unpublished.remove(id)
            switch phase(of: id) {
            case .ready(let image, _?):
                guard let path = image.pyramid.storePath else { continue }
                await publish(id, at: path, on: shelf, masterVersion: image.version)
                withExtendedLifetime(image) {}
            case .closed(let storeID, let fingerprint):
                guard let path = await budget.checkOut(storeID) else { continue }
                await publish(id, at: path, on: shelf, masterVersion: fingerprint?.description)
                await budget.close(storeID)
            default: continue  // put away, rebuilt, purged: its next build publishes
            }
        }
    }

    /// How long the shelves rest after a failure, from now on (for tests; ``shelfDownInterval`` by
    /// default): their watches look again at once, and then each `rest`.
    package func setShelfRest(_ rest: Duration) {
        (shelfRest, shelfNextLook) = (rest, .now)
        if shelfDownUntil != nil { shelfDownUntil = .now + rest }
        mastersDown?.until = .now
    }

    /// How long a request to a bucket (the store shelf's or the master shelf's) may take before the
    /// catalog gives up on it, from now on: a look for a store or a master, a listing, the opening of a
    /// store where it lies, a tile's read from it, and the first stretch of a copy (then a copy must
    /// average ``slowestCopy`` bytes a second). ``shelfLookLimit`` (10 s) by default; a bucket far away
    /// or slow to list may need more. Past it, a lookup builds the image here (a master's: 503 with
    /// `Retry-After`) and a tile's read waits for the copy. Taken as at most ``TileServer/longestTimeout``.
    public func setBucketTimeout(_ timeout: Duration) {
        let timeout = min(max(.zero, timeout), TileServer.longestTimeout)
        (shelfLookWait, shelfReadLimit, shelfCopyGrace) = (timeout, timeout, timeout)
    }

    /// How long a look at either shelf (a store's or a master's lookup, a listing, the watches' checks)
    /// may take before it counts as failed, from now on (for tests: ``shelfLookLimit`` by default).
    package func setShelfLookLimit(_ limit: Duration) { shelfLookWait = limit }

    /// How long a copy from the shelf may take before its bytes count, from now on (for tests:
    /// ``shelfLookLimit`` by default), then 1 s per ``slowestCopy`` bytes.
    package func setShelfCopyGrace(_ grace: Duration) { shelfCopyGrace = grace }

    /// How long a store's opening where it lies may take before it is copied within the lookup, and
    /// a tile's read from it before the request waits for the copy instead, for the stores opened from
    /// now on (for tests: ``shelfLookLimit`` by default).
    package func setShelfReadLimit(_ limit: Duration) { shelfReadLimit = limit }

    /// Copies `id`'s store from ``shelf`` into the cache at `store`, when the shelf holds one built
    /// from this version of `source` (its size, then its FNV-1a fingerprint compared: the master read
    /// once, and checked to be the version `source` names after), and makes it `id`'s ready image:
    /// what another server built is not built again. Called with the cache's lock on `id` held, once the
    /// build it stands for has been admitted (``maximumBuildsPerClient`` counts it for `client`). The
    /// copy's room is reserved in the budget first. A look takes at most ``shelfLookLimit`` (or ``setBucketTimeout(_:)``'s), a copy as
    /// long as ``slowestCopy`` allows; a shelf that failed is not asked for ``shelfDownInterval``.
    ///
    /// When the shelf opens the store where it lies (``TileActors/StoreShelf/open(_:)``), the copy goes
    /// on in a job of its own, `id` in ``Phase/copying(_:)`` meanwhile (its stored tiles answered from
    /// the shelf, ``shelvedImage(_:)``); the build, if the copy fails, starts from there with `lock`.
    /// - Returns: ``ShelfCopy/absent`` when the shelf has no such store, cannot be asked (its failure
    ///   logged), or the copy fails or is cancelled: the caller builds the image (unless the catalog is
    ///   shutting down).
    func copyFromShelf(_ id: String, _ source: SourceFile, to store: String, for client: String?, lock: BuildLock, attempts: Int) async
        -> ShelfCopy
    {
        guard let shelf else { return .absent }
        if let resting = shelfDownUntil, ContinuousClock.now < resting {  // its watch looks again
            ServerMetrics.recordShelf("copy", outcome: "skipped")
            return .absent
        }
        countCopy(for: client, +1)
        var counted = true
        defer { if counted { countCopy(for: client, -1) } }
        let lookWait = shelfLookWait
        let outcome = await Result { try await Self.within(lookWait, "a look at the shelf") { try await shelf.find(id) } }
        noteShelf(outcome)
        let shelved: ShelvedStore
        do {
            guard let found = try outcome.get() else {
                ServerMetrics.recordShelf("copy", outcome: "absent")
                return .absent
            }
            shelved = found
        } catch {
            guard !Task.isCancelled, !isShutDown else { return .absent }
            ServerMetrics.recordShelf("copy", outcome: "failed")
            logger.warning("the store shelf cannot be asked: building here", metadata: ["id": "\(id)", "shelf": "\(shelf)", "error": "\(error)"])
            return .absent
        }
        // Opened where it lies while the master is hashed: the two waits overlap. Left (cancelled, then
        // waited for) when the store is not this master's or does not fit.
        async let opening = Self.open(shelved, on: shelf, within: shelfReadLimit)
        guard await isShelved(shelved, builtFrom: source) else {
            ServerMetrics.recordShelf("copy", outcome: "other_version")
            return .absent
        }
        guard let reservation = await budget.reserve(byteCount: shelved.tiffByteCount, path: store) else {
            ServerMetrics.recordShelf("copy", outcome: "over_budget")
            return .absent
        }
        let copy = Copy(shelved: shelved, source: source, store: store, reservation: reservation, client: client)
        let opened = await opening
        guard !isShutDown, !Task.isCancelled else {
            await budget.unregister(reservation)
            return .absent
        }
        guard let opened else { return await copied(copy, id, from: shelf) ? .copied : .absent }
        // Served where it lies until copied: the copy and what follows it in a job of the catalog's own.
        counted = false
        copy.served = ShelvedImage(
            id: id, pyramid: opened, fingerprint: source.fingerprint, tiffVersion: shelved.tiffVersion, readLimit: shelfReadLimit)
        apply(.copying(copy), to: id)
        let held = Confined(copy)
        copy.job = tasks.spawn { await self.runCopy(held, id, from: shelf, lock: lock, attempts: attempts) }
        if copy.job?.wasAbandoned == true {  // never run: the catalog is shutting down
            countCopy(for: client, -1)
            let stopped = TileError(.cancelled, "the server is shutting down")
            if isCurrent(copy, id) { apply(.failed(stopped, source.fingerprint, attempts: attempts, now: .now), to: id) }
            await budget.unregister(reservation)
        }
        return .copying
    }

    /// Adds `change` to the copies in progress, and to `client`'s.
    func countCopy(for client: String?, _ change: Int) {
        shelfCopyCount += change
        guard let client else { return }
        shelfCopies[client, default: 0] += change
        if shelfCopies[client] == 0 { shelfCopies[client] = nil }
    }

    /// Copies `copy`'s store into the cache and makes it `id`'s ready image (unless `id` has left
    /// ``Phase/copying(_:)`` of this copy meanwhile); the copy's reservation leaves the budget.
    /// - Returns: whether `id` is ready from the copy.
    func copied(_ copy: Copy, _ id: String, from shelf: any StoreShelf) async -> Bool {
        let (shelved, store) = (copy.shelved, copy.store)
        let limit = shelfCopyGrace + .seconds(shelved.tiffByteCount / Self.slowestCopy)
        let copied = await Result {
            try await Self.within(limit, "the copy of \(shelved.tiffByteCount) bytes") { try await shelf.copy(shelved, to: store) }
        }
        if case .failure(let error) = copied {
            await budget.unregister(copy.reservation)
            guard !Task.isCancelled, !isShutDown else { return false }  // not the shelf's failure
            noteShelf(copied)
            ServerMetrics.recordShelf("copy", outcome: "failed")
            logger.warning("a store of the shelf could not be copied: building here", metadata: ["id": "\(id)", "error": "\(error)"])
            return false
        }
        guard copy.served == nil || isCurrent(copy, id) else {  // put away meanwhile: not its phase to set
            await budget.unregister(copy.reservation)
            ServerMetrics.recordShelf("copy", outcome: "stopped")
            return false
        }
        let fingerprint = copy.source.fingerprint
        await threadPool.blocking { CacheStoreRecord.write(fingerprint, forStore: store) }
        // Registered before the reservation goes: the copy's bytes are counted all along.
        let reused = await reuse(id, copy.source, store, copiedBy: copy.served == nil ? nil : copy)
        await budget.unregister(copy.reservation)
        let stopped = copy.served != nil && !isCurrent(copy, id) && !reused
        ServerMetrics.recordShelf("copy", outcome: reused ? "copied" : stopped ? "stopped" : "failed")
        return reused
    }

    /// `shelved` opened where it lies (``TileActors/StoreShelf/open(_:)``, at most `limit`); nil when
    /// the shelf does not open stores so, or the opening failed.
    private nonisolated static func open(_ shelved: ShelvedStore, on shelf: any StoreShelf, within limit: Duration) async
        -> (any ShelvedPyramid)?
    {
        (try? await within(limit, "the opening of a shelved store") { try await shelf.open(shelved) }) ?? nil
    }

    /// Whether `shelved` was built from the master `source` names: its byte count, then the FNV-1a of
    /// its bytes (read once, on the thread pool), and the file still the version `source` names after
    /// the read (a master replaced meanwhile is not taken for the one looked up).
    private func isShelved(_ shelved: ShelvedStore, builtFrom source: SourceFile) async -> Bool {
        let byteCount = source.fingerprint.identity.byteCount
        guard shelved.sourceByteCount.map({ $0 == byteCount }) ?? true else { return false }
        // A master of the master shelf: by the version its builder named (its bytes are not here to hash).
        if source.remote != nil { return shelved.masterVersion == source.fingerprint.description }
        let (path, known) = (source.path, source.fingerprint)
        let read = try? await threadPool.blocking { () throws(TileError) in
            let local = try TiledImage.sourceFingerprint(ofFile: path)
            return (local, try SourceFingerprint.read(path: path, known: known) == known)
        }
        guard let (local, unchanged) = read else { return false }
        return unchanged && local.byteCount == byteCount && local.fingerprint == shelved.sourceFingerprint
    }

    /// Publishes `pyramid`'s store (just built for `id` from the master of version `masterVersion`) on
    /// ``shelf``, in a task of the catalog's own:
    /// the pyramid kept open until it is done (the budget evicts no store in use).
    func publishOnShelf(_ id: String, _ pyramid: TiledImage, masterVersion: String?) {
        guard let shelf, let path = pyramid.storePath else { return }
        _ = tasks.spawn {
            await self.publish(id, at: path, on: shelf, masterVersion: masterVersion)
            withExtendedLifetime(pyramid) {}
        }
    }

    /// Publishes the store at `path` as `id`'s on `shelf`. A failure is logged, and nothing half
    /// published is seen by others (the shelf's manifest goes last); when it is the shelf's
    /// (``isShelfFailure(_:of:)``), the store waits in ``unpublished`` for the shelf to answer again.
    private func publish(_ id: String, at path: String, on shelf: any StoreShelf, masterVersion: String?) async {
        let outcome = await Result { try await shelf.publish(id, store: path, masterVersion: masterVersion) }
        if case .failure = outcome, Task.isCancelled || isShutDown { return }  // a shutdown: not the shelf's failure
        noteShelf(outcome)
        switch outcome {
        case .success:
            unpublished.remove(id)
            ServerMetrics.recordShelf("publish", outcome: "published")
        case .failure(let error):
            ServerMetrics.recordShelf("publish", outcome: "failed")
            if Self.isShelfFailure(error, of: shelf) { unpublished.insert(id) }
            logger.warning("a store could not be published on the shelf", metadata: ["id": "\(id)", "shelf": "\(shelf)", "error": "\(error)"])
        }
    }

    /// The value of `body`, or a failure naming `what` once `limit` has passed (`body` is cancelled then).
    package static func within<T: Sendable>(_ limit: Duration, _ what: String, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await withThrowingTaskGroup(of: TimedOutcome<T>.self) { group in
            group.addTask { .done(try await body()) }
            group.addTask {
                try await Task.sleep(for: limit)
                return .late
            }
            defer { group.cancelAll() }
            guard case .done(let value) = try await group.next() else {
                throw TileError(.notReady, "\(what) took longer than \(limit.components.seconds) s: given up on")
            }
            return value
        }
    }
}

/// A body's value, or its time up (``ImageCatalog/within(_:_:_:)``).
enum TimedOutcome<T: Sendable>: Sendable {
    case done(T)
    case late
}

extension Result where Failure == any Error {
    /// The outcome of `body`, an async throwing call.
    init(catching body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}
