import Foundation
import TestSupport
import Testing
import TileActors
@testable import TileCore

@testable import TileServer

/// The catalog's one transition function (`ImageCatalog.Entry.apply`), against the rules its
/// documentation states, written out here case by case: what a look at the file does to each phase,
/// what is put away when, and when a failed version is tried again.
@Suite("ImageCatalog.Entry")
struct ImageEntryTests {
    typealias Entry = ImageCatalog.Entry

    /// Two versions of one file: only their fingerprints differ.
    static func version(_ n: UInt64) -> SourceFingerprint {
        SourceFingerprint(identity: .init(device: 1, inode: 2, byteCount: 100, modificationTime: Int64(n)), sampleHash: n)
    }
    static let (v1, v2) = (version(1), version(2))
    static func master(_ version: SourceFingerprint) -> SourceFile { SourceFile(kind: .master, path: "/images/photo.jpg", fingerprint: version) }

    /// The documented delay: 60 s, doubled with each further failure.
    static func retryDelay(_ attempts: Int) -> Duration { .seconds(60) * (1 << (max(attempts, 1) - 1)) }

    /// An action as a line, to compare with what the rules say.
    static func describe(_ actions: [ImageCatalog.Action]) -> [String] {
        actions.map { action in
            switch action {
            case .open(let source, let attempts): "open \(source.fingerprint.sampleHash) after \(attempts)"
            case .reopen(_, let source): "reopen for \(source.fingerprint.sampleHash)"
            case .cancel: "cancel the build"
            case .cancelCopy: "cancel the copy"
            case .unregister: "unregister the store"
            case .close: "close the store"
            case .logRefusal(let error): "log \(error.message)"
            }
        }
    }

    static func phaseName(_ entry: Entry) -> String {
        switch entry.phase {
        case .unknown: "unknown"
        case .building: "building"
        case .copying: "copying"
        case .ready: "ready"
        case .closed: "closed"
        case .failed(_, _, _, let attempts): "failed \(attempts)"
        case .refused: "refused"
        }
    }

    /// A ready cache store of version 1 (a pyramid built in memory, its place in a budget of its own).
    static func readyEntry() async throws -> (Entry, DiskCacheBudget.StoreID) {
        let folder = try Inputs.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let pyramid = try Synthetic.build(try Inputs.jpeg(width: 64, height: 48), chunk: 1 << 16)
        let budget = DiskCacheBudget(totalByteBudget: 1 << 30, folder: folder.path)
        let storeID = await budget.register(image: pyramid, path: nil)
        var entry = Entry()
        let image = ImageCatalog.Image(id: "photo", pyramid: pyramid, fingerprint: v1)
        #expect(describe(entry.apply(.opened(image, storeID: storeID), retryDelay: retryDelay)).isEmpty)
        return (entry, storeID)
    }

    @Test("a first look opens (or builds) the version found, and remembers it")
    func firstLook() {
        var entry = Entry()
        #expect(entry.isEmpty)
        #expect(Self.describe(entry.apply(.found(Self.master(Self.v1), now: .now), retryDelay: Self.retryDelay)) == ["open 1 after 0"])
        #expect(entry.seen == Self.v1 && !entry.isEmpty)
    }

