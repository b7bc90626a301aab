import Foundation
import TileActors
import TileCore

#if canImport(Glibc)
import Glibc
#endif

extension ImageCatalog {
    /// Whether the catalog can serve now, and what it is doing: for `/ready` and `/metrics`.
    public struct Health: Sendable, Hashable, Codable {
        /// Ready: not shut down, the folder readable, the cache writable, the cache within its budget,
        /// the store shelf's last request (if there is a shelf) answered.
        public var isReady: Bool
        /// Why not, one line each.
        public var problems: [String]
        /// Builds running (JPEGs and uploads) and builds waiting for their turn.
        public var buildsRunning: Int
        public var buildsQueued: Int
        /// Images whose last build failed.
        public var imagesFailed: Int
        /// Bytes of the cache's stores, and the budget past which they are evicted.
        public var diskBytesUsed: Int
        public var diskBytesLimit: Int
    }

    /// The catalog's health. Its folders are checked here, not on the thread pool: `/ready` answers
    /// at once however many renders and reads the pool has (two `access` calls on folder metadata).
    public func health() async -> Health {
        var (running, failed) = (0, 0)
        for entry in entries.values {
            switch entry.phase {
            case .building, .copying: running += 1
            default: break
            }
            if case .failed = entry.phase { failed += 1 }
        }
        let queued = builds.currentCounts.pending
        let (used, limit) = (await budget.totalBytes, await budget.totalByteBudget)
        let (root, cache) = (self.root, self.cache)
        var problems: [String] = []
        if access(root, R_OK | X_OK) != 0 { problems.append("the folder cannot be read: \(String(cString: strerror(errno)))") }
        if access(cache, R_OK | W_OK | X_OK) != 0 { problems.append("the cache folder cannot be written: \(String(cString: strerror(errno)))") }
        if isShutDown { problems.append("shutting down") }
        if let shelf, let shelfProblem { problems.append("the store shelf \(shelf) cannot be used (images are built here): \(shelfProblem)") }
        if let masters, let mastersDown {
            problems.append("the masters' shelf \(masters) cannot be used (images not built yet cannot be): \(mastersDown.problem)")
        }
        if used > limit { problems.append("the cache holds \(used) bytes, past its budget of \(limit)") }
        if let full = diskFullAt, ContinuousClock.now - full < Self.diskFullInterval {
            problems.append("the disk is full: a build or an upload found no space \((ContinuousClock.now - full).components.seconds) s ago")
        }
        return Health(
            isReady: problems.isEmpty, problems: problems, buildsRunning: running, buildsQueued: queued, imagesFailed: failed,
            diskBytesUsed: used, diskBytesLimit: limit)
    }
}
