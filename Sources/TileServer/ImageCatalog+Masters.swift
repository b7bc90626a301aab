import Foundation
import TileActors
import TileCore

extension SourceFile {
    /// A master on the catalog's master shelf, as a source: its fingerprint made of what the shelf
    /// says of its version (its size, its date, and a hash of its entity tag for the sample hash; no
    /// device nor inode, which no file has both 0 of): another entity tag is another version, built again.
    init(remote master: ShelvedMaster) {
        var tag: UInt64 = 0xcbf2_9ce4_8422_2325  // FNV-1a 64 of the entity tag
        for byte in master.version.utf8 { tag = (tag ^ UInt64(byte)) &* 0x100_0000_01b3 }
        let identity = SourceFingerprint.Identity(
            device: 0, inode: 0, byteCount: master.byteCount, modificationTime: master.lastModified, changeTime: master.lastModified)
        // Its path is its key: never a file's (the build streams it; nothing reads it as a path).
        self.init(kind: .master, path: master.location, fingerprint: SourceFingerprint(identity: identity, sampleHash: tag))
        remote = master
    }
}

extension ImageCatalog {
    /// Every suffix a master on the shelf is named with (a TIFF there is always a master, built).
    static let shelvedMasterSuffixes = SourceFile.masterSuffixes + SourceFile.tiffSuffixes

    /// Looks for `id`'s master on ``masters`` (an image the folder does not hold), and brings `id`'s
    /// state up to date with what it finds. When the shelf cannot be asked, an image already built
    /// stays served from its store in the cache (a closed one opened again), one being built goes on;
    /// any other is answered `notReady` (503 with `Retry-After`), and `/ready` says why.
    func reconcileMaster(_ id: String, on masters: any MasterShelf, for client: String?) async -> LookupError? {
        switch await lookUpMaster(id, on: masters) {
        case .success(let master?):
            let source = SourceFile(remote: master)
            return await perform(apply(.found(source, now: .now), to: id), for: id, client: client)
        case .success(nil):
            return await perform(apply(.gone, to: id), for: id)
        case .failure(let error):
            switch phase(of: id) {
            case .ready(let image, _):
                rememberReady(image)  // served on, without a look at each request
                return nil
            case .closed(let storeID, let fingerprint):
                if await reopen(id, storeID, fingerprint) { return nil }
            case .building, .copying: return nil
            default: break
            }
            if Task.isCancelled || isShutDown { return .failed(TileError(.cancelled, "the server is shutting down")) }
            return .failed(TileError(.notReady, "the masters' shelf \(masters) cannot be asked for \(id): \(error)"))
        }
    }

    /// `id`'s master on `masters`, or nil when it holds none: the last look when it is younger than
    /// ``sourceRecheckInterval``; no look (a failure) while the shelf rests after failing (its watch
    /// looks again each ``shelfRest``). An identifier with a store's folder in it (`a.tiles/b`) has
    /// none.
    func lookUpMaster(_ id: String, on masters: any MasterShelf) async -> Result<ShelvedMaster?, any Error> {
        // A page of a book is a folder's TIFF's: the shelf's TIFFs are built from their first page.
        guard Self.page(of: id) == nil, !id.split(separator: "/").contains(where: { $0.hasSuffix(".tiles") }) else { return .success(nil) }
        if let look = masterLooks[id], ContinuousClock.now - look.at < sourceRecheckInterval { return .success(look.master) }
        if let down = mastersDown, ContinuousClock.now < down.until { return .failure(TileError(.notReady, down.problem)) }
        // Identifiers never asked before cost a request each: no client makes the server list the bucket at its pace.
        guard masterLookAllowance.take() else {
            return .failure(TileError(.notReady, "more than \(LookAllowance.rate) images a second looked up in the bucket: try again shortly"))
        }
        let lookWait = shelfLookWait
        let outcome = await Result {
            try await Self.within(lookWait, "a look at the masters' shelf") {
                try await masters.find(id, suffixes: Self.shelvedMasterSuffixes)
            }
        }
        noteMasters(outcome)
        if case .success(let found) = outcome { rememberLook(id, found) }
        return outcome
    }

    /// Whether `id` is in its folder's listing of the master shelf read within ``sourceRecheckInterval``
    /// (a listing page's images summarised without a look each).
    func isListed(_ id: String) -> Bool {
        let folder = id.split(separator: "/").dropLast().joined(separator: "/")
        guard let listed = masterListings[folder], ContinuousClock.now - listed.at < sourceRecheckInterval else { return false }
        return listed.contents.images.contains(id)
    }

