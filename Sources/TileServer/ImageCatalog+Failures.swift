import Logging
package import TileCore

extension ImageCatalog {
    /// Why `id`'s last build failed and how many times in a row its source's version has failed; nil
    /// when it is not failed.
    package func failure(of id: String) -> (error: TileError, attempts: Int)? {
        if case .failed(let error, _, _, let attempts) = states[id] { return (error, attempts) }
        return nil
    }

    /// Marks `id` failed (its `attempts`-th failure in a row for this version of its source) and logs
    /// why, once: the one place a failure is recorded.
    func setFailed(_ id: String, _ error: TileError, _ fingerprint: SourceFingerprint?, attempts: Int) {
        states[id] = .failed(error, fingerprint, at: .now, attempts: attempts)
        logger.error(
            "build failed",
            metadata: [
                "id": "\(id)", "error": "\(error.message)", "code": "\(error.code)", "attempts": "\(attempts)",
                "retry_after_seconds": "\(retryDelay(afterAttempts: attempts).components.seconds)"
            ])
    }

    /// How long a version that failed `attempts` times in a row stays failed: ``retryInterval``,
    /// doubled with each further failure, at most 64 times it (an hour with the default).
    nonisolated func retryDelay(afterAttempts attempts: Int) -> Duration {
        retryInterval * (1 << min(max(attempts, 1) - 1, 6))
    }
}