    @Test("a failed version stays failed for its delay, then is tried again counting on; a new version is tried at once")
    func failedVersions() {
        let start = ContinuousClock.now
        let error = TileError(.corrupt, "bad")
        var entry = Entry()
        _ = entry.apply(.failed(error, Self.v1, attempts: 2, now: start), retryDelay: Self.retryDelay)
        #expect(Self.phaseName(entry) == "failed 2")
        // Two failures in a row: 120 s.
        var early = entry
        #expect(Self.describe(early.apply(.found(Self.master(Self.v1), now: start + .seconds(119)), retryDelay: Self.retryDelay)).isEmpty)
        #expect(Self.phaseName(early) == "failed 2")
        var late = entry
        #expect(
            Self.describe(late.apply(.found(Self.master(Self.v1), now: start + .seconds(121)), retryDelay: Self.retryDelay))
                == ["open 1 after 2"])
        #expect(Self.phaseName(late) == "unknown")
        var changed = entry
        #expect(
            Self.describe(changed.apply(.found(Self.master(Self.v2), now: start + .seconds(1)), retryDelay: Self.retryDelay))
                == ["open 2 after 0"])
    }

    @Test("a ready image of the version found stays; of another version its store leaves the budget before the new one is opened")
    func readyVersions() async throws {
        var (same, _) = try await Self.readyEntry()
        #expect(Self.describe(same.apply(.found(Self.master(Self.v1), now: .now), retryDelay: Self.retryDelay)).isEmpty)
        #expect(Self.phaseName(same) == "ready")
        var (changed, _) = try await Self.readyEntry()
        #expect(
            Self.describe(changed.apply(.found(Self.master(Self.v2), now: .now), retryDelay: Self.retryDelay))
                == ["unregister the store", "open 2 after 0"])
        #expect(Self.phaseName(changed) == "unknown" && changed.seen == Self.v2)
    }

    @Test("closing to save room closes a cache store; a look reopens it for its version, puts it away for another; a file gone forgets it all")
    func closedStores() async throws {
        var (entry, _) = try await Self.readyEntry()
        #expect(Self.describe(entry.apply(.closedToSaveRoom, retryDelay: Self.retryDelay)) == ["close the store"])
        #expect(Self.phaseName(entry) == "closed")
        // Closed again: nothing more to close.
        #expect(Self.describe(entry.apply(.closedToSaveRoom, retryDelay: Self.retryDelay)).isEmpty)
        var same = entry
        #expect(Self.describe(same.apply(.found(Self.master(Self.v1), now: .now), retryDelay: Self.retryDelay)) == ["reopen for 1"])
        #expect(Self.phaseName(same) == "closed")
        var changed = entry
        #expect(
            Self.describe(changed.apply(.found(Self.master(Self.v2), now: .now), retryDelay: Self.retryDelay))
                == ["unregister the store", "open 2 after 0"])
        var gone = entry
        gone.seen = Self.v1
        #expect(Self.describe(gone.apply(.gone, retryDelay: Self.retryDelay)) == ["unregister the store"])
        #expect(gone.isEmpty)
    }

    @Test(
        "a file the server may not read is said once while it stays so (again for another reason), even when found and refused again; once opened, said again"
    )
    func refusals() async throws {
        var (entry, _) = try await Self.readyEntry()
        let denied = TileError(.io, "cannot open /images/photo.jpg: Permission denied", errno: 13)
        #expect(
            Self.describe(entry.apply(.refused(denied), retryDelay: Self.retryDelay)) == ["unregister the store", "log \(denied.message)"])
        #expect(Self.phaseName(entry) == "refused" && entry.seen == nil && !entry.isEmpty)
        #expect(Self.describe(entry.apply(.refused(denied), retryDelay: Self.retryDelay)).isEmpty)
        let files = TileError(.io, "cannot open /images/photo.tiles/level-0: Permission denied", errno: 13)
        #expect(Self.describe(entry.apply(.refused(files), retryDelay: Self.retryDelay)) == ["log \(files.message)"])
        // A store whose manifest may be read but not its files: found, opened, refused, at every request.
        #expect(Self.describe(entry.apply(.found(Self.master(Self.v1), now: .now), retryDelay: Self.retryDelay)) == ["open 1 after 0"])
        #expect(Self.describe(entry.apply(.refused(files), retryDelay: Self.retryDelay)).isEmpty)
        // Readable again (opened), then refused again: said again.
        let pyramid = try Synthetic.build(try Inputs.jpeg(width: 64, height: 48), chunk: 1 << 16)
        _ = entry.apply(.opened(ImageCatalog.Image(id: "photo", pyramid: pyramid, fingerprint: Self.v1), storeID: nil), retryDelay: Self.retryDelay)
        #expect(Self.describe(entry.apply(.refused(files), retryDelay: Self.retryDelay)) == ["log \(files.message)"])
    }

    @Test("a build of the version found goes on, and an upload whatever is found; a build of another version is cancelled before the new one starts")
    func builds() throws {
        func build(of version: SourceFingerprint?) throws -> ImageCatalog.Build {
            ImageCatalog.Build(
                builder: try ImageBuilder(), fingerprint: version, sourcePath: version == nil ? nil : "/images/photo.jpg",
                isUpload: version == nil)
        }
        var building = Entry()
        _ = building.apply(.started(try build(of: Self.v1)), retryDelay: Self.retryDelay)
        #expect(Self.describe(building.apply(.found(Self.master(Self.v1), now: .now), retryDelay: Self.retryDelay)).isEmpty)
        #expect(Self.phaseName(building) == "building")
        #expect(
            Self.describe(building.apply(.found(Self.master(Self.v2), now: .now), retryDelay: Self.retryDelay))
                == ["cancel the build", "open 2 after 0"])
        var upload = Entry()
        _ = upload.apply(.started(try build(of: nil)), retryDelay: Self.retryDelay)
        #expect(Self.describe(upload.apply(.found(Self.master(Self.v2), now: .now), retryDelay: Self.retryDelay)).isEmpty)
        #expect(Self.phaseName(upload) == "building")
        // An ended build (cancelled, a failed upload) leaves nothing to put away; the version seen stays.
        #expect(Self.describe(upload.apply(.forgotten, retryDelay: Self.retryDelay)).isEmpty)
        #expect(Self.phaseName(upload) == "unknown" && upload.seen == Self.v2 && !upload.isEmpty)
    }

    @Test("a copy from the shelf of the version found goes on; of another version it is cancelled before the new one opens; a file gone cancels it")
    func copies() async throws {
        let folder = try Inputs.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let budget = DiskCacheBudget(totalByteBudget: 1 << 30, folder: folder.path)
        func copy(of version: SourceFingerprint) async throws -> ImageCatalog.Copy {
            let shelved = ShelvedStore(
                id: "photo", manifest: Data(), tiffByteCount: 100, tiffLocation: "photo.tiles/pyramid.tif", tiffVersion: "\"1\"",
                sourceByteCount: nil, sourceFingerprint: "")
            let reservation = try #require(await budget.reserve(byteCount: 100, path: "\(folder.path)/photo.tiles"))
            return ImageCatalog.Copy(
                shelved: shelved, source: Self.master(version), store: "\(folder.path)/photo.tiles", reservation: reservation, client: nil)
        }
        var entry = Entry()
        #expect(Self.describe(entry.apply(.copying(try await copy(of: Self.v1)), retryDelay: Self.retryDelay)).isEmpty)
        #expect(Self.phaseName(entry) == "copying")
        #expect(Self.describe(entry.apply(.found(Self.master(Self.v1), now: .now), retryDelay: Self.retryDelay)).isEmpty)
        #expect(Self.phaseName(entry) == "copying")
        #expect(
            Self.describe(entry.apply(.found(Self.master(Self.v2), now: .now), retryDelay: Self.retryDelay)) == ["cancel the copy", "open 2 after 0"])
        #expect(Self.phaseName(entry) == "unknown")
        _ = entry.apply(.copying(try await copy(of: Self.v2)), retryDelay: Self.retryDelay)
        #expect(Self.describe(entry.apply(.gone, retryDelay: Self.retryDelay)) == ["cancel the copy"])
        #expect(Self.phaseName(entry) == "unknown" && entry.seen == nil)
    }

    @Test("a catalog keeps nothing of identifiers with no image, nor of an image whose file went, and its fast path forgets it")
    func catalogForgets() async throws {
        let folder = try Inputs.temporaryFolder().path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try Inputs.jpeg(width: 300, height: 200).write(to: URL(fileURLWithPath: "\(folder)/photo.jpg"))
        let catalog = try ImageCatalog(root: folder, cache: "\(folder)/.cache", storeFormat: .raw, sourceRecheckInterval: .seconds(3600))
        let service = catalog.started()
        defer { service.cancel() }
        for n in 0..<50 {
            await #expect(throws: ImageCatalog.LookupError.notFound) { try await catalog.image("missing-\(n)") }
        }
        #expect(await catalog.entryCount == 0)
        _ = try await catalog.imageWhenItsTurnComes("photo")
        for _ in 0..<3000 where await catalog.isBuilding("photo") { try await Task.sleep(for: .milliseconds(20)) }
        #expect(catalog.readyImage("photo") != nil)
        // A connection's own memory of the ready image (checked an hour ago at most, by this catalog's
        // interval) is given up as the catalog forgets it.
        let version = try #require(catalog.readyImage("photo")?.version)
        var remembered: ImageCatalog.ReadyLookup?
        #expect(!catalog.isReady("other", version: version, remembered: &remembered))
        #expect(catalog.isReady("photo", version: version, remembered: &remembered))
        #expect(catalog.isReady("photo", version: version, remembered: &remembered))
        #expect(!catalog.isReady("photo", version: version + "0", remembered: &remembered))
        #expect(await catalog.entryCount == 1)
        try FileManager.default.removeItem(atPath: "\(folder)/photo.jpg")
        await #expect(throws: ImageCatalog.LookupError.notFound) { try await catalog.image("photo") }
        #expect(await catalog.entryCount == 0)
        #expect(catalog.readyImage("photo") == nil)
        #expect(!catalog.isReady("photo", version: version, remembered: &remembered))
    }

    @Test("a store of the folder (no place in the budget) is never closed to save room, and leaves nothing to unregister")
    func folderStores() throws {
        let pyramid = try Synthetic.build(try Inputs.jpeg(width: 64, height: 48), chunk: 1 << 16)
        var entry = Entry()
        _ = entry.apply(.opened(ImageCatalog.Image(id: "photo", pyramid: pyramid, fingerprint: Self.v1), storeID: nil), retryDelay: Self.retryDelay)
        #expect(Self.describe(entry.apply(.closedToSaveRoom, retryDelay: Self.retryDelay)).isEmpty)
        #expect(Self.phaseName(entry) == "ready")
        #expect(Self.describe(entry.apply(.gone, retryDelay: Self.retryDelay)).isEmpty)
        #expect(Self.phaseName(entry) == "unknown")
    }
}