    /// Forgets the last look at `id` (a build of the version it found failed: the object may have
    /// been replaced since, which the next request finds).
    func forgetLook(_ id: String) { masterLooks[id] = nil }

    /// Keeps the look at `id` (at most ``mostMasterLooks``; past that, the expired ones are forgotten,
    /// or all when none has).
    private func rememberLook(_ id: String, _ master: ShelvedMaster?) {
        let now = ContinuousClock.now
        if masterLooks.count >= Self.mostMasterLooks {
            masterLooks = masterLooks.filter { now - $0.value.at < sourceRecheckInterval }
            if masterLooks.count >= Self.mostMasterLooks { masterLooks = [:] }
        }
        masterLooks[id] = (master, now)
    }

    static let mostMasterLooks = 4096

    /// The looks at the master shelf (and listings of its folders) one server makes at most: ``rate``
    /// a second, ``burst`` at once (a token bucket).
    struct LookAllowance {
        static let rate = 50.0
        static let burst = 100.0
        private var tokens = burst
        private var at = ContinuousClock.now

        /// Takes one look's token, when there is one.
        mutating func take() -> Bool {
            let now = ContinuousClock.now
            let elapsed = (now - at) / .seconds(1)
            (tokens, at) = (min(Self.burst, tokens + elapsed * Self.rate), now)
            guard tokens >= 1 else { return false }
            tokens -= 1
            return true
        }
    }

    /// Remembers how the master shelf's last request went: a failure of the shelf's own (unreachable,
    /// refusing, failing, or a look past its time) becomes ``mastersDown``, which `/ready` says and
    /// which rests the shelf for ``shelfRest``; a success clears it.
    func noteMasters<T>(_ outcome: Result<T, any Error>) {
        switch outcome {
        case .success: mastersDown = nil
        case .failure(let error):
            guard !Task.isCancelled, !isShutDown else { return }
            if error is TileError || masters?.isUnavailable(error) == true { mastersDown = ("\(error)", .now + shelfRest) }
        }
    }

    /// Looks at the master shelf when the catalog starts, then, while it fails, again each
    /// ``shelfRest``: `/ready` says a bucket that is missing, refused or down from the start, and
    /// stops saying it once it answers (a request's look clears it too). A job of the catalog's own.
    func watchMasters(_ masters: any MasterShelf) async {
        var looked = false
        while !isShutDown {
            if !looked || mastersDown.map({ ContinuousClock.now >= $0.until }) == true {
                looked = true
                let lookWait = shelfLookWait
                noteMasters(await Result { try await Self.within(lookWait, "a look at the masters' shelf") { try await masters.check() } })
            }
            guard (try? await Task.sleep(for: min(shelfRest, .seconds(1)))) != nil else { return }
        }
    }

    /// What a folder of the master shelf holds (``MasterShelf/contents(ofFolder:suffixes:)``), its
    /// identifiers and folders those the catalog may serve; kept for ``sourceRecheckInterval`` (at most
    /// ``mostMasterLooks`` folders); nothing when the shelf cannot be asked. Only the shelf's own
    /// failures are noted (``noteMasters(_:)``), not a listing too long for its time.
    func shelvedContents(ofFolder folder: String) async -> (images: [String], folders: [String]) {
        guard let masters else { return ([], []) }
        if let listed = masterListings[folder], ContinuousClock.now - listed.at < sourceRecheckInterval { return listed.contents }
        if let down = mastersDown, ContinuousClock.now < down.until { return ([], []) }
        // A listing of a folder never listed costs a request (or 20): counted as a look.
        guard masterLookAllowance.take() else { return ([], []) }
        let lookWait = shelfLookWait
        let outcome = await Result {
            try await Self.within(lookWait, "a listing of the masters' shelf") {
                try await masters.contents(ofFolder: folder, suffixes: Self.shelvedMasterSuffixes)
            }
        }
        if case .failure(let error) = outcome, !masters.isUnavailable(error) { return ([], []) }
        noteMasters(outcome)
        guard case .success(let found) = outcome else { return ([], []) }
        let depth = folder.split(separator: "/").count
        let contents = (
            found.images.filter { Self.isPathIdentifier($0) },
            depth >= Self.mostFolderDepth ? [] : found.folders.filter { Self.isPathIdentifier($0) }
        )
        if masterListings.count >= Self.mostMasterLooks { masterListings = [:] }
        masterListings[folder] = (contents, .now)
        return contents
    }
}
