import Logging
import NIOConcurrencyHelpers
import TileActors
import TileCore

extension ImageCatalog {
    /// Where one image is.
    enum Phase {
        /// Nothing shown: not looked at yet, or put away (an older version retired, a build cancelled,
        /// a closed store lost).
        case unknown
        /// Being built (a master into the cache, or an upload into the folder).
        case building(Build)
        /// Its store being copied from the shelf, its stored tiles answered from there meanwhile.
        case copying(Copy)
        /// Served; `storeID` is its cache store's place in the budget (nil: a store of the folder, an upload).
        case ready(Image, storeID: DiskCacheBudget.StoreID?)
        /// A cache store closed to keep the open ones few; the budget may have evicted it since.
        case closed(DiskCacheBudget.StoreID, SourceFingerprint?)
        /// A failed build (or open) of one version of the source, and how many times in a row that
        /// version failed: it is tried again after ``ImageCatalog/retryDelay(afterAttempts:)``.
        case failed(TileError, SourceFingerprint?, at: ContinuousClock.Instant, attempts: Int)
        /// Its file is there, but the server's process may not read it (`EACCES`, `EPERM`), for the
        /// reason `error` gives (the file and its errno).
        case refused(TileError)
    }

    /// Everything the catalog holds of one identifier, in one place: its phase, the version of its
    /// file seen last, the look at that file in progress (which concurrent requests share), and when
    /// it was last asked for. Its phase changes only through ``apply(_:retryDelay:)``.
    struct Entry {
        private(set) var phase = Phase.unknown
        /// The fingerprint last seen of its file (its hash is reused while the file's identity holds).
        var seen: SourceFingerprint?
        /// The look at its file in progress (its phase is then being checked).
        var check: TaskNursery.Handle<LookupError?>?
        /// The catalog's use clock when it was last asked for: the open stores past
        /// ``ImageCatalog/maximumOpenImages`` are closed least recently used first.
        var lastUse: UInt64 = 0
        /// The refusal last said in the log (``Event/refused(_:)``), until the image opens or builds:
        /// a store whose manifest may be read but not its files is opened, and refused, at every request.
        private var refusalSaid: String?

        /// Whether the entry holds nothing worth keeping: no phase, no version seen, no look in progress.
        var isEmpty: Bool {
            guard case .unknown = phase else { return false }
            return seen == nil && check == nil
        }
    }

    /// What happens to an image.
    enum Event {
        /// A look at its file found `source`, at `now`.
        case found(SourceFile, now: ContinuousClock.Instant)
        /// Its file is gone (or it is purged): what it showed is put away (a build cancelled, a cache
        /// store out of the budget), its version forgotten.
        case gone
        /// Its file may not be read (`error` says which, and why): what it showed is put away, its
        /// version forgotten; said in the log once, not at every request while it stays so.
        case refused(TileError)
        /// A store was opened for it: a store of the folder, a cache store reused or reopened, a build's.
        case opened(Image, storeID: DiskCacheBudget.StoreID?)
        /// A build of it started.
        case started(Build)
        /// A copy of its store from the shelf started.
        case copying(Copy)
        /// A build or an open of the version `fingerprint` failed, its `attempts`-th time in a row.
        case failed(TileError, SourceFingerprint?, attempts: Int, now: ContinuousClock.Instant)
        /// Its build ended without an image (cancelled, or an upload that failed), or its closed store
        /// could not be opened again: nothing is left to put away.
        case forgotten
        /// Its cache store is closed to keep the open ones few.
        case closedToSaveRoom
    }

    /// What the catalog does after a phase changed: the work a transition leaves (blocking or async).
    enum Action {
        /// Open `source` (a store, a pyramidal TIFF) or build it (a master), counting on from the
        /// `attempts` its version failed before.
        case open(SourceFile, attempts: Int)
        /// Open the closed cache store `storeID` again; when the budget evicted it, `.open(source, 0)`.
        case reopen(DiskCacheBudget.StoreID, SourceFile)
        /// Stop a build (its builder removes its unfinished files).
        case cancel(Build)
        /// Stop a copy from the shelf and wait for it (its unfinished files are removed).
        case cancelCopy(Copy)
        /// Take a cache store out of the budget's accounts (the next build replaces its files).
        case unregister(DiskCacheBudget.StoreID)
        /// Close a cache store (the budget may evict it).
        case close(DiskCacheBudget.StoreID)
        /// Say in the log that the server may not read the image's file, and why.
        case logRefusal(TileError)
    }
}

