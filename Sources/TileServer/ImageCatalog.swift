import Foundation
import Synchronization
public import TileActors
public import TileCore


/// The images a server offers: every JPEG (`.jpg`, `.jpeg`) and every store (`.tiles`) directly in
/// one folder, named by their file name without the extension.
///
/// A JPEG is built into a persistent store in the cache folder on its first request, once however
/// many requests arrive, through a `HeavyWorkQueue` (builds at once are limited, and so are builds
/// waiting: past ``maximumPendingBuilds`` a lookup fails with ``LookupError/busy``); its image is
/// handed out as soon as its header is read, so tiles of rows already decoded can be served while
/// the rest is built. The store is reused while the source keeps its size, is not newer than it and
/// has the fingerprint the store's manifest keeps.
///
/// The cache's stores count against a `DiskCacheBudget`: at most ``maximumOpenImages`` of them are
/// kept open; past the budget's total, the least recently used of the others are removed from disk
/// (and built again when asked for).
///
/// Run the catalog as a service beside the server (``TileServer/application(host:port:logger:onServerRunning:)``
/// does): when the service group shuts down it cancels the builds still running, which removes their
/// unfinished files.
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
        /// The build of the JPEG failed.
        case failed(TileError)
    }

    public nonisolated let root: String
    public nonisolated let cache: String
    /// Builds waiting for their turn at most; a lookup that would start one more fails with
    /// ``LookupError/busy``.
    public nonisolated let maximumPendingBuilds: Int
    /// Images of cache stores kept open at most; the least recently used of the others may be evicted.
    public nonisolated let maximumOpenImages: Int
    /// The budget the cache's stores count against.
    public nonisolated let budget: DiskCacheBudget
    private let builds: HeavyWorkQueue
    private let headerWaitLimit: Duration
    private let concurrentBuilds: Int
    var entries: [String: Entry] = [:]
    /// The image of each build in progress, once its header is read.
    var builderImages: [String: TiledImage?] = [:]
    /// Identifiers being uploaded now.
    var uploads: Set<String> = []
    /// The budget's account of each cache store the catalog knows.
    private var budgetIDs: [String: DiskCacheBudget.StoreID] = [:]
    private var lastUse: [String: UInt64] = [:]
    private var useClock: UInt64 = 0
    /// Set once the catalog has shut down: no build starts after it.
    var isShutDown = false
    /// Complete images and when their source was last seen (``readyImage(_:)``), readable from any
    /// thread without a hop to the actor.
    private nonisolated let readyImages = Mutex<[String: (image: TiledImage, checked: ContinuousClock.Instant)]>([:])
    /// How long ``readyImage(_:)`` trusts a source seen without looking at the folder again.
    nonisolated static let sourceRecheckInterval: Duration = .seconds(1)

    enum Entry {
        case building(ImageBuilder, Task<TiledImage, any Error>)
        case ready(TiledImage)
        /// A cache store whose image was closed; the budget may have evicted it since.
        case closed(DiskCacheBudget.StoreID)
        case failed(TileError)
    }

    /// - Parameters:
    ///   - root: the folder of images.
    ///   - cache: where JPEGs' stores are built (created if missing).
    ///   - concurrentBuilds: builds at once, at least 1 (default 1).
    ///   - maximumPendingBuilds: builds waiting for their turn at most (default 16).
    ///   - maximumOpenImages: cache stores kept open at most, at least 1 (default 64).
    ///   - cacheByteBudget: bytes of cache stores past which unused ones are evicted; nil: the
    ///     `DiskCacheBudget` default (a quarter of the free space of `$TMPDIR`, at least 1 GiB).
    ///   - buildQueue: the queue builds take turns on, to share one with other memory-heavy work;
    ///     nil: a queue of the catalog's own, running `concurrentBuilds` at once.
    ///   - headerWaitLimit: how long a lookup waits for a build to read its header (a build waiting
    ///     for its turn has not) before it fails as `notReady` (default 20 s).
    /// - Throws: `.invalidArgument` when `root` is not a folder, `.io` when `cache` cannot be created.
    public init(
        root: String, cache: String, concurrentBuilds: Int = 1, maximumPendingBuilds: Int = 16,
        maximumOpenImages: Int = 64, cacheByteBudget: Int? = nil, buildQueue: HeavyWorkQueue? = nil,
        headerWaitLimit: Duration = .seconds(20)
    ) throws(TileError) {
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: root, isDirectory: &isFolder), isFolder.boolValue else {
            throw TileError(.invalidArgument, "\(root) is not a folder")
        }
        do { try FileManager.default.createDirectory(atPath: cache, withIntermediateDirectories: true) } catch {
            throw TileError(.io, "cannot create the cache folder \(cache): \(error.localizedDescription)")
        }
        self.root = root
        self.cache = cache
        builds = buildQueue ?? HeavyWorkQueue(maximumConcurrency: max(1, concurrentBuilds))
        self.concurrentBuilds = builds.maximumConcurrency
        self.maximumPendingBuilds = max(0, maximumPendingBuilds)
        self.maximumOpenImages = max(1, maximumOpenImages)
        self.headerWaitLimit = headerWaitLimit
        budget = DiskCacheBudget(totalByteBudget: cacheByteBudget)
    }

    /// Whether `id` may name an image: letters, digits, `-`, `_` and `.`, not first, at most 200.
    public static func isValidIdentifier(_ id: String) -> Bool {
        guard !id.isEmpty, id.utf8.count <= 200, !id.hasPrefix(".") else { return false }
        return id.unicodeScalars.allSatisfy { $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "-_.".unicodeScalars.contains($0)) }
    }

    /// The identifiers offered now, sorted.
    public func identifiers() -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        return Set(names.compactMap { name -> String? in
            let id = (name as NSString).deletingPathExtension
            return Self.isValidIdentifier(id) && source(for: id) != nil ? id : nil
        }).sorted()
    }

    /// The image named `id`: a store opened, or a JPEG's build started (or joined), returned once its
    /// header is read.
    /// - Throws: ``LookupError``.
    public func image(_ id: String) async throws(LookupError) -> TiledImage {
        guard Self.isValidIdentifier(id) else { throw .invalidIdentifier }
        if uploads.contains(id) { return try await uploadImage(id) }
        guard let source = source(for: id) else {
            forgetReady(id)
            throw .notFound
        }
        touch(id)
        switch entries[id] {
        case .ready(let image):
            if image.isComplete { rememberReady(id, image) }
            return image
        case .building(let builder, let task):
            return try await header(of: builder, task)
        case .closed(let storeID):
            if let image = await reopen(id, storeID) { return image }
        case .failed(let error):
            throw .failed(error)
        case nil:
            break
        }
        switch source {
        case .store(let path):
            do {
                let image = try TiledImage.open(store: path)
                entries[id] = .ready(image)
                rememberReady(id, image)
                return image
            } catch {
                entries[id] = .failed(error)
                throw .failed(error)
            }
        case .jpeg(let path):
            return try await startBuild(id: id, path: path)
        }
    }

    /// The complete image named `id` when the catalog has handed it out within the last
    /// ``sourceRecheckInterval`` (its source seen in the folder then), without waiting for the actor:
    /// the path of a warm server's requests. Nil otherwise: ask ``image(_:)``.
    public nonisolated func readyImage(_ id: String) -> TiledImage? {
        readyImages.withLock { ready in
            guard let entry = ready[id], ContinuousClock.now - entry.checked < Self.sourceRecheckInterval else { return nil }
            return entry.image
        }
    }

    func rememberReady(_ id: String, _ image: TiledImage) {
        let now = ContinuousClock.now
        readyImages.withLock { $0[id] = (image, now) }
    }

    func forgetReady(_ id: String) {
        _ = readyImages.withLock { $0.removeValue(forKey: id) }
    }

    /// The state of a JPEG's build: nil for a store or an image never asked for.
    public func isBuilding(_ id: String) -> Bool {
        if case .building = entries[id] { return true }
        return false
    }

    enum Source {
        case jpeg(String)
        case store(String)
    }

    /// The file behind `id`: a regular file (a JPEG) or a folder (a store) directly in `root`, never a
    /// symlink (so nothing outside the folder is ever read).
    func source(for id: String) -> Source? {
        for suffix in ["jpg", "jpeg", "JPG", "JPEG"] {
            if isRegular("\(root)/\(id).\(suffix)", folder: false) { return .jpeg("\(root)/\(id).\(suffix)") }
        }
        if isRegular("\(root)/\(id).tiles", folder: true) { return .store("\(root)/\(id).tiles") }
        return nil
    }

    private func isRegular(_ path: String, folder: Bool) -> Bool {
        // The attributes of the path itself (lstat): a symlink is a symlink, never what it points to.
        guard let type = (try? FileManager.default.attributesOfItem(atPath: path))?[.type] as? FileAttributeType else { return false }
        return type == (folder ? .typeDirectory : .typeRegular)
    }

    private func startBuild(id: String, path: String) async throws(LookupError) -> TiledImage {
        let store = "\(cache)/\(id).tiles"
        // An eviction of this store (it leaves the budget's accounts before its files are deleted) done
        // before anything is read or built there.
        await budget.waitForRemoval(at: store)
        if let reused = await reusableStore(store, source: path) {
            // Another request may have started a build, or adopted the same store, meanwhile (the
            // checks above suspend): one image and one budget entry a store.
            if case .building(let builder, let task) = entries[id] { return try await header(of: builder, task) }
            if case .ready(let image) = entries[id] { return image }
            await adopt(id, reused, store: store)
            return reused
        }
        if case .building(let builder, let task) = entries[id] { return try await header(of: builder, task) }
        if case .ready(let image) = entries[id] { return image }
        guard !isShutDown else { throw .failed(TileError(.cancelled, "the server is shutting down")) }
        let waiting = entries.values.filter { if case .building = $0 { return true } else { return false } }.count
            - uploads.count - concurrentBuilds
        guard waiting < maximumPendingBuilds else { throw .busy }
        var options = BuildOptions()
        options.storage = .persistent(path: store)
        let builder: ImageBuilder
        do { builder = try ImageBuilder(options: options) } catch { throw .failed(error) }
        let queue = builds
        let task = Task<TiledImage, any Error> {
            do {
                return try await queue.run {
                    try await FileImageSource(path: path).feed(into: builder)
                    return try await builder.finish()
                }
            } catch {
                await builder.cancel()  // a cancelled feed or turn: the builder removes its files
                throw error
            }
        }
        entries[id] = .building(builder, task)
        Task { await self.settle(id, task, store: store) }
        let image = try await header(of: builder, task)
        if case .building = entries[id] { builderImages[id] = image }
        return image
    }

    /// The image of a build once its header is read (polled every 2 ms: any number of requests may
    /// wait for the same build), or the build's failure; `notReady` past ``headerWaitLimit``.
    func header(of builder: ImageBuilder, _ task: Task<TiledImage, any Error>) async throws(LookupError) -> TiledImage {
        let deadline = ContinuousClock.now + headerWaitLimit
        while true {
            if let image = await builder.image { return image }
            switch await builder.currentState {
            case .failed, .cancelled, .complete:
                switch await task.result {
                case .success(let image): return image
                case .failure(let error): throw .failed(error as? TileError ?? TileError(.cancelled, "\(error)"))
                }
            case .waitingForHeader, .decoding:
                guard ContinuousClock.now < deadline else {
                    throw .failed(TileError(.notReady, "the image is waiting for its turn to be built"))
                }
                try? await Task.sleep(for: .milliseconds(2))
            }
        }
    }

    /// The geometry of `id` (display size, levels, tiles), as soon as it is known: for a JPEG not
    /// built yet, from its header alone (no decode; the build starts meanwhile), so `info.json` is
    /// answered at once.
    /// - Throws: ``LookupError``.
    public func geometry(_ id: String) async throws(LookupError) -> TileGeometry {
        if Self.isValidIdentifier(id), entries[id] == nil, !uploads.contains(id), case .jpeg(let path) = source(for: id),
            TiledImage.sourceByteCount(ofStore: "\(cache)/\(id).tiles") == nil,
            let info = try? ImageInfo.read(contentsOfFile: path),
            let geometry = try? TileGeometry(storedWidth: info.width, storedHeight: info.height, orientation: info.orientation)
        {
            Task { _ = try? await self.image(id) }
            return geometry
        }
        return try await image(id).geometry
    }

    private func settle(_ id: String, _ task: Task<TiledImage, any Error>, store: String) async {
        defer { builderImages[id] = nil }
        switch await task.result {
        case .success(let image): await adopt(id, image, store: store)
        case .failure(let error):
            let failure = error as? TileError ?? TileError(.cancelled, "\(error)")
            // A cancelled build (the server shutting down) is forgotten, not remembered as failed.
            entries[id] = failure.code == .cancelled ? nil : .failed(failure)
        }
    }

    /// A complete cache store: open, in the budget's accounts, the least recently used ones closed
    /// past ``maximumOpenImages``.
    private func adopt(_ id: String, _ image: TiledImage, store: String) async {
        entries[id] = .ready(image)
        rememberReady(id, image)
        touch(id)
        if budgetIDs[id] == nil {
            let storeID = await budget.register(image: image, path: store)
            // Registered meanwhile by another adoption: a second entry for the same path would be
            // "unused" to the budget, and its eviction would delete the store in use.
            if budgetIDs[id] == nil { budgetIDs[id] = storeID } else { await budget.unregister(storeID) }
        }
        let open = entries.compactMap { key, entry -> String? in
            if case .ready = entry, budgetIDs[key] != nil { return key }
            return nil
        }
        guard open.count > maximumOpenImages else { return }
        for key in open.sorted(by: { lastUse[$0, default: 0] < lastUse[$1, default: 0] }).prefix(open.count - maximumOpenImages) {
            guard let storeID = budgetIDs[key] else { continue }
            entries[key] = .closed(storeID)
            forgetReady(key)
            await budget.close(storeID)  // evicts what the budget then allows
        }
    }

    /// A closed cache store opened again, or nil (and forgotten) when the budget has evicted it.
    private func reopen(_ id: String, _ storeID: DiskCacheBudget.StoreID) async -> TiledImage? {
        if await budget.isRegistered(storeID) {
            if let image = try? await budget.open(storeID) {
                if case .closed = entries[id] { entries[id] = .ready(image) }
                return image
            }
            // Not opened (out of descriptors, say): out of the budget's accounts, so that the entry
            // cannot be evicted later under a store built or reused again at the same path.
            await budget.unregister(storeID)
        }
        if case .closed = entries[id] { entries[id] = nil }
        budgetIDs[id] = nil
        return nil
    }

    private func touch(_ id: String) {
        useClock += 1
        lastUse[id] = useClock
    }

    /// A store built earlier from this source, while the source keeps its size, is older and has the
    /// fingerprint the store's manifest keeps (read on a thread of its own).
    private func reusableStore(_ store: String, source: String) async -> TiledImage? {
        guard let byteCount = TiledImage.sourceByteCount(ofStore: store) else { return nil }
        let files = FileManager.default
        guard let sourceInfo = try? files.attributesOfItem(atPath: source),
            let storeInfo = try? files.attributesOfItem(atPath: "\(store)/\(TiledImage.storeManifestName)"),
            (sourceInfo[.size] as? NSNumber)?.intValue == byteCount,
            let sourceDate = sourceInfo[.modificationDate] as? Date, let storeDate = storeInfo[.modificationDate] as? Date,
            sourceDate.timeIntervalSince1970.rounded(.down) <= storeDate.timeIntervalSince1970.rounded(.down)
        else { return nil }
        // Reading a whole source takes a while: on a dispatch thread, not the render threads.
        let same = (try? await TileRoutes.waiting { () throws(TileError) in try TiledImage.isStore(store, builtFrom: source) }) == true
        guard same else { return nil }
        return try? TiledImage.open(store: store)
    }
}
