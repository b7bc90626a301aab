import Foundation
public import Logging
public import NIOPosix
public import TileCore

/// Keeps the disk used by tile stores under a budget, and written data from piling up in memory.
///
/// Every store registers its bytes (``ImageBuilder`` does it for the builds it runs). Two thresholds:
/// - dirty bytes: past ``dirtyByteThreshold`` of data written since the last flush, the written tile
///   files are flushed (`fdatasync`, then `posix_fadvise(DONTNEED)` on complete rows), and writers that
///   report more bytes wait until that flush has actually finished;
/// - total bytes: past ``totalByteBudget``, the least recently used complete persistent stores that
///   nobody has open (neither through ``open(_:)`` nor by holding the image its build returned) are
///   removed from disk, each with an ``Event/evicted(path:byteCount:)``.
///
/// Syncing and deleting run on threads of their own, never on the actor or the cooperative pool: a
/// store of gigabytes takes the kernel a while to delete. Failures are reported as
/// ``Event/failed(operation:path:error:)`` and logged (swift-log; the library never configures a
/// logging backend).
public actor DiskCacheBudget {
    /// What the budget did.
    public enum Event: Sendable, Hashable {
        /// Written data of `storeCount` stores was synced and dropped from the page cache.
        case flushed(byteCount: Int, storeCount: Int)
        /// A persistent store was removed from disk to stay under the total budget.
        case evicted(path: String, byteCount: Int)
        /// A flush (`"flush"`) or an eviction (`"evict"`) failed; the store stays registered (a flush)
        /// or may be left on disk in part (an eviction).
        case failed(operation: String, path: String?, error: TileError)
    }

    /// A registered store.
    public struct StoreID: Hashable, Sendable {
        fileprivate let value: Int
    }

    private struct Entry {
        weak var image: TiledImage?
        var path: String?
        var byteCount: Int
        /// Temporary files of a build in progress (a coefficient file): counted, never flushed.
        var scratchByteCount: Int
        var flushedByteCount: Int
        var isComplete: Bool
        var openCount: Int
        /// A reservation (``reserve(byteCount:path:)``): counted, never evicted.
        var isPinned = false
        /// Bytes a build in progress is counted for at the least (``register(image:path:reserving:)``).
        var reservedByteCount = 0

        /// What the entry counts against the budget: its bytes, and while incomplete at least its
        /// reservation.
        var countedBytes: Int {
            let written = byteCount + scratchByteCount
            return isComplete ? written : max(written, reservedByteCount)
        }
    }

    /// Data written and not yet flushed that triggers a flush.
    public let dirtyByteThreshold: Int
    /// Bytes of all registered stores past which unopened complete persistent stores are evicted.
    public let totalByteBudget: Int
    /// What the budget does, as it does it. One consumer.
    public nonisolated let events: AsyncStream<Event>
    private let eventsContinuation: AsyncStream<Event>.Continuation
    private var entries: [Int: Entry] = [:]
    private var nextID = 0
    /// When each store was last registered, opened or kept: the least recently used go first.
    private var uses = UseOrder<Int>()
    /// While a flush runs: the callers waiting for it to end (nil when none runs). The flush runs in
    /// the task of the caller that started it; the others wait here.
    private var flushWaiters: [CheckedContinuation<Void, Never>]?
    /// Evicted stores whose files are being deleted, by path (``waitForRemoval(at:)``): how many
    /// deletions run there, and who waits for them to end.
    private var removals: [String: (running: Int, waiters: [CheckedContinuation<Void, Never>])] = [:]
    private let logger: Logger
    /// Where deletions and file checks run.
    private let threadPool: NIOThreadPool

    /// Creates a budget.
    /// - Parameters:
    ///   - dirtyByteThreshold: default 256 MiB.
    ///   - totalByteBudget: default a quarter of the free space of `folder`'s file system when the
    ///     budget is created, at least 256 MiB (a budget larger than the disk cannot hold).
    ///   - folder: where the stores are written (a server's cache folder); nil: the ephemeral folder
    ///     (`$TMPDIR`, else `/tmp`).
    ///   - logger: where failures are logged (default label `TiledImageKit.DiskCacheBudget`).
    ///   - threadPool: where its blocking work (deleting evicted stores, checking files) runs (default
    ///     NIO's shared pool; a server passes its own).
    public init(
        dirtyByteThreshold: Int = 256 << 20, totalByteBudget: Int? = nil, folder: String? = nil,
        logger: Logger = Logger(label: "TiledImageKit.DiskCacheBudget"), threadPool: NIOThreadPool = .singleton
    ) {
        self.logger = logger
        self.threadPool = threadPool
        self.dirtyByteThreshold = max(1, dirtyByteThreshold)
        self.totalByteBudget = totalByteBudget ?? Self.defaultTotalBudget(folder: folder)
        (events, eventsContinuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .unbounded)
    }

    deinit { eventsContinuation.finish() }

    /// A quarter of the free space of `folder`'s file system (the ephemeral folder's when nil), at
    /// least 256 MiB.
    static func defaultTotalBudget(folder: String?) -> Int {
        let folder = folder ?? ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp"
        let free = (try? FileManager.default.attributesOfFileSystem(forPath: folder)[.systemFreeSize] as? Int) ?? nil
        return max(256 << 20, (free ?? 4 << 30) / 4)
    }

    /// Bytes of every registered store, with the temporary files of builds in progress (a progressive
    /// JPEG's coefficient file, while it exists) and, for builds in progress, at least what they reserved.
    public var totalBytes: Int {
        entries.values.reduce(0) { $0 + ($1.image == nil && $1.path == nil ? 0 : $1.countedBytes) }
    }

    /// Stores registered (being built, or built and not evicted or unregistered).
    public var storeCount: Int { entries.count }

    /// Bytes written since they were last flushed.
    public var dirtyBytes: Int { entries.values.reduce(0) { $0 + max(0, $1.byteCount - $1.flushedByteCount) } }

    /// Registers a store being built (or already built).
    /// - Parameters:
    ///   - image: its image; an ephemeral store is dropped from the accounts when its image is released.
    ///   - path: the folder of a persistent store, which eviction may remove once it is complete.
    public func register(image: TiledImage, path: String?) -> StoreID {
        let id = nextID
        nextID += 1
        uses.use(id)
        entries[id] = Entry(
            image: image, path: path, byteCount: image.bytesWritten, scratchByteCount: image.scratchByteCount,
            flushedByteCount: 0, isComplete: image.isComplete, openCount: 0)
        return StoreID(value: id)
    }

    /// The most bytes a new build's store may be given now: the budget less what builds in progress
    /// and reservations count (``committedBytes``). Complete stores count as room: unused ones are
    /// evicted to make it, open ones as soon as their owners close them (a server keeps a few open).
    public var availableByteCount: Int { max(0, totalByteBudget - committedBytes) }

    /// Bytes of builds in progress (at least their reservations) and of reservations: what no
    /// eviction can give back until they end.
    public var committedBytes: Int {
        entries.values.reduce(0) { $0 + ($1.isComplete || ($1.image == nil && $1.path == nil) ? 0 : $1.countedBytes) }
    }

    /// Registers a store about to be built, counted for at least `byteCount` bytes until it is
    /// complete (then for what it holds): unused complete stores are evicted first to make room.
    /// - Parameters:
    ///   - image: its image (see ``register(image:path:)``).
    ///   - path: the folder of a persistent store.
    ///   - byteCount: what it is expected to take (``TileCore/TiledImage/estimatedStoreByteCount``).
    /// - Returns: its account, or nil when it does not fit beside the builds in progress and the
    ///   reservations (``availableByteCount``): nothing is registered then.
    public func register(image: TiledImage, path: String?, reserving byteCount: Int) async -> StoreID? {
        await evictIfNeeded(downTo: totalByteBudget - max(0, byteCount))
        guard byteCount <= totalByteBudget - committedBytes else { return nil }  // compared so: no sum past Int.max
        let id = register(image: image, path: path)
        entries[id.value]?.reservedByteCount = byteCount
        return id
    }

    /// Reserves room for a store about to be written that must not be evicted (an upload): unused
    /// complete stores are evicted first to make room. The reservation counts `byteCount` bytes until
    /// it is unregistered.
    /// - Parameters:
    ///   - byteCount: what the store will take at most.
    ///   - path: where it is written.
    /// - Returns: its account, or nil when the budget cannot hold it even after evicting.
    public func reserve(byteCount: Int, path: String) async -> StoreID? {
        await evictIfNeeded(downTo: totalByteBudget - max(0, byteCount))
        guard byteCount <= totalByteBudget - totalBytes else { return nil }  // compared so: no sum past Int.max
        let id = nextID
        nextID += 1
        uses.use(id)
        entries[id] = Entry(
            image: nil, path: path, byteCount: byteCount, scratchByteCount: 0, flushedByteCount: byteCount, isComplete: false,
            openCount: 0, isPinned: true)
        return StoreID(value: id)
    }

    /// Reports the bytes a store has written so far. Waits while a flush runs, and when the written
    /// data passes the dirty threshold, flushes and waits for that flush to finish.
    /// - Returns: false when the store is still being built, has written past its own reservation, and
    ///   the builds in progress and the reservations count more than the budget: the build is to stop
    ///   (its writes go past what the disk was given; a build within its reservation never is).
    @discardableResult
    public func didWrite(_ id: StoreID) async -> Bool {
        await waitForFlush()
        guard var entry = entries[id.value], let image = entry.image else { return true }
        entry.byteCount = image.bytesWritten
        entry.scratchByteCount = image.scratchByteCount
        entry.isComplete = image.isComplete
        entries[id.value] = entry
        if dirtyBytes > dirtyByteThreshold { await flush() }
        await evictIfNeeded(downTo: totalByteBudget)
        return entry.isComplete || entry.byteCount + entry.scratchByteCount <= entry.reservedByteCount
            || committedBytes <= totalByteBudget
    }

    /// Removes a store from the accounts (a failed or cancelled build; its files are gone).
    public func unregister(_ id: StoreID) { entries[id.value] = nil }

    /// Forgets the complete stores registered at `path` when nothing is there any more: deleted by
    /// hand, or by another process. Their bytes leave ``totalBytes`` (a store still open somewhere
    /// frees its blocks when it is closed). A store at `path` again (rebuilt, published anew) is kept.
    /// - Returns: the bytes forgotten.
    @discardableResult
    public func forgetIfRemoved(path: String) async -> Int {
        // The stores there now: one registered while the file system is asked (published anew) stays.
        let there = entries.filter { $0.value.path == path && $0.value.isComplete }.keys
        guard !there.isEmpty else { return 0 }
        let isGone = await threadPool.blocking { !FileManager.default.fileExists(atPath: path) }
        guard isGone else { return 0 }
        var forgotten = 0
        for id in there {
            forgotten += entries.removeValue(forKey: id)?.byteCount ?? 0
        }
        if forgotten > 0 {
            logger.notice("a store was removed from outside", metadata: ["path": .string(path), "bytes": .stringConvertible(forgotten)])
        }
        return forgotten
    }

    /// Evicts the least recently used complete stores nobody has open until `byteCount` bytes are free
    /// beside the budget's room (as far as such stores go): the disk was found full before the budget
    /// (another program's files, a budget larger than the disk).
    public func makeRoom(byteCount: Int) async {
        // `byteCount` fewer than now, or than the budget when now is past it (a difference: a budget of
        // Int.max, as "none", plus the bytes overflowed, a trap).
        await evictIfNeeded(downTo: min(totalByteBudget, totalBytes) - max(0, byteCount))
    }

    /// Opens a registered persistent store, marking it in use: an open store is never evicted.
    /// - Throws: what `TiledImage.open(store:)` throws.
    public func open(_ id: StoreID) throws(TileError) -> TiledImage {
        guard var entry = entries[id.value], let path = entry.path else {
            throw TileError(.invalidStore, "the store is not registered with this budget (or was evicted)")
        }
        let image = try TiledImage.open(store: path)
        uses.use(id.value)
        entry.openCount += 1
        entries[id.value] = entry
        return image
    }

    /// Marks a registered persistent store in use, as ``open(_:)`` does, without opening it: for callers
    /// that open it themselves, off the actor (opening reads the disk). Close it with ``close(_:)``
    /// when done, also when the caller's own open fails.
    /// - Returns: the store's folder, or nil when it is no longer registered (evicted).
    public func checkOut(_ id: StoreID) -> String? {
        guard var entry = entries[id.value], let path = entry.path else { return nil }
        uses.use(id.value)
        entry.openCount += 1
        entries[id.value] = entry
        return path
    }

    /// Says a store opened with ``open(_:)`` is no longer used; evicts what the budget then allows.
    public func close(_ id: StoreID) async {
        guard var entry = entries[id.value] else { return }
        entry.openCount = max(0, entry.openCount - 1)
        entries[id.value] = entry
        await evictIfNeeded(downTo: totalByteBudget)
    }

    /// Whether a store is still registered (not evicted, not unregistered). An evicted store is
    /// unregistered before its files are gone: see ``waitForRemoval(at:)``.
    public func isRegistered(_ id: StoreID) -> Bool { entries[id.value] != nil }

    /// Returns once no eviction is deleting files at `path` (at once when none is). Call it before
    /// building a store again at the path of one that may have been evicted: the deletion, which runs
    /// after the store left the accounts, would otherwise remove the new store's files.
    public func waitForRemoval(at path: String) async {
        guard removals[path] != nil else { return }
        await withCheckedContinuation { continuation in
            if removals[path] != nil { removals[path]!.waiters.append(continuation) } else { continuation.resume() }
        }
    }

    /// Returns once no flush runs (at once when none does).
    private func waitForFlush() async {
        guard flushWaiters != nil else { return }
        await withCheckedContinuation { continuation in
            if flushWaiters != nil { flushWaiters!.append(continuation) } else { continuation.resume() }
        }
    }

    /// Flushes every store with data written since its last flush; concurrent callers share one flush.
    /// The syncs run on a thread of their own; a store whose sync fails is reported and logged, and
    /// stays dirty.
    public func flush() async {
        if flushWaiters != nil {
            await waitForFlush()
            return
        }
        let dirty = entries.compactMap { id, e -> (Int, TiledImage, Int)? in
            guard let image = e.image, e.byteCount > e.flushedByteCount else { return nil }
            return (id, image, e.byteCount)
        }
        guard !dirty.isEmpty else { return }
        let images = dirty.map { ($0.0, $0.1) }
        flushWaiters = []
        let failures = await threadPool.blocking { () -> [(Int, TileError)] in
            var failures: [(Int, TileError)] = []
            for (id, image) in images {
                do throws(TileError) { try image.flushWrittenData() } catch { failures.append((id, error)) }
            }
            return failures
        }
        defer {
            let waiters = flushWaiters ?? []
            flushWaiters = nil
            for waiter in waiters { waiter.resume() }
        }
        var bytes = 0
        var stores = 0
        for (id, image, written) in dirty where entries[id] != nil {
            if let failure = failures.first(where: { $0.0 == id })?.1 {
                report("flush", path: image.storePath, failure)
                continue
            }
            bytes += written - entries[id]!.flushedByteCount
            entries[id]!.flushedByteCount = written
            stores += 1
        }
        if stores > 0 { eventsContinuation.yield(.flushed(byteCount: bytes, storeCount: stores)) }
    }

    /// Evicts the least recently used complete stores nobody has open until ``totalBytes`` is at most
    /// `limit` (as far as such stores go).
    private func evictIfNeeded(downTo limit: Int) async {
        entries = entries.filter { $0.value.image != nil || $0.value.path != nil }
        // What left the accounts since (unregistered, forgotten); only when something did (this runs on every write report).
        if uses.count > entries.count { uses.removeAll { entries[$0] == nil } }
        // Stores found open in another process this round: kept, and not tried again in it.
        var openElsewhere: Set<Int> = []
        while totalBytes > limit {
            // In use: opened through the budget, or its image (from the build) still alive somewhere.
            let candidates = entries.filter {
                $0.value.isComplete && $0.value.path != nil && $0.value.openCount == 0 && $0.value.image == nil && !$0.value.isPinned
                    && !openElsewhere.contains($0.key)
            }
            guard let key = uses.oldest(of: candidates.keys), let value = candidates[key] else { return }
            let victim = (key: key, value: value)
            // Out of the accounts first: the actor may run other calls while the files are deleted.
            entries[victim.key] = nil
            let path = victim.value.path!
            removals[path, default: (0, [])].running += 1
            let outcome = await threadPool.blocking { () -> Result<Bool, TileError> in
                do throws(TileError) { return .success(try TiledImage.removeStoreIfUnused(at: path)) } catch { return .failure(error) }
            }
            removals[path]!.running -= 1
            if removals[path]!.running == 0, let waiters = removals.removeValue(forKey: path)?.waiters {
                for waiter in waiters { waiter.resume() }
            }
            switch outcome {
            case .failure(let error): report("evict", path: path, error)
            case .success(true): eventsContinuation.yield(.evicted(path: path, byteCount: victim.value.byteCount))
            case .success(false):
                // Another process (an instance sharing the cache) has it open: it stays, as if just used.
                entries[victim.key] = victim.value
                uses.use(victim.key)
                openElsewhere.insert(victim.key)
            }
        }
    }

    private func report(_ operation: String, path: String?, _ error: TileError) {
        logger.error(
            "\(operation) failed", metadata: ["path": .string(path ?? "(ephemeral)"), "error": .string(error.description)])
        eventsContinuation.yield(.failed(operation: operation, path: path, error: error))
    }
}
