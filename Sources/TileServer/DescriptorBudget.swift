import Foundation
import HummingbirdCore
import Logging
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// How many file descriptors a server may use, and how it spends them, from the process's limit
/// (`RLIMIT_NOFILE`): a reserve for the process itself (standard streams, event loops, the thread
/// pool, the folder watcher, logs), then half of the rest for connections and half for stores (each
/// open store, build or upload holds up to ``descriptorsPerStore``). A server never accepts more
/// connections than its share (it stops accepting until one closes), so descriptors never run out
/// under load, and no `EMFILE` reaches a place where it could stop the process.
public struct DescriptorBudget: Sendable, Hashable {
    /// The soft limit the budget was computed from.
    public var limit: Int
    /// Connections open at once at most.
    public var maximumConnections: Int
    /// Cache stores kept open at most.
    public var maximumOpenImages: Int
    /// Uploads at once at most (each holds a build's descriptors and memory).
    public var maximumUploads: Int

    /// Descriptors kept for the process itself.
    public static let reserve = 64
    /// Descriptors one open store, build or upload may hold (its level files, a coefficient file).
    public static let descriptorsPerStore = 24

    /// A budget within `limit` descriptors: each maximum as asked, lowered to fit.
    /// - Parameters:
    ///   - limit: the descriptors the process may have open (its soft `RLIMIT_NOFILE`).
    ///   - maximumConnections: connections at most (default 4096).
    ///   - maximumOpenImages: open cache stores at most (default 64).
    ///   - maximumUploads: uploads at once at most (default 8).
    ///   - concurrentBuilds: builds of the cache at once (default 1).
    public init(limit: Int, maximumConnections: Int = 4096, maximumOpenImages: Int = 64, maximumUploads: Int = 8, concurrentBuilds: Int = 1) {
        self.limit = limit
        let share = max(0, limit - Self.reserve) / 2
        self.maximumConnections = max(1, min(maximumConnections, share))
        let stores = max(2, share / Self.descriptorsPerStore - concurrentBuilds)
        self.maximumUploads = max(1, min(maximumUploads, stores / 2))
        self.maximumOpenImages = max(1, min(maximumOpenImages, stores - self.maximumUploads))
    }

    /// The process's soft descriptor limit, first raised to its hard limit (`setrlimit`).
    public static func raisedLimit() -> Int {
        var limits = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limits) == 0 else { return 1024 }
        if limits.rlim_cur < limits.rlim_max {
            var raised = limits
            raised.rlim_cur = limits.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limits = raised }
        }
        return Int(min(limits.rlim_cur, rlim_t(Int32.max)))
    }

    /// The process's soft descriptor limit as it is.
    public static func currentLimit() -> Int {
        var limits = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limits) == 0 else { return 1024 }
        return Int(min(limits.rlim_cur, rlim_t(Int32.max)))
    }
}
