import Foundation
public import TileActors
public import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// The images a server offers: every JPEG (`.jpg`, `.jpeg`) and every store (`.tiles`) directly in
/// one folder, named by their file name without the extension.
///
/// A JPEG is built into a persistent store in the cache folder on its first request, once however
/// many requests arrive, through a `HeavyWorkQueue` (builds at once are limited); its image is
/// handed out as soon as its header is read, so tiles of rows already decoded can be served while
/// the rest is built. The store is reused while the source keeps its size and is not newer than it.
public actor ImageCatalog {
    /// Why an identifier has no image.
    public enum LookupError: Error, Sendable, Equatable {
        /// Not a plain name (a path, `..`, a hidden name, control characters): never looked up.
        case invalidIdentifier
        /// No JPEG or store of that name in the folder.
        case notFound
        /// The build of the JPEG failed.
        case failed(TileError)
    }

    public nonisolated let root: String
    public nonisolated let cache: String
    private let builds: HeavyWorkQueue
    private var entries: [String: Entry] = [:]
    /// The image of each build in progress, once its header is read.
    private var builderImages: [String: TiledImage?] = [:]
    /// Identifiers being uploaded now.
    private var uploads: Set<String> = []

    private enum Entry {
        case building(ImageBuilder, Task<TiledImage, any Error>)
        case ready(TiledImage)
        case failed(TileError)
    }

    /// - Parameters:
    ///   - root: the folder of images.
    ///   - cache: where JPEGs' stores are built (created if missing).
    ///   - concurrentBuilds: builds at once, at least 1.
    public init(root: String, cache: String, concurrentBuilds: Int = 1) throws(TileError) {
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: root, isDirectory: &isFolder), isFolder.boolValue else {
            throw TileError(.invalidArgument, "\(root) is not a folder")
        }
        do { try FileManager.default.createDirectory(atPath: cache, withIntermediateDirectories: true) } catch {
            throw TileError(.io, "cannot create the cache folder \(cache): \(error.localizedDescription)")
        }
        self.root = root
        self.cache = cache
        builds = HeavyWorkQueue(maximumConcurrency: max(1, concurrentBuilds))
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
    public func image(_ id: String) async throws(LookupError) -> TiledImage {
        guard Self.isValidIdentifier(id) else { throw .invalidIdentifier }
        if uploads.contains(id) {  // an upload in progress: its image once the header is in
            if case .failed(let error) = entries[id] { throw .failed(error) }
            if case .ready(let image) = entries[id] { return image }
            if case .building(let builder, _) = entries[id], let image = await builder.image { return image }
            throw .failed(TileError(.notReady, "\(id) is being uploaded; its header has not arrived yet"))
        }
        guard let source = source(for: id) else { throw .notFound }
        switch entries[id] {
        case .ready(let image):
            return image
        case .building(let builder, let task):
            return try await header(of: builder, task)
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
                return image
            } catch {
                entries[id] = .failed(error)
                throw .failed(error)
            }
        case .jpeg(let path):
            return try await startBuild(id: id, path: path)
        }
    }

    /// What a listing shows of an image, without building it.
    public struct Summary: Sendable, Hashable {
        public enum State: String, Sendable, Hashable {
            /// A store, or a JPEG whose store is built.
            case ready
            /// Being built now.
            case building
            /// A JPEG not asked for yet.
            case notBuilt = "not built"
            case failed
        }
        public var id: String
        /// Display size (from the store, or the JPEG's header); nil when unreadable.
        public var width: Int?
        public var height: Int?
        public var state: State
        /// Levels whose every tile is written, of `levelCount`.
        public var levelsComplete: Int
        public var levelCount: Int
        /// Tile rows of the full-size level written so far.
        public var tileRowsComplete: Int
        /// The build's error, when it failed.
        public var error: String?
    }

    /// The summary of `id`, or nil when there is no such image.
    public func summary(_ id: String) -> Summary? {
        guard Self.isValidIdentifier(id) else { return nil }
        if uploads.contains(id) {
            var summary = Summary(id: id, state: .building, levelsComplete: 0, levelCount: 0, tileRowsComplete: 0)
            if case .failed(let error) = entries[id] { (summary.state, summary.error) = (.failed, error.message) }
            if let image = builderImages[id] ?? nil { fill(&summary, from: image) }
            return summary
        }
        guard let source = source(for: id) else { return nil }
        var summary = Summary(id: id, state: .notBuilt, levelsComplete: 0, levelCount: 0, tileRowsComplete: 0)
        var image: TiledImage?
        switch entries[id] {
        case .ready(let ready):
            summary.state = .ready
            image = ready
        case .building:
            summary.state = .building
        case .failed(let error):
            summary.state = .failed
            summary.error = error.message
        case nil:
            if case .store(let path) = source {
                image = try? TiledImage.open(store: path)
                summary.state = image == nil ? .failed : .ready
            }
        }
        if case .building = entries[id] { image = builderImages[id] ?? nil }
        if let image {
            fill(&summary, from: image)
        } else if case .jpeg(let path) = source, let info = try? ImageInfo.read(contentsOfFile: path) {
            let turned = (info.exifOrientation ?? 1) >= 5
            (summary.width, summary.height) = turned ? (info.height, info.width) : (info.width, info.height)
        }
        return summary
    }

    private func fill(_ summary: inout Summary, from image: TiledImage) {
        let g = image.geometry
        (summary.width, summary.height, summary.levelCount) = (g.width, g.height, g.levels.count)
        summary.levelsComplete = g.levels.indices.filter { image.isLevelComplete($0) }.count
        summary.tileRowsComplete = (0..<g.levels[0].rows).filter { image.isTileReady(level: 0, column: 0, row: $0) }.count
    }

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
    public func beginUpload(_ id: String, options: BuildOptions = BuildOptions()) throws(UploadRefusal) -> ImageBuilder {
        guard Self.isValidIdentifier(id) else { throw .invalidIdentifier }
        guard !uploads.contains(id), source(for: id) == nil else { throw .exists }
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

    /// Ends an upload: a complete image stays (now a store in the folder); a failed or refused one is
    /// forgotten and its files removed.
    public func endUpload(_ id: String, with result: Result<TiledImage, TileError>) {
        uploads.remove(id)
        builderImages[id] = nil
        switch result {
        case .success(let image): entries[id] = .ready(image)
        case .failure:
            entries[id] = nil
            // A body refused after its image was complete (past the size limit): its store goes too.
            // Nothing else can be at this path: beginUpload refused names in use.
            try? FileManager.default.removeItem(atPath: "\(root)/\(id).tiles")
        }
    }

    /// The state of a JPEG's build: nil for a store or an image never asked for.
    public func isBuilding(_ id: String) -> Bool {
        if case .building = entries[id] { return true }
        return false
    }

    private enum Source {
        case jpeg(String)
        case store(String)
    }

    /// The file behind `id`: a regular file (a JPEG) or a folder (a store) directly in `root`, never a
    /// symlink (so nothing outside the folder is ever read).
    private func source(for id: String) -> Source? {
        for suffix in ["jpg", "jpeg", "JPG", "JPEG"] {
            if isRegular("\(root)/\(id).\(suffix)", folder: false) { return .jpeg("\(root)/\(id).\(suffix)") }
        }
        if isRegular("\(root)/\(id).tiles", folder: true) { return .store("\(root)/\(id).tiles") }
        return nil
    }

    private func isRegular(_ path: String, folder: Bool) -> Bool {
        var info = stat()
        guard lstat(path, &info) == 0 else { return false }
        return info.st_mode & S_IFMT == (folder ? S_IFDIR : S_IFREG)
    }

    private func startBuild(id: String, path: String) async throws(LookupError) -> TiledImage {
        let store = "\(cache)/\(id).tiles"
        if let reused = reusableStore(store, source: path) {
            entries[id] = .ready(reused)
            return reused
        }
        var options = BuildOptions()
        options.storage = .persistent(path: store)
        let builder: ImageBuilder
        do { builder = try ImageBuilder(options: options) } catch { throw .failed(error) }
        let queue = builds
        let task = Task<TiledImage, any Error> {
            try await queue.run {
                try await FileImageSource(path: path).feed(into: builder)
                return try await builder.finish()
            }
        }
        entries[id] = .building(builder, task)
        Task { await self.settle(id, task) }
        let image = try await header(of: builder, task)
        if case .building = entries[id] { builderImages[id] = image }
        return image
    }

    /// The image of a build once its header is read (polled every 2 ms: any number of requests may
    /// wait for the same build), or the build's failure.
    private func header(of builder: ImageBuilder, _ task: Task<TiledImage, any Error>) async throws(LookupError) -> TiledImage {
        while true {
            if let image = await builder.image { return image }
            switch await builder.currentState {
            case .failed, .cancelled, .complete:
                switch await task.result {
                case .success(let image): return image
                case .failure(let error): throw .failed(error as? TileError ?? TileError(.io, "\(error)"))
                }
            case .waitingForHeader, .decoding:
                try? await Task.sleep(for: .milliseconds(2))
            }
        }
    }

    /// The geometry of `id` (display size, levels, tiles), as soon as it is known: for a JPEG not
    /// built yet, from its header alone (no decode; the build starts meanwhile), so `info.json` is
    /// answered at once.
    public func geometry(_ id: String) async throws(LookupError) -> TileGeometry {
        if Self.isValidIdentifier(id), entries[id] == nil, !uploads.contains(id), case .jpeg(let path) = source(for: id),
            reusableStore("\(cache)/\(id).tiles", source: path) == nil,
            let info = try? ImageInfo.read(contentsOfFile: path),
            let geometry = try? TileGeometry(storedWidth: info.width, storedHeight: info.height, orientation: info.orientation)
        {
            Task { _ = try? await self.image(id) }
            return geometry
        }
        return try await image(id).geometry
    }

    private func settle(_ id: String, _ task: Task<TiledImage, any Error>) async {
        defer { builderImages[id] = nil }
        switch await task.result {
        case .success(let image): entries[id] = .ready(image)
        case .failure(let error): entries[id] = .failed(error as? TileError ?? TileError(.io, "\(error)"))
        }
    }

    /// A store built earlier from this source, while the source keeps its size and is older.
    private func reusableStore(_ store: String, source: String) -> TiledImage? {
        guard let byteCount = TiledImage.sourceByteCount(ofStore: store) else { return nil }
        var sourceInfo = stat(), storeInfo = stat()
        guard stat(source, &sourceInfo) == 0, stat("\(store)/\(TiledImage.storeManifestName)", &storeInfo) == 0,
            Int(sourceInfo.st_size) == byteCount, sourceInfo.st_mtim.tv_sec <= storeInfo.st_mtim.tv_sec
        else { return nil }
        return try? TiledImage.open(store: store)
    }
}
