import NIOConcurrencyHelpers
public import TileActors
import TileCore

extension ImageCatalog {
    /// What ``copyFromShelf(_:_:to:for:lock:attempts:)`` did.
    enum ShelfCopy {
        /// No store taken from the shelf: build the image here.
        case absent
        /// The store copied: the image is ready.
        case copied
        /// The store is being copied, served where it lies meanwhile (``Phase/copying(_:)``).
        case copying
    }

    /// A copy of a store of the shelf in progress, the image served from the shelf meanwhile.
    /// Confined to the catalog's actor.
    final class Copy {
        let shelved: ShelvedStore
        let source: SourceFile
        /// The cache store it is copied to, and its room in the budget.
        let store: String
        let reservation: DiskCacheBudget.StoreID
        /// Who asked first: the copy counts as its build.
        let client: String?
        /// The store where it lies, while it is copied (nil: not opened there, copied before any answer).
        var served: ShelvedImage?
        /// The copy and what follows it (the image opened, or built here when the copy fails).
        var job: TaskNursery.Handle<Void>?

        var fingerprint: SourceFingerprint { source.fingerprint }

        init(shelved: ShelvedStore, source: SourceFile, store: String, reservation: DiskCacheBudget.StoreID, client: String?) {
            (self.shelved, self.source, self.store, self.reservation, self.client) = (shelved, source, store, reservation, client)
        }
    }

    /// An image whose store is answered from the shelf where it lies while it is copied: its stored
    /// tiles, each by one read of the shelf, with the entity tag and dates the copy's answers will have.
    public struct ShelvedImage: Sendable {
        public let id: String
        public let pyramid: any ShelvedPyramid
        /// The source's fingerprint as text, and when it last changed as an HTTP date, as ``Image``'s.
        public let version: String
        public let lastModified: String
        /// The entity tag of its stored tiles (the request's variant not added yet), as ``Image``'s.
        let storedEntityTag: EntityTag
        /// The version its answers are cached under: the source's and the shelved TIFF's, which only
        /// this copy's answers have (a store built here instead, from other settings, answers anew).
        let cacheVersion: String
        /// How long a tile's read from the shelf may take (``ImageCatalog/shelfLookLimit`` unless ``ImageCatalog/setBucketTimeout(_:)`` or a test changed it).
        let readLimit: Duration

        init(id: String, pyramid: any ShelvedPyramid, fingerprint: SourceFingerprint, tiffVersion: String, readLimit: Duration) {
            (self.id, self.pyramid, version, self.readLimit) = (id, pyramid, fingerprint.description, readLimit)
            cacheVersion = "\(version) \(tiffVersion)"
            lastModified = HTTPDate.string(nanosecondsSinceEpoch: fingerprint.identity.lastChangeTime)
            storedEntityTag = EntityTag(version: version, made: "stored", profile: pyramid.hasColorProfile)
        }
    }

    /// What a lookup found: an image, or one being copied from the shelf and answered from there.
    public enum Found: Sendable {
        case image(Image)
        case shelved(ShelvedImage)
    }

    /// `id` as the catalog's fast paths key it, as written in a URL too (`maps%2Fberlin`): no identifier
    /// holds a `%`.
    nonisolated static func key(_ id: some StringProtocol) -> String {
        id.contains("%") ? TileAddress.percentDecoded(id) ?? String(id) : String(id)
    }

    /// Whether `id` is in ``Phase/copying(_:)`` of `copy`.
    func isCurrent(_ copy: Copy, _ id: String) -> Bool {
        if case .copying(let current) = phase(of: id), current === copy { return true }
        return false
    }

    /// `copy`'s copy, in its job, and what follows it (``settle(_:_:copied:lock:attempts:)``).
    func runCopy(_ held: Confined<Copy>, _ id: String, from shelf: any StoreShelf, lock: BuildLock, attempts: Int) async {
        let copy = held.value
        let done = await copied(copy, id, from: shelf)
        settle(copy, id, copied: done, lock: lock, attempts: attempts)
    }

    /// After `copy`'s copy: nothing more when it made the image ready; else, while `id` is still being
    /// copied by it, its build here (the cache's lock handed on), or nothing when the catalog shuts down.
    func settle(_ copy: Copy, _ id: String, copied: Bool, lock: BuildLock, attempts: Int) {
        countCopy(for: copy.client, -1)
        guard !copied, isCurrent(copy, id) else { return }
        apply(.forgotten, to: id)
        // Too many builds waiting: none started, the next request tries again (its waiters are told 503).
        _ = startBuild(id, copy.source, store: copy.store, lock: lock, attempts: attempts, for: copy.client)
    }

    /// The image being copied from the shelf named `id`, answered from there meanwhile, when its source
    /// was checked within the last ``sourceRecheckInterval``, without waiting for the actor (as
    /// ``readyImage(_:)``): nil otherwise (ask ``imageOrShelved(_:for:)``).
    public nonisolated func shelvedImage(_ id: some StringProtocol) -> ShelvedImage? {
        let key = Self.key(id)
        return readyImages.shelved.withLockedValue { shelved in
            guard let entry = shelved[key], ContinuousClock.now - entry.checked < sourceRecheckInterval else { return nil }
            return entry.image
        }
    }

    /// The image named `id` (``image(_:for:)``), or, while its store is being copied from the shelf,
    /// that store where it lies: returned at once, not after the copy.
    /// - Throws: ``LookupError``.
    public func imageOrShelved(_ id: String, for client: String? = nil) async throws(LookupError) -> Found {
        guard Self.isValidIdentifier(id) else { throw .invalidIdentifier }
        touch(id)
        if case .building(let build) = phase(of: id), build.isUpload { return .image(try await header(of: build, id)) }
        if let refusal = await refresh(id, for: client) { throw refusal }
        switch phase(of: id) {
        case .ready(let image, _): return .image(image)
        case .building(let build): return .image(try await header(of: build, id))
        case .copying(let copy):
            if let served = copy.served { return .shelved(served) }
            return .image(try await afterCopy(copy, id))
        case .failed(let error, _, _, _): throw .failed(error)
        case .refused: throw .forbidden
        case .closed, .unknown: throw .notFound
        }
    }

    /// `id`'s image once `copy` has ended: the store copied, or the build it left, once its header is read.
    func afterCopy(_ copy: Copy, _ id: String) async throws(LookupError) -> Image {
        await copy.job?.value
        switch phase(of: id) {
        case .ready(let image, _): return image
        case .building(let build): return try await header(of: build, id)
        case .failed(let error, _, _, _): throw .failed(error)
        case .refused: throw .forbidden
        case .copying, .closed, .unknown: throw .failed(TileError(.notReady, "the copy of \(id) from the shelf was stopped"))
        }
    }
}
