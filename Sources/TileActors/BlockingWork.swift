import Dispatch
import TileCore

/// Runs blocking work (decoding, encoding, fsync, deleting large files) on threads of its own: a
/// private concurrent dispatch queue, whose threads are not Swift's cooperative pool. The awaiting
/// task is suspended, not blocked, so the pool's few threads stay free for async work. How many
/// jobs run at once is up to the caller (``HeavyWorkQueue`` limits its own).
enum BlockingWork {
    private static let queue = DispatchQueue(label: "TiledImageKit.blocking", qos: .userInitiated, attributes: .concurrent)

    /// Runs `work` on a thread of the blocking queue and returns its result (handed over through a
    /// ``TileCore/ResultHandoff``, so that ThreadSanitizer sees the task read it after the thread made it).
    static func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await run { Result { try work() } }.get()
    }

    /// Runs `work`, which cannot fail, on a thread of the blocking queue.
    static func run<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        let handoff = ResultHandoff<T>()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async {
                handoff.put(work())
                continuation.resume()
            }
        }
        return handoff.take()
    }
}
