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
    /// The slowest a copy may go on average (bytes a second), after its first ``shelfLookLimit``: a
    /// bucket that sends a store slower is given up on, and the image built here.
    static let slowestCopy = 4 << 20

    /// Remembers how the shelf's last request went (``shelfProblem``, which `/ready` says; after a
    /// failure the shelf rests for ``shelfRest``); once it answers again, the stores whose publishing
    /// failed are published.
    func noteShelf<T>(_ outcome: Result<T, any Error>) {
        switch outcome {
        case .success:
            (shelfProblem, shelfDownUntil) = (nil, nil)
            republish()
        case .failure(let error):
            (shelfProblem, shelfDownUntil) = ("\(error)", .now + shelfRest)
        }
    }

    /// Looks at the shelf when the catalog starts, then again after each ``shelfRest`` while it is
    /// failing or stores wait to be published: a bucket that comes back is known (and given those
    /// stores) without waiting for a request. A job of the catalog's own, until it shuts down.
    func watchShelf(_ shelf: any StoreShelf) async {
        repeat {
            if shelfProblem != nil || !unpublished.isEmpty || !shelfLooked {
                shelfLooked = true
                noteShelf(await Result { try await Self.within(Self.shelfLookLimit, "a look at the shelf") { try await shelf.check() } })
            }
            guard (try? await Task.sleep(for: shelfRest)) != nil else { return }
        } while !isShutDown

    }

    /// Publishes again the stores whose publishing failed, of the images still ready with them.
    private func republish() {
        let waiting = unpublished
        unpublished = []
        for id in waiting {
            guard case .ready(let image, _?) = phase(of: id) else { continue }
            publishOnShelf(id, image.pyramid)
        }
    }

    /// Marks `id`'s store published (or not, to be published once the shelf answers again).
    private func notePublished(_ id: String, _ done: Bool) {
        if done { unpublished.remove(id) } else { unpublished.insert(id) }
    }

    /// Copies `id`'s store from ``shelf`` into the cache at `store`, when the shelf holds one built
    /// from this version of `source` (its size, then its FNV-1a fingerprint compared: the master read
    /// once, and checked to be the version `source` names after), and makes it `id`'s ready image:
    /// what another server built is not built again. Called with the cache's lock on `id` held, once the
    /// build it stands for has been admitted (``maximumBuildsPerClient`` counts it for `client`). The
    /// copy's room is reserved in the budget first. A look takes at most ``shelfLookLimit``, a copy as
    /// long as ``slowestCopy`` allows; a shelf that failed is not asked for ``shelfDownInterval``.
    /// - Returns: false when the shelf has no such store, cannot be asked (its failure logged), or
    ///   the copy fails or is cancelled: the caller builds the image (unless the catalog is shutting down).
    func copyFromShelf(_ id: String, _ source: SourceFile, to store: String, for client: String?) async -> Bool {
        guard let shelf else { return false }
        if let resting = shelfDownUntil, ContinuousClock.now < resting {  // its watch looks again
            ServerMetrics.recordShelf("copy", outcome: "skipped")
            return false
        }
        if let client { shelfCopies[client, default: 0] += 1 }
        defer {
            if let client {
                shelfCopies[client, default: 1] -= 1
                if shelfCopies[client] == 0 { shelfCopies[client] = nil }
            }
        }
        let outcome = await Result { try await Self.within(Self.shelfLookLimit, "a look at the shelf") { try await shelf.find(id) } }
        noteShelf(outcome)
        let shelved: ShelvedStore
        do {
            guard let found = try outcome.get() else {
                ServerMetrics.recordShelf("copy", outcome: "absent")
                return false
            }
            shelved = found
        } catch {
            ServerMetrics.recordShelf("copy", outcome: "failed")
            logger.warning("the store shelf cannot be asked: building here", metadata: ["id": "\(id)", "shelf": "\(shelf)", "error": "\(error)"])
            return false
        }
        guard await isShelved(shelved, builtFrom: source) else {
            ServerMetrics.recordShelf("copy", outcome: "other_version")
            return false
        }
        guard let reservation = await budget.reserve(byteCount: shelved.tiffByteCount, path: store) else {
            ServerMetrics.recordShelf("copy", outcome: "over_budget")
            return false
        }
        let limit = Self.shelfLookLimit + .seconds(shelved.tiffByteCount / Self.slowestCopy)
        let copied = await Result {
            try await Self.within(limit, "the copy of \(shelved.tiffByteCount) bytes") { try await shelf.copy(shelved, to: store) }
        }
        await budget.unregister(reservation)
        if case .failure(let error) = copied {
            guard !Task.isCancelled, !isShutDown else { return false }  // not the shelf's failure
            noteShelf(copied)
            ServerMetrics.recordShelf("copy", outcome: "failed")
            logger.warning("a store of the shelf could not be copied: building here", metadata: ["id": "\(id)", "error": "\(error)"])
            return false
        }
        let fingerprint = source.fingerprint
        await threadPool.blocking { CacheStoreRecord.write(fingerprint, forStore: store) }
        let reused = await reuse(id, source, store)
        ServerMetrics.recordShelf("copy", outcome: reused ? "copied" : "failed")
        return reused
    }

    /// Whether `shelved` was built from the master `source` names: its byte count, then the FNV-1a of
    /// its bytes (read once, on the thread pool), and the file still the version `source` names after
    /// the read (a master replaced meanwhile is not taken for the one looked up).
    private func isShelved(_ shelved: ShelvedStore, builtFrom source: SourceFile) async -> Bool {
        let byteCount = source.fingerprint.identity.byteCount
        guard shelved.sourceByteCount.map({ $0 == byteCount }) ?? true else { return false }
        let (path, known) = (source.path, source.fingerprint)
        let read = try? await threadPool.blocking { () throws(TileError) in
            let local = try TiledImage.sourceFingerprint(ofFile: path)
            return (local, try SourceFingerprint.read(path: path, known: known) == known)
        }
        guard let (local, unchanged) = read else { return false }
        return unchanged && local.byteCount == byteCount && local.fingerprint == shelved.sourceFingerprint
    }

    /// Publishes `pyramid`'s store (just built for `id`) on ``shelf``, in a task of the catalog's own:
    /// the pyramid kept open until it is done (the budget evicts no store in use). A failure is logged;
    /// nothing half published is seen by others (the shelf's manifest goes last), and the store is
    /// published again once the shelf answers (``watchShelf(_:)``).
    func publishOnShelf(_ id: String, _ pyramid: TiledImage) {
        guard let shelf, let path = pyramid.storePath else { return }
        let logger = self.logger
        _ = tasks.spawn {
            let outcome = await Result { try await shelf.publish(id, store: path) }
            if case .failure = outcome, Task.isCancelled { return }  // a shutdown: not the shelf's failure
            await self.notePublished(id, (try? outcome.get()) != nil)
            await self.noteShelf(outcome)
            do {
                try outcome.get()
                ServerMetrics.recordShelf("publish", outcome: "published")
            } catch {
                ServerMetrics.recordShelf("publish", outcome: "failed")
                logger.warning("a store could not be published on the shelf", metadata: ["id": "\(id)", "shelf": "\(shelf)", "error": "\(error)"])
            }
            withExtendedLifetime(pyramid) {}
        }
    }

    /// The value of `body`, or a failure naming `what` once `limit` has passed (`body` is cancelled then).
    static func within<T: Sendable>(_ limit: Duration, _ what: String, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await withThrowingTaskGroup(of: TimedOutcome<T>.self) { group in
            group.addTask { .done(try await body()) }
            group.addTask {
                try await Task.sleep(for: limit)
                return .late
            }
            defer { group.cancelAll() }
            guard case .done(let value) = try await group.next() else {
                throw TileError(.io, "\(what) took longer than \(limit.components.seconds) s: given up on")
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
