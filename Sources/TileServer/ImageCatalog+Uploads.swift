import Foundation
public import TileActors
public import TileCore

extension ImageCatalog {
    /// Why an upload cannot start.
    public enum UploadRefusal: Error, Sendable, Equatable {
        case invalidIdentifier
        /// An image of that name exists, or is being uploaded.
        case exists
        case failed(TileError)
    }

    /// Starts an upload of `id`: the caller appends the JPEG's bytes to the builder as they arrive
    /// and ends with ``endUpload(_:with:)``. It is built into the store `root/id.tiles`, published
    /// when complete; its tiles are served meanwhile.
    /// - Throws: ``UploadRefusal``.
    public func beginUpload(_ id: String, options: BuildOptions = BuildOptions()) throws(UploadRefusal) -> ImageBuilder {
        guard Self.isValidIdentifier(id) else { throw .invalidIdentifier }
        guard !uploads.contains(id), source(for: id) == nil else { throw .exists }
        guard !isShutDown else { throw .failed(TileError(.cancelled, "the server is shutting down")) }
        var options = options
        options.storage = .persistent(path: "\(root)/\(id).tiles")
        let builder: ImageBuilder
        do { builder = try ImageBuilder(options: options) } catch { throw .failed(error) }
        uploads.insert(id)
        entries[id] = .building(builder, Task { throw CancellationError() })
        Task { await self.watchHeader(id, builder) }
        return builder
    }

    private func watchHeader(_ id: String, _ builder: ImageBuilder) async {
        for await _ in builder.progress {
            if let image = await builder.image {
                builderImages[id] = image
                return
            }
        }
    }

    /// The image of an upload in progress, once its header is in.
    func uploadImage(_ id: String) async throws(LookupError) -> TiledImage {
        if case .failed(let error) = entries[id] { throw .failed(error) }
        if case .ready(let image) = entries[id] { return image }
        if case .building(let builder, _) = entries[id], let image = await builder.image { return image }
        throw .failed(TileError(.notReady, "\(id) is being uploaded; its header has not arrived yet"))
    }

    /// Ends an upload: a complete image stays (now a store in the folder); a failed or refused one is
    /// forgotten and its files removed.
    public func endUpload(_ id: String, with result: Result<TiledImage, TileError>) {
        uploads.remove(id)
        builderImages[id] = nil
        forgetReady(id)
        switch result {
        case .success(let image): entries[id] = .ready(image)
        case .failure:
            entries[id] = nil
            // A body refused after its image was complete (past the size limit): its store goes too.
            // Nothing else can be at this path: beginUpload refused names in use.
            try? FileManager.default.removeItem(atPath: "\(root)/\(id).tiles")
        }
    }
}
