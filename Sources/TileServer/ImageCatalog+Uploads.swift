import Foundation
public import TileActors
public import TileCore

#if canImport(Glibc)
import Glibc
#endif

extension ImageCatalog {
    /// Why an upload cannot start.
    public enum UploadRefusal: Error, Sendable, Equatable {
        case invalidIdentifier
        /// An image of that name exists, or is being uploaded.
        case exists
        case failed(TileError)
    }

    /// Starts an upload of `id`: the caller appends the JPEG's bytes to the builder as they arrive,
    /// finishes (or cancels) it, then calls ``endUpload(_:)``. It is built into the store
    /// `root/id.tiles`, published when complete; its tiles are served meanwhile.
    /// - Throws: ``UploadRefusal``.
    public func beginUpload(_ id: String, options: BuildOptions = BuildOptions()) async throws(UploadRefusal) -> ImageBuilder {
        guard Self.isValidIdentifier(id) else { throw .invalidIdentifier }
        guard !isShutDown else { throw .failed(TileError(.cancelled, "the server is shutting down")) }
        guard !isBuilding(id) else { throw .exists }
        let root = self.root
        // Anything at the name (a JPEG, a store, a file or link of another kind) makes it taken.
        let taken = (try? await threadPool.blocking { () throws(TileError) -> Bool in
            (SourceFile.jpegSuffixes + ["tiles"]).contains { FolderEntry(at: "\(root)/\(id).\($0)") != .none }
        }) ?? true
        guard !taken, !isBuilding(id) else { throw .exists }
        var options = options
        options.storage = .persistent(path: "\(root)/\(id).tiles")
        let builder: ImageBuilder
        do { builder = try ImageBuilder(options: options) } catch { throw .failed(error) }
        let build = Build(builder: builder, fingerprint: nil, sourcePath: nil)
        states[id] = .building(build)
        watch(build, id)
        return builder
    }

    /// Waits until an upload's build has ended and its state is settled: a complete image is ready
    /// (now a store in the folder); a failed or cancelled one is forgotten, its files removed by its
    /// builder.
    public func endUpload(_ id: String) async {
        guard case .building(let build) = states[id], build.isUpload else { return }
        await build.watcher?.value
    }
}
