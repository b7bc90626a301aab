import Logging
import TileActors
#if canImport(Glibc)
import Glibc
#endif
package import TileCore

extension ImageCatalog {
    /// Why `id`'s last build failed and how many times in a row its source's version has failed; nil
    /// when it is not failed.
    package func failure(of id: String) -> (error: TileError, attempts: Int)? {
        if case .failed(let error, _, _, let attempts) = phase(of: id) { return (error, attempts) }
        return nil
    }

    /// Marks `id` failed (its `attempts`-th failure in a row for this version of its source) and logs
    /// why, once: the one place a failure is recorded.
    ///
    /// A build that found the cache's disk full (`ENOSPC`, `EDQUOT`) also makes room
    /// (``noteDiskFull(building:)``).
    func setFailed(_ id: String, _ error: TileError, _ fingerprint: SourceFingerprint?, attempts: Int) {
        if Self.isDiskFull(error) { noteDiskFull(building: id) }
        apply(.failed(error, fingerprint, attempts: attempts, now: .now), to: id)
        logger.error(
            "build failed",
            metadata: [
                "id": "\(id)", "error": "\(error.message)", "code": "\(error.code)", "attempts": "\(attempts)",
                "retry_after_seconds": "\(retryDelay(afterAttempts: attempts).components.seconds)"
            ])
    }

    /// Refuses `id` because the server may not read its file: puts away what it showed, and logs the
    /// file and why (an operator's mistake of modes or owners, said where it is seen), once while it
    /// stays refused for the same reason: a client asking again and again does not fill the log.
    func refuse(_ id: String, _ error: TileError) async -> LookupError {
        _ = await perform(apply(.refused(error), to: id), for: id)
        return .forbidden
    }

    /// Notes that the build (or upload) of `id` found its disk full: the least recently used stores
    /// nobody has open are evicted until what its store needed is free, and `/ready` says the disk is
    /// full for ``diskFullInterval``.
    func noteDiskFull(building id: String) {
        var needed = 1
        if case .building(let build) = phase(of: id), let image = build.image { needed = max(1, image.estimatedStoreByteCount) }
        diskFullAt = .now
        let budget = self.budget
        _ = tasks.spawn { [needed] in await budget.makeRoom(byteCount: needed) }
    }

    /// Whether `error` says the disk (or the user's quota on it) is full.
    static func isDiskFull(_ error: TileError) -> Bool { error.errno == ENOSPC || error.errno == EDQUOT }

    /// How long `/ready` says the disk is full after a build or an upload found it so.
    static let diskFullInterval: Duration = .seconds(60)

    /// How long a version that failed `attempts` times in a row stays failed: ``retryInterval``,
    /// doubled with each further failure, at most 64 times it (an hour with the default).
    nonisolated func retryDelay(afterAttempts attempts: Int) -> Duration {
        retryInterval * (1 << min(max(attempts, 1) - 1, 6))
    }
}
