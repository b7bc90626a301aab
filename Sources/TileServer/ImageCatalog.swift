import Foundation
public import Logging
public import NIOPosix
import NIOConcurrencyHelpers
import Synchronization
public import TileActors
public import TileCore

/// The images a server offers: every JPEG (`.jpg`, `.jpeg`) and every store (`.tiles`) directly in
/// one folder, named by their file name without the extension, each with one entry whose phase is
/// unknown, building (its tiles readable as their rows are written), ready, closed (a cache store
/// closed to keep the open ones few), failed, or refused (the server may not read its file); the
/// phase changes in one transition function, which returns what the catalog does next.
///
/// Every lookup checks the file behind the identifier (a `stat`, and a hash of its ends when it
/// changed: ``TileCore/SourceFingerprint``), once however many requests ask at once. A JPEG is built
/// into a persistent store in the cache folder on its first request, through a `HeavyWorkQueue`
/// (past ``maximumPendingBuilds`` builds waiting, a lookup fails with ``LookupError/busy``); a store
/// built earlier is reused while its source is the same version. A ready image whose source changes
/// is built again; a failed one is tried again when its source changes, or after ``retryInterval``.
///
/// The cache's stores count against ``budget`` (a `DiskCacheBudget`) from their first bytes: at most
/// ``maximumOpenImages`` of them are kept open, and past the budget the least recently used of the
/// others are removed from disk (built again when asked for). Blocking work (file system calls,
/// opening stores, reading the JPEGs) runs on ``threadPool``; waits (for a header, for rows) are
/// continuations resumed by the build's progress, never polls.
///
/// Run the catalog as a service beside the server (``TileServer/application(host:port:logger:onServerRunning:)``
/// does): its lookups, builds and deadlines are child tasks of its ``run()`` (a lookup made before it
/// runs waits for it), and when the service group shuts down it cancels the builds still running,
/// which removes their unfinished files.
public actor ImageCatalog {
    /// Why an identifier has no image.
    public enum LookupError: Error, Sendable, Equatable {
        /// Not a plain name (a path, `..`, a hidden name, control characters): never looked up.
        case invalidIdentifier
        /// No JPEG or store of that name in the folder.
        case notFound
        /// The image needs a build, and ``maximumPendingBuilds`` builds already wait for their turn:
        /// try again later (HTTP 503 with `Retry-After`).
        case busy
        /// The build failed (or, as ``TileCore/TileError/Code/notReady``, has not read the header in time).
        case failed(TileError)
        /// The image is there, but the server's process may not read its file (or a store's files):
        /// the log says which (HTTP 403, as nginx answers).
        case forbidden
    }

    /// An image the catalog hands out: its pyramid, and which version of its file it shows.
    public struct Image: Sendable {
        public let id: String
        public let pyramid: TiledImage
        /// The source's fingerprint (the JPEG's, or a store's manifest's); nil for an upload in progress.
        public let fingerprint: SourceFingerprint?
        /// The fingerprint's text, made once: what cache keys and entity tags are derived from.
        public let version: String?
        /// When the source last changed (``TileCore/SourceFingerprint/Identity/lastChangeTime``) as an
        /// HTTP date (`Last-Modified`), made once.
        public let lastModified: String?

        /// The entity tag of its stored tiles' answers, made up to the request's variant (which the
        /// request adds), made once: ``TileService/entityTag(version:stored:format:of:)``'s.
        let storedEntityTag: EntityTag?

        init(id: String, pyramid: TiledImage, fingerprint: SourceFingerprint?) {
            let version = fingerprint?.description
            (self.id, self.pyramid, self.fingerprint, self.version) = (id, pyramid, fingerprint, version)
            lastModified = fingerprint.map { HTTPDate.string(nanosecondsSinceEpoch: $0.identity.lastChangeTime) }
            storedEntityTag = version.map { EntityTag(version: $0, made: "stored", profile: pyramid.colorProfile != nil) }
        }
    }

    public nonisolated let root: String
    public nonisolated let cache: String
    /// Builds waiting for their turn at most; a lookup that would start one more fails with
    /// ``LookupError/busy``.
    public nonisolated let maximumPendingBuilds: Int
    /// Builds one client (``image(_:for:)``'s `client`) may have running or waiting at once: half of
    /// what may run and wait, so that one client asking for many images never takes every turn.
    public nonisolated var maximumBuildsPerClient: Int { max(1, Self.halfOfSum(concurrentBuilds, maximumPendingBuilds)) }
    /// Images of cache stores kept open at most; the least recently used of the others may be evicted.
    public nonisolated let maximumOpenImages: Int
    /// Uploads in progress at most; one more is refused with ``UploadRefusal/busy``.
    public nonisolated let maximumUploads: Int
    /// How long a failed build stays failed while its source is unchanged.
    public nonisolated let retryInterval: Duration
    /// The budget the cache's stores count against.
    public nonisolated let budget: DiskCacheBudget
    /// Where blocking work runs.
    public nonisolated let threadPool: NIOThreadPool
    /// Whether a symlink in the folder is followed (only to a target inside the folder).
    public nonisolated let followsSymlinks: Bool
    /// The access rules (``TileRoutes/access``'s): a link is followed only to an image the same rule decides.
    nonisolated let linkRuleStore = NIOLockedValueBox<[AccessPolicy.Rule]>([])
    /// Where entries skipped (a FIFO, a device, a symlink not followed) are said.
    nonisolated let logger: Logger
    /// What JPEGs are built into (and uploads): a tiled pyramidal TIFF by default.
    public nonisolated let storeFormat: StoreFormat
    /// Where stores are shared with other servers (a bucket): each store built is published there,
    /// and one built there from the same master is copied instead of built. Nil: the cache alone.
    public nonisolated let shelf: (any StoreShelf)?
    /// Where masters the folder does not hold are looked for (a bucket), each built on its first
    /// request as its bytes download. Nil: the folder alone.
    public nonisolated let masters: (any MasterShelf)?
    let builds: HeavyWorkQueue
    /// Where the catalog's own tasks prefer to run (see `init`'s `taskExecutor`).
    public nonisolated let taskExecutor: (any TaskExecutor)?
    /// The catalog's own tasks (lookups, builds' feeds and watchers, deadlines): children of
    /// ``run()``'s task group.
    nonisolated let tasks = TaskNursery()
    let headerWaitLimit: Duration
    let concurrentBuilds: Int

    /// Everything the catalog holds of each image (``Entry``): its phase changes only by
    /// ``apply(_:to:)``.
    var entries: [String: Entry] = [:]
    /// What manifests say of images besides their size (``presentation(of:)``), by identifier, with
    /// the version of the master it was read from: a book's pages are read once a version. At most
    /// ``mostPresentations``; past that, one is forgotten for each new one.
    var presentations: [String: (fingerprint: SourceFingerprint, presentation: Presentation)] = [:]
    static let mostPresentations = 1024
    /// ``Entry/lastUse``'s clock (the one recency rule's, as ``UseOrder`` keeps it for the other caches).
    var uses = UseClock()
    /// Stores opened so far (for tests: concurrent first requests open a store once).
    package internal(set) var storesOpened = 0
    var nextWaiter = 0
    /// Set once the catalog has shut down: no build starts after it.
    var isShutDown = false
    /// Why the store shelf's last request failed (``shelf``), until one succeeds: `/ready` says it.
    var shelfProblem: String?
    /// Until when the shelf is not asked, after a failed request (``shelfDownInterval``).
    var shelfDownUntil: ContinuousClock.Instant?
    /// How long the shelf rests after a failed request (``shelfDownInterval``; tests change it).
    var shelfRest = shelfDownInterval
    /// When the shelf's watch looks at it next, while it fails or stores wait (``watchShelf(_:)``).
    var shelfNextLook = ContinuousClock.now
    /// Copies from the shelf in progress (counted with the builds waiting).
    var shelfCopyCount = 0
    /// How long a look at either shelf may take (``shelfLookLimit``; ``setBucketTimeout(_:)`` and tests change it).
    var shelfLookWait = shelfLookLimit
    /// How long a copy from the shelf may take before its bytes count (``shelfLookLimit``; ``setBucketTimeout(_:)`` and tests change it).
    var shelfCopyGrace = shelfLookLimit
    /// How long opening a store where it lies, or a tile's read from it, may take (``shelfLookLimit``; ``setBucketTimeout(_:)`` and tests change it).
    var shelfReadLimit = shelfLookLimit
    /// Images whose store could not be published on the shelf: published once it answers again.
    var unpublished: Set<String> = []
    /// Copies from the shelf in progress, by the client that asked: counted as its builds.
    var shelfCopies: [String: Int] = [:]
    /// Why the master shelf's last request failed (``masters``), until one succeeds (`/ready` says it),
    /// and until when it is not asked (``shelfRest`` after the failure).
    var mastersDown: (problem: String, until: ContinuousClock.Instant)?
    /// The last look at the master shelf for each identifier, and listing of each folder, trusted for
    /// ``sourceRecheckInterval``.
    var masterLooks: [String: (master: ShelvedMaster?, at: ContinuousClock.Instant)] = [:]
    var masterListings: [String: (contents: (images: [String], folders: [String]), at: ContinuousClock.Instant)] = [:]
    var masterLookAllowance = LookAllowance()
    /// Builds started (for tests: an image copied from the shelf is not built).
    package internal(set) var buildsStarted = 0
    /// When a build last found the cache's disk full (``setFailed(_:_:_:attempts:)``).
    var diskFullAt: ContinuousClock.Instant?
    /// Ready images and when their source was last checked (``readyImage(_:)``), readable from any
    /// thread without a hop to the actor: a copy of the ready entries that ``apply(_:to:)`` keeps.
    nonisolated let readyImages = ReadyImages()
    /// The folder's and the cache folder's watchers (``watch(root:cache:readyImages:tasks:budget:changes:)``),
    /// and the changes of the cache folder's entries they report.
    private nonisolated let watchers: [FolderWatcher]
    nonisolated let cacheChanges = FolderChanges()
    /// How long ``readyImage(_:)`` trusts a source checked without looking at the folder again, by
    /// default (the folder's watcher says most changes at once; this bounds the others').
    public nonisolated static let defaultSourceRecheckInterval: Duration = .seconds(1)
    /// How long ``readyImage(_:)`` trusts a source checked without looking at the folder again.
    public nonisolated let sourceRecheckInterval: Duration

    /// - Parameters:
    ///   - root: the folder of images.
    ///   - cache: where JPEGs' stores are built (created if missing).
    ///   - concurrentBuilds: builds at once, at least 1 (default 1).
    ///   - maximumPendingBuilds: builds waiting for their turn at most (default 16).
    ///   - maximumOpenImages: cache stores kept open at most, at least 1 (default 64).
    ///   - maximumUploads: uploads at once at most, at least 1 (default 8).
    ///   - cacheByteBudget: bytes of cache stores past which unused ones are evicted; nil: the
    ///     `DiskCacheBudget` default (a quarter of the free space of the cache folder's file system, at
    ///     least 256 MiB). A build reserves its store's size before it writes, and is refused
    ///     (``TileCore/TileError/Code/overBudget``) when it does not fit after eviction.
    ///   - buildQueue: the queue builds take turns on, to share one with other memory-heavy work;
    ///     nil: a queue of the catalog's own, running `concurrentBuilds` at once.
    ///   - headerWaitLimit: how long a lookup waits for a build to read its header (a build waiting
    ///     for its turn has not) before it fails as `notReady` (default 20 s).
    ///   - retryInterval: how long a failed build of an unchanged source stays failed (default 60 s).
    ///   - threadPool: where blocking work runs (default NIO's shared pool).
    ///   - followsSymlinks: follow a symlink in the folder to a target inside it (default false: a
    ///     symlink is skipped).
    ///   - logger: where skipped entries are said.
    ///   - storeFormat: what JPEGs and uploads are built into (default a tiled pyramidal TIFF, about
    ///     1.45 times the JPEG's bytes, its full-resolution tiles sent as they are stored).
    ///   - sourceRecheckInterval: how long a ready image's source, once checked, is trusted without a
    ///     look at the folder (or the master shelf; `.zero`: every lookup looks). Nil (the default):
    ///     ``defaultSourceRecheckInterval``, or 10 s with a master shelf (a look is a request to it).
    ///   - shelf: where stores are shared with other servers (``shelf``; TIFF stores only); nil (the
    ///     default): none.
    ///   - masters: where masters the folder does not hold are found (``masters``); nil (the default): none.
    ///   - taskExecutor: where the catalog's own tasks (lookups, builds' feeds and watchers, deadlines)
    ///     prefer to run, and so its actor's code; nil (the default): Swift's global executor. An
    ///     application whose other work blocks that pool's few threads gives the server threads of its own.
    /// - Throws: `.invalidArgument` when `root` is not a folder (or a shelf is given with raw stores), `.io` when `cache` cannot be created.
    public init(
        root: String, cache: String, concurrentBuilds: Int = 1, maximumPendingBuilds: Int = 16,
        maximumOpenImages: Int = 64, maximumUploads: Int = 8, cacheByteBudget: Int? = nil, buildQueue: HeavyWorkQueue? = nil,
        headerWaitLimit: Duration = .seconds(20), retryInterval: Duration = .seconds(60),
        threadPool: NIOThreadPool = .singleton, followsSymlinks: Bool = false,
        logger: Logger = Logger(label: "TiledImageKit.ImageCatalog"), storeFormat: StoreFormat = .tiff(),
        sourceRecheckInterval: Duration? = nil, shelf: (any StoreShelf)? = nil, masters: (any MasterShelf)? = nil,
        taskExecutor: (any TaskExecutor)? = nil
    ) throws(TileError) {
        if shelf != nil, case .raw = storeFormat { throw TileError(.invalidArgument, "a store shelf holds TIFF stores, not raw ones") }
        (self.shelf, self.masters, self.taskExecutor) = (shelf, masters, taskExecutor)
        self.sourceRecheckInterval = sourceRecheckInterval ?? (masters == nil ? Self.defaultSourceRecheckInterval : .seconds(10))
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: root, isDirectory: &isFolder), isFolder.boolValue else {
            throw TileError(.invalidArgument, "\(root) is not a folder")
        }
        // Absolute, so that the paths built from them (an upload's store, a build's lock) name the same
        // files whatever the process's working folder, and compare equal to what stores report. The
        // cache is checked before it is made, and again once its links are resolved.
        self.root = try Self.absolute(root)
        try Self.checkSeparate(root: self.root, cache: URL(fileURLWithPath: cache).standardizedFileURL.path)
        do { try FileManager.default.createDirectory(atPath: cache, withIntermediateDirectories: true) } catch {
            throw TileError(.io, "cannot create the cache folder \(cache): \(error.localizedDescription)")
        }
        self.cache = try Self.absolute(cache)
        try Self.checkSeparate(root: self.root, cache: self.cache)
        builds = buildQueue ?? HeavyWorkQueue(maximumConcurrency: max(1, concurrentBuilds), threadPool: threadPool)
        self.concurrentBuilds = builds.maximumConcurrency
        self.maximumPendingBuilds = max(0, maximumPendingBuilds)
        self.maximumOpenImages = max(1, maximumOpenImages)
        self.maximumUploads = max(1, maximumUploads)
        self.headerWaitLimit = headerWaitLimit
        self.retryInterval = retryInterval
        self.threadPool = threadPool
        self.followsSymlinks = followsSymlinks
        self.logger = logger
        self.storeFormat = storeFormat
        // What builds killed before they were published left (stagings of uploads in the folder, of
        // JPEGs in the cache): only folders no running build holds, here or in another instance.
        TileStorage.removeAbandonedBuilds(in: self.root)
        TileStorage.removeAbandonedBuilds(in: self.cache)
        TileStorage.removeUnpublishedStores(in: self.root, prefix: Self.uploadStagingPrefix)
        budget = DiskCacheBudget(totalByteBudget: cacheByteBudget, folder: self.cache, threadPool: threadPool)
        watchers = Self.watch(root: self.root, cache: self.cache, readyImages: readyImages, tasks: tasks, budget: budget, changes: cacheChanges)
    }

    deinit { for watcher in watchers { watcher.stop() } }

    /// The image named `id`: a store opened, or a JPEG's build started (or joined), returned once its
    /// header is read (its tiles become readable as their rows are written).
    /// - Parameter client: who asks (an address): a build it would start is refused (``LookupError/busy``)
    ///   while it already has ``maximumBuildsPerClient`` running or waiting; nil: no one in particular.
    /// - Throws: ``LookupError``.
    public func image(_ id: String, for client: String? = nil) async throws(LookupError) -> Image {
        switch try await imageOrShelved(id, for: client) {
        case .image(let image): return image
        case .shelved:
            guard case .copying(let copy) = phase(of: id) else { return try await image(id, for: client) }
            return try await afterCopy(copy, id)
        }
    }

    /// The ready image named `id` when its source was checked within the last
    /// ``sourceRecheckInterval``, without waiting for the actor: the path of a warm server's requests.
    /// Nil otherwise: ask ``image(_:)``.
    public nonisolated func readyImage(_ id: some StringProtocol) -> Image? {
        let key = Self.key(id)
        return readyImages.entries.withLockedValue { ready in
            guard let entry = ready[key], ContinuousClock.now - entry.checked < sourceRecheckInterval else { return nil }
            return entry.image
        }
    }

    func rememberReady(_ image: Image) {
        let now = ContinuousClock.now
        readyImages.change { $0[image.id] = (image, now) }
    }

    func forgetReady(_ id: String) {
        readyImages.change { $0.removeValue(forKey: id) }
    }

    /// Whether `id` is being built now (a JPEG into the cache, or an upload).
    public func isBuilding(_ id: String) -> Bool {
        switch phase(of: id) {
        case .building, .copying: return true
        default: return false
        }
    }

    /// An image's geometry, and the version of its source it describes.
    public struct Outline: Sendable {
        public var geometry: TileGeometry
        /// The source's fingerprint as text (``Image/version``); nil for an upload in progress.
        public var version: String?
        /// When the source last changed as an HTTP date (`Last-Modified`); nil for an upload in progress.
        public var lastModified: String?

        init(geometry: TileGeometry, fingerprint: SourceFingerprint?) {
            self.geometry = geometry
            version = fingerprint?.description
            lastModified = fingerprint.map { HTTPDate.string(nanosecondsSinceEpoch: $0.identity.lastChangeTime) }
        }
    }

    /// The geometry of `id` (display size, levels, tiles) as soon as it is known: for a JPEG whose
    /// build has not read its header yet (waiting for its turn), from the file's header alone.
    /// - Parameter client: who asks (see ``image(_:for:)``).
    /// - Throws: ``LookupError``.
    public func outline(_ id: String, for client: String? = nil) async throws(LookupError) -> Outline {
        guard Self.isValidIdentifier(id) else { throw .invalidIdentifier }
        touch(id)
        let refusal = await refresh(id, for: client)
        if case .building(let build) = phase(of: id), build.image == nil, let path = build.sourcePath {
            let geometry = try? await threadPool.blocking { () throws(TileError) in
                let page = Self.page(of: id)?.page ?? 0
                let info = page > 0 ? try ImageInfo.read(tiffPage: page, ofFile: path) : try ImageInfo.read(regularFile: path)
                return try TileGeometry(storedWidth: info.width, storedHeight: info.height, orientation: info.orientation)
            }
            if let geometry { return Outline(geometry: geometry, fingerprint: build.fingerprint) }
        }
        if let refusal { throw refusal }
        if case .building(let build) = phase(of: id), !build.isUpload {
            return Outline(geometry: try await image(id).pyramid.geometry, fingerprint: build.fingerprint)
        }
        if case .copying(let copy) = phase(of: id), let served = copy.served {
            return Outline(geometry: served.pyramid.geometry, fingerprint: copy.fingerprint)
        }
        let image = try await image(id)
        return Outline(geometry: image.pyramid.geometry, fingerprint: image.fingerprint)
    }

    /// Looks at the file behind `id` and brings its state up to date, once for all concurrent callers
    /// (a build it starts is counted as the first caller's, `client`).
    /// - Returns: why no image can be had now (too many builds waiting), or nil.
    func refresh(_ id: String, for client: String? = nil) async -> LookupError? {
        if let pending = entries[id]?.check { return await pending.value }
        // A job of its own, not the caller's task: a request that goes away does not cancel the
        // lookup the others share (nor a build it starts).
        let stopped = LookupError.failed(TileError(.cancelled, "the server is shutting down"))
        let job = tasks.spawn(ifNotRun: stopped) { await self.reconcile(id, for: client) }
        entries[id, default: Entry()].check = job
        let outcome = await job.value
        if var entry = entries[id], entry.check?.isSame(as: job) == true {
            entry.check = nil
            entries[id] = entry.isEmpty ? nil : entry  // asked for, but no such image: nothing to remember
        }
        return outcome
    }

    private func reconcile(_ id: String, for client: String?) async -> LookupError? {
        if case .building(let build) = phase(of: id), build.isUpload { return nil }  // no file yet: the upload's own
        let (seen, logger) = (entries[id]?.seen, logger)
        var found: SourceFile?
        do {
            found = try await threadPool.blocking { () throws(TileError) in
                try self.findSource(id, known: seen) { path in
                    logger.warning(
                        "skipped: not a regular file or store, or a symlink not followed (outside the folder, or to an image another access rule decides)",
                        metadata: ["path": "\(path)"])
                }
            }
        } catch  where SourceFile.isPermissionRefusal(error) {
            return await refuse(id, error)
        } catch {}
        if found == nil, let masters { return await reconcileMaster(id, on: masters, for: client) }
        guard let source = found else { return await perform(apply(.gone, to: id), for: id) }
        return await perform(apply(.found(source, now: .now), to: id), for: id, client: client)
    }

    /// Opens `source` as `id`'s image (a store, a pyramidal TIFF) or builds it (a master), counting on
    /// from the `attempts` its version failed before.
    func open(_ id: String, _ source: SourceFile, attempts: Int, for client: String?) async -> LookupError? {
        switch source.kind {
        case .store, .tiff:
            do {
                storesOpened += 1
                let pyramid = try await threadPool.blocking { () throws(TileError) -> TiledImage? in
                    source.kind == .tiff ? try Self.openPyramid(tiff: source.path) : try TiledImage.open(store: source.path)
                }
                // A TIFF that is not a whole tiled pyramid of tiles this package reads is a master.
                guard let pyramid else { return await buildOrReuse(id, source, attempts: attempts, for: client) }
                apply(.opened(Image(id: id, pyramid: pyramid, fingerprint: source.fingerprint), storeID: nil), to: id)
            } catch  where SourceFile.isPermissionRefusal(error) {
                return await refuse(id, error)
            } catch {
                setFailed(id, error, source.fingerprint, attempts: attempts + 1)
            }
            return nil
        case .master:
            return await buildOrReuse(id, source, attempts: attempts, for: client)
        }
    }
}
