import Foundation
import TileActors
import TileCore

extension ImageCatalog {
    /// What the admin listing shows of an image: its state and size, its store's size on disk, and the
    /// fingerprint of the version served.
    public struct AdminEntry: Sendable, Hashable, Codable {
        public var summary: Summary
        /// Bytes of its store on disk (the cache's store of a JPEG, or the store or TIFF in the folder).
        public var bytesOnDisk: Int?
        public var fingerprint: String?
    }

    /// Every image with what ``AdminEntry`` shows.
    public func adminEntries() async -> [AdminEntry] {
        var entries: [AdminEntry] = []
        for id in await identifiers() {
            guard let summary = try? await summary(id) else { continue }
            var fingerprint: String?
            switch phase(of: id) {
            case .ready(let image, _): fingerprint = image.version
            case .building(let build): fingerprint = build.fingerprint?.description
            case .copying(let copy): fingerprint = copy.fingerprint.description
            case .failed(_, let f, _, _), .closed(_, let f): fingerprint = f?.description
            case .unknown, .refused: fingerprint = nil
            }
            let (root, cache) = (self.root, self.cache)
            let bytes = try? await threadPool.blocking { () throws(TileError) -> Int? in
                // The cache's store, else a store or a TIFF pyramid in the folder (any suffix's case the folder uses).
                for path in ["\(cache)/\(Self.cacheName(id)).tiles", "\(root)/\(id).tiles"] + SourceFile.tiffSuffixes.map({ "\(root)/\(id).\($0)" }) {
                    if let description = try? StoreDescription.read(at: path) { return description.byteCount }
                }
                return nil
            }
            entries.append(AdminEntry(summary: summary, bytesOnDisk: bytes ?? nil, fingerprint: fingerprint))
        }
        return entries
    }

    /// Forgets `id` and removes what the server made of it: a build running is cancelled, the cache's
    /// store of a JPEG deleted (a store or TIFF in the folder, and every source, is left alone); the
    /// next request builds it again, or copies it again from the ``shelf`` (whose store is left
    /// alone: the shelf is shared with other servers). A look at the image in progress (which may be
    /// copying its store) is waited for first.
    /// - Returns: whether there was such an image.
    @discardableResult
    public func purge(_ id: String) async -> Bool {
        guard Self.isValidIdentifier(id) else { return false }
        if let pending = entries[id]?.check { _ = await pending.value }
        let listed = await identifiers().contains(id)
        var known = listed
        if case .unknown = phase(of: id) {} else { known = true }
        // Put away and forgotten as a file gone is; its build is waited for, so that nothing writes the store deleted below.
        let build: Build? = if case .building(let build) = phase(of: id) { build } else { nil }
        _ = await perform(apply(.gone, to: id), for: id)
        await build?.watcher?.value
        let store = "\(cache)/\(Self.cacheName(id)).tiles"
        _ = try? await threadPool.blocking { () throws(TileError) in
            CacheStoreRecord.remove(forStore: store)
            try? FileManager.default.removeItem(atPath: store)
        }
        return known
    }
}
