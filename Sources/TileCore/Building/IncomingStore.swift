public import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A TIFF store copied from elsewhere (a bucket's, as ``TiledImage/open(store:)`` reads it): its TIFF
/// written into a staging folder beside ``path`` as its bytes arrive, then published there by one
/// rename with its manifest, as a build publishes the store it writes. Let go before
/// ``publish(manifest:)`` (a failed or cancelled copy), its folder is removed; a process that dies
/// first leaves a staging folder the next cleanup removes (``TileStorage/removeAbandonedBuilds(in:name:)``).
///
/// Every call writes to the disk: make them off the cooperative pool, one at a time.
public final class IncomingStore: Sendable {
    /// Where the store is published.
    public let path: String
    /// The TIFF's size: what ``append(_:)`` takes at most, and ``publish(manifest:)`` needs.
    public let byteCount: Int
    private let staging: String
    private let tiffPath: String
    private let state: Mutex<State>

    private struct State: ~Copyable {
        var file: OwnedDescriptor?
        var written = 0
        /// The staging folder's lock, held until it is published or removed.
        var lock: FolderLock?
        var isPublished = false
    }

    /// Makes the staging folder of the store to be published at `path`, with an empty TIFF of
    /// `byteCount` bytes to come.
    /// - Throws: ``TileError/Code/io`` when the folder or its file cannot be made.
    public init(path: String, byteCount: Int) throws(TileError) {
        guard byteCount > 0 else { throw TileError(.invalidArgument, "a store's TIFF of \(byteCount) bytes") }
        let (staging, lock) = try StagedStore.makeStagingFolder(for: URL(fileURLWithPath: path))
        let tiffPath = "\(staging)/\(StoreManifest.tiffFileName)"
        let file: OwnedDescriptor
        do { file = try SystemCall.createExclusive(tiffPath, mode: StagedStore.publishedFileMode) } catch {
            removeStoreFolder(staging)
            throw error
        }
        (self.path, self.byteCount, self.staging, self.tiffPath) = (path, byteCount, staging, tiffPath)
        state = Mutex(State(file: consume file, lock: lock))
    }

    deinit { discard() }

    /// Removes the staging folder and what was written to it, unless the store is published (then
    /// nothing happens); the store can take no more bytes. What a copy that failed calls (or, last,
    /// the deinitializer).
    public func discard() {
        let isPublished = state.withLock { state in
            let wasPublished = state.isPublished
            state.file = nil
            state.isPublished = true  // nothing is left to remove
            return wasPublished
        }
        if !isPublished { removeStoreFolder(staging) }
    }

    /// The TIFF's bytes written so far.
    public var writtenByteCount: Int { state.withLock { $0.written } }

    /// Writes the TIFF's next bytes.
    /// - Throws: ``TileError/Code/invalidStore`` past ``byteCount``; ``TileError/Code/io``.
    public func append(_ bytes: UnsafeRawBufferPointer) throws(TileError) {
        let tiffPath = self.tiffPath
        try state.withLock { (state) throws(TileError) in
            guard let fd = state.file?.raw else { throw TileError(.invalidArgument, "\(tiffPath) is published or discarded already") }
            guard bytes.count <= byteCount - state.written else {
                throw TileError(.invalidStore, "\(path): more than the \(byteCount) bytes of its TIFF arrived")
            }
            try SystemCall.writeAll(fd, bytes, path: tiffPath)
            state.written += bytes.count
        }
    }

    /// Publishes the store at ``path``: the TIFF synced, `manifest` (a TIFF store's; the name it gives
    /// its TIFF replaced by the one a build gives it, fields it does not know left out) written beside
    /// it, the folder renamed into place (a store there before is replaced).
    /// - Throws: ``TileError/Code/invalidStore`` when fewer than ``byteCount`` bytes were written or
    ///   `manifest` is not a TIFF store's; ``TileError/Code/io``.
    public func publish(manifest: Data) throws(TileError) {
        var decoded = try StoreManifest.decode(manifest, path: path)
        guard decoded.format == "tiff", decoded.tiff != nil else { throw TileError(.invalidStore, "\(path): its manifest is not a TIFF store's") }
        // The TIFF under the name a build gives it (a bucket's manifest names its object), and only
        // what a build's manifest holds.
        decoded.tiff?.file = StoreManifest.tiffFileName
        let bytes = try decoded.encoded()
        let (staging, path, byteCount) = (self.staging, self.path, self.byteCount)
        try state.withLock { (state) throws(TileError) in
            guard let fd = state.file?.raw else { throw TileError(.invalidArgument, "\(path) is published or discarded already") }
            guard state.written == byteCount else {
                throw TileError(.invalidStore, "\(path): \(state.written) of its TIFF's \(byteCount) bytes arrived")
            }
            guard fdatasync(fd) == 0 else { throw SystemCall.error("cannot sync", path: staging) }
            try SystemCall.createSynced("\(staging)/\(StoreManifest.fileName)", bytes, mode: StagedStore.publishedFileMode)
            try StagedStore.moveIntoPlace(staging, path)
            state.file = nil
            state.isPublished = true
            state.lock = nil
        }
    }
}
