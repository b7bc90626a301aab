import Foundation
public import TileActors
public import TileCore

extension ImageCatalog {
    /// Why an upload cannot start, or go on.
    public enum UploadRefusal: Error, Sendable, Equatable {
        case invalidIdentifier
        /// An image of that name exists, or is being uploaded (or something else is at its name).
        case exists
        /// ``maximumUploads`` uploads are in progress: try again later.
        case busy
        /// The store the image makes does not fit the disk budget.
        case overBudget(byteCount: Int)
        case failed(TileError)
    }

    /// Starts an upload of `id`. The caller appends the JPEG's bytes to the builder as they arrive,
    /// once ``reserveUpload(_:byteCount:)`` has room for its store (it knows the size from the
    /// header), finishes it and calls ``publishUpload(_:)`` (or cancels it and calls
    /// ``endUpload(_:)``). The store is built under a private name in the folder and published as
    /// `root/id.tiles` only if nothing is at that name then: an upload never replaces or removes
    /// anything it did not make. Its tiles are served while it is built.
    /// - Throws: ``UploadRefusal``.
    public func beginUpload(_ id: String, options: BuildOptions = BuildOptions()) async throws(UploadRefusal) -> ImageBuilder {
        guard Self.isFileIdentifier(id) else { throw .invalidIdentifier }
        guard !isShutDown else { throw .failed(TileError(.cancelled, "the server is shutting down")) }
        guard !isBuilding(id) else { throw .exists }
        let uploading = entries.values.filter { if case .building(let build) = $0.phase { build.isUpload } else { false } }.count
        guard uploading < maximumUploads else { throw .busy }
        let root = self.root
        // Anything at the name (a master, a store, a file or link of another kind) makes it taken.
        let taken =
            (try? await threadPool.blocking { () throws(TileError) -> Bool in
                SourceFile.allSuffixes.contains { FolderEntry(at: "\(root)/\(id).\($0)") != .none }
            }) ?? true
        guard !taken, !isBuilding(id) else { throw .exists }
        var options = options
        options.format = storeFormat
        options.storage = .persistent(path: "\(root)/\(Self.uploadStagingPrefix)\(id)-\(UInt64.random(in: 1...UInt64.max)).tiles")
        let builder: ImageBuilder
        do { builder = try ImageBuilder(options: options, threadPool: threadPool) } catch { throw .failed(error) }
        let build = Build(builder: builder, fingerprint: nil, sourcePath: nil, isUpload: true)
        apply(.started(build), to: id)
        watch(build, id)
        return builder
    }

    /// Counts the store an upload makes against the disk budget, before any of it is written (unused
    /// cache stores are evicted to make room).
    /// - Throws: ``UploadRefusal/overBudget(byteCount:)`` when it does not fit.
    public func reserveUpload(_ id: String, byteCount: Int) async throws(UploadRefusal) {
        guard case .building(let build) = phase(of: id), build.isUpload else { throw .failed(TileError(.cancelled, "the upload has ended")) }
        guard let storeID = await budget.reserve(byteCount: byteCount, path: "\(root)/\(id).tiles") else {
            throw .overBudget(byteCount: byteCount)
        }
        build.reservation = storeID
    }

    /// Publishes a finished upload as `root/id.tiles`, only if nothing is at that name now.
    /// - Throws: ``UploadRefusal/exists`` (its files are then removed), `.failed` when the build
    ///   did not complete.
    public func publishUpload(_ id: String) async throws(UploadRefusal) {
        // The build's watcher may have marked it ready already (its last progress is seen before this
        // call gets the actor, under load): then its store is the upload's, under its private name.
        var reservation: DiskCacheBudget.StoreID?
        if case .building(let build) = phase(of: id), build.isUpload {
            await build.watcher?.value
            reservation = build.reservation
        }
        guard case .ready(let image, _) = phase(of: id), let staged = image.pyramid.storePath,
            staged.hasPrefix("\(root)/\(Self.uploadStagingPrefix)\(id)-")
        else {
            await endUpload(id)
            throw .failed(TileError(.cancelled, "the upload did not complete"))
        }
        let final = "\(root)/\(id).tiles"
        do {
            try await threadPool.blocking { () throws(TileError) in try FolderEntry.rename(staged, toNew: final) }
        } catch {
            apply(.forgotten, to: id)
            if let reservation { await budget.unregister(reservation) }
            _ = try? await threadPool.blocking { () throws(TileError) in try TiledImage.removeStore(at: staged) }
            throw error.errno == EEXIST ? .exists : .failed(error)
        }
    }

    /// Ends an upload that will not be published: waits until its build has ended (its files
    /// removed by its builder), and gives its room in the budget back.
    public func endUpload(_ id: String) async {
        await endUpload(id, failure: nil)
    }

    /// Ends an upload that failed with `failure`: when it found the disk full, room is made and
    /// `/ready` says so for a while, as for a build (``noteDiskFull(building:)``).
    func endUpload(_ id: String, failure: TileError?) async {
        if let failure, Self.isDiskFull(failure) { noteDiskFull(building: id) }
        guard case .building(let build) = phase(of: id), build.isUpload else { return }
        await build.watcher?.value
    }
}