extension ImageCatalog.Entry {
    /// Applies `event`: the one function that changes an image's phase.
    /// - Parameter retryDelay: how long a version that failed so many times in a row stays failed.
    /// - Returns: what the catalog does next, in order.
    mutating func apply(_ event: ImageCatalog.Event, retryDelay: (Int) -> Duration) -> [ImageCatalog.Action] {
        switch event {
        case .found(let source, let now):
            seen = source.fingerprint
            let version: SourceFingerprint? = source.fingerprint
            switch phase {
            case .ready(let image, _) where image.fingerprint == version:
                return []
            case .building(let build) where build.isUpload || build.fingerprint == version:
                return []
            case .copying(let copy) where copy.fingerprint == version:
                return []
            case .failed(_, version, let at, let attempts) where now - at < retryDelay(attempts):
                return []
            case .closed(let storeID, version):
                return [.reopen(storeID, source)]
            case .failed(_, version, _, let attempts):
                // The same version failed before: this try counts on from its attempts (the delay doubles).
                return putAway() + [.open(source, attempts: attempts)]
            default:
                return putAway() + [.open(source, attempts: 0)]
            }
        case .gone:
            seen = nil
            return putAway()
        case .refused(let error):
            seen = nil
            let says = refusalSaid != error.message
            refusalSaid = error.message
            defer { phase = .refused(error) }
            return putAway() + (says ? [.logRefusal(error)] : [])
        case .opened(let image, let storeID):
            (phase, refusalSaid) = (.ready(image, storeID: storeID), nil)
        case .started(let build):
            (phase, refusalSaid) = (.building(build), nil)
        case .copying(let copy):
            (phase, refusalSaid) = (.copying(copy), nil)
        case .failed(let error, let fingerprint, let attempts, let now):
            phase = .failed(error, fingerprint, at: now, attempts: attempts)
        case .forgotten:
            phase = .unknown
        case .closedToSaveRoom:
            guard case .ready(let image, let storeID?) = phase else { return [] }
            phase = .closed(storeID, image.fingerprint)
            return [.close(storeID)]
        }
        return []
    }

    /// Leaves what the phase shows (an older version, a file gone): a build is cancelled, a cache store
    /// leaves the budget.
    private mutating func putAway() -> [ImageCatalog.Action] {
        defer { phase = .unknown }
        switch phase {
        case .building(let build): return [.cancel(build)]
        case .copying(let copy): return [.cancelCopy(copy)]
        case .ready(_, let storeID?), .closed(let storeID, _): return [.unregister(storeID)]
        default: return []
        }
    }
}

extension ImageCatalog {
    /// Identifiers the catalog holds an entry of (for tests: nothing is kept of names with no image).
    package var entryCount: Int { entries.count }

    /// `id`'s phase (``Phase/unknown`` when the catalog holds nothing of it).
    func phase(of id: String) -> Phase { entries[id]?.phase ?? .unknown }

    /// Applies `event` to `id`'s entry (``Entry/apply(_:retryDelay:)``), keeps the ready images the
    /// connection handler reads without the actor in step with it, and drops an entry left empty.
    /// - Returns: what the catalog does next (``perform(_:for:client:)``).
    @discardableResult
    func apply(_ event: Event, to id: String) -> [Action] {
        var entry = entries[id] ?? Entry()
        let actions = entry.apply(event, retryDelay: retryDelay(afterAttempts:))
        switch (entry.phase, event) {
        case (.ready(let image, _), .found), (.ready(let image, _), .opened): rememberReady(image)  // looked at now
        case (.ready, _): break
        default: forgetReady(id)
        }
        readyImages.shelved.withLockedValue { shelved in  // looked at now, as a ready image
            if case .copying(let copy) = entry.phase, let served = copy.served { shelved[id] = (served, .now) } else { shelved[id] = nil }
        }
        entries[id] = entry.isEmpty ? nil : entry
        return actions
    }

    /// Does what transitions of `id` left to do, in order, letting go of each action once done (a
    /// cancelled build is not kept through the open or build after it: the budget evicts a store only
    /// once its pyramid is released).
    /// - Returns: why no image can be had now (an open or a build refused), or nil.
    func perform(_ actions: consuming [Action], for id: String, client: String? = nil) async -> LookupError? {
        var refusal: LookupError?
        var pending = consume actions
        pending.reverse()
        while let action = pending.popLast() {
            switch action {
            case .cancel(let build):
                build.task?.cancel()
                await build.builder.cancel()
            case .cancelCopy(let copy):
                copy.job?.cancel()
                await copy.job?.value  // its files removed, its lock released: nothing writes the store after
            case .unregister(let storeID):
                await budget.unregister(storeID)
            case .close(let storeID):
                await budget.close(storeID)  // evicts what the budget then allows
            case .logRefusal(let error):
                logger.error("refused: the server may not read the image's file", metadata: ["id": "\(id)", "error": "\(error.message)"])
            case .reopen(let storeID, let source):
                if await !reopen(id, storeID, source.fingerprint) { refusal = await open(id, source, attempts: 0, for: client) }
            case .open(let source, let attempts):
                refusal = await open(id, source, attempts: attempts, for: client)
            }
        }
        return refusal
    }

    /// Marks `id` asked for now.
    func touch(_ id: String) {
        entries[id, default: Entry()].lastUse = uses.tick()
    }
}
