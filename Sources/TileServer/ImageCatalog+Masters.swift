import Foundation
import TileActors
import TileCore

extension SourceFile {
    /// A master on the catalog's master shelf, as a source: its fingerprint made of what the shelf
    /// says of its version (its size, its date, and a hash of its entity tag for the sample hash; no
    /// device nor inode, which no file has both 0 of): another entity tag is another version, built again.
    init(remote master: ShelvedMaster, prefix: String) {
        var tag: UInt64 = 0xcbf2_9ce4_8422_2325  // FNV-1a 64 of the entity tag
        for byte in master.version.utf8 { tag = (tag ^ UInt64(byte)) &* 0x100_0000_01b3 }
        let identity = SourceFingerprint.Identity(
            device: 0, inode: 0, byteCount: master.byteCount, modificationTime: master.lastModified, changeTime: master.lastModified)
        self.init(kind: .master, path: "\(prefix)/\(master.location)", fingerprint: SourceFingerprint(identity: identity, sampleHash: tag))
        remote = master
    }
}

extension ImageCatalog {
    /// Every suffix a master on the shelf is named with (a TIFF there is always a master, built).
    static let shelvedMasterSuffixes = SourceFile.masterSuffixes + SourceFile.tiffSuffixes

    /// Looks for `id`'s master on ``masters`` (an image the folder does not hold), and brings `id`'s
    /// state up to date with what it finds. A look is trusted for ``sourceRecheckInterval``. When the
    /// shelf cannot be asked, an image already served (or being built) stays as it is, its tiles on
    /// disk; any other is answered `notReady` (503 with `Retry-After`), and `/ready` says why.
    func reconcileMaster(_ id: String, on masters: any MasterShelf, for client: String?) async -> LookupError? {
        // A page of a book is a folder's TIFF's: the shelf's TIFFs are built from their first page.
        guard Self.page(of: id) == nil else { return await perform(apply(.gone, to: id), for: id) }
        let master: ShelvedMaster?
        if let look = masterLooks[id], ContinuousClock.now - look.at < sourceRecheckInterval {
            master = look.master
        } else {
            let outcome = await Result {
                try await Self.within(Self.shelfLookLimit, "a look at the masters' shelf") {
                    try await masters.find(id, suffixes: Self.shelvedMasterSuffixes)
                }
            }
            noteMasters(outcome)
            switch outcome {
            case .success(let found):
                master = found
                rememberLook(id, found)
            case .failure(let error):
                switch phase(of: id) {
                case .ready, .building: return nil
                default: break
                }
                if Task.isCancelled || isShutDown { return .failed(TileError(.cancelled, "the server is shutting down")) }
                return .failed(TileError(.notReady, "the masters' shelf \(masters) cannot be asked for \(id): \(error)"))
            }
        }
        guard let master else { return await perform(apply(.gone, to: id), for: id) }
        let source = SourceFile(remote: master, prefix: masters.description)
        return await perform(apply(.found(source, now: .now), to: id), for: id, client: client)
    }

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

    /// Remembers how the master shelf's last request went: a failure of the shelf's own becomes
    /// ``mastersProblem``, which `/ready` says; a success clears it.
    func noteMasters<T>(_ outcome: Result<T, any Error>) {
        switch outcome {
        case .success: mastersProblem = nil
        case .failure(let error):
            guard !Task.isCancelled, !isShutDown else { return }
            if error is TileError || masters?.isUnavailable(error) == true { mastersProblem = "\(error)" }
        }
    }

    /// Looks at the master shelf when the catalog starts, then, while it fails, again each
    /// ``shelfRest``: `/ready` says a bucket that is missing, refused or down from the start, and
    /// stops saying it once it answers (a request's look clears it too). A job of the catalog's own.
    func watchMasters(_ masters: any MasterShelf) async {
        var looked = false
        while !isShutDown {
            if !looked || mastersProblem != nil {
                looked = true
                noteMasters(await Result { try await Self.within(Self.shelfLookLimit, "a look at the masters' shelf") { try await masters.check() } })
            }
            guard (try? await Task.sleep(for: shelfRest)) != nil else { return }
        }
    }

    /// What a folder of the master shelf holds (``MasterShelf/contents(ofFolder:suffixes:)``), its
    /// identifiers and folders those the catalog may serve; nothing when the shelf cannot be asked
    /// (said by `/ready`).
    func shelvedContents(ofFolder folder: String) async -> (images: [String], folders: [String]) {
        guard let masters else { return ([], []) }
        let outcome = await Result {
            try await Self.within(Self.shelfLookLimit, "a listing of the masters' shelf") {
                try await masters.contents(ofFolder: folder, suffixes: Self.shelvedMasterSuffixes)
            }
        }
        noteMasters(outcome)
        guard case .success(let found) = outcome else { return ([], []) }
        let depth = folder.split(separator: "/").count
        return (
            found.images.filter { Self.isPathIdentifier($0) }, depth >= Self.mostFolderDepth ? [] : found.folders.filter { Self.isPathIdentifier($0) }
        )
    }
}
