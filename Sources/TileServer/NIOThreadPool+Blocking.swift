import NIOPosix
import TileCore

extension NIOThreadPool {
    /// Runs blocking work (file system calls, reads, decodes, encodes) on one of the pool's threads and
    /// returns its result; the calling task is suspended meanwhile, never blocked. The result is handed
    /// over through a ``TileCore/ResultHandoff`` (so that ThreadSanitizer sees the order of the two).
    /// - Throws: what `work` throws; ``TileError/Code/cancelled`` when the pool has stopped.
    func blocking<T: Sendable>(_ work: @escaping @Sendable () throws(TileError) -> T) async throws(TileError) -> T {
        let handoff = ResultHandoff<Result<T, TileError>>()
        do {
            try await runIfActive {
                do throws(TileError) { handoff.put(.success(try work())) } catch { handoff.put(.failure(error)) }
            }
        } catch {
            throw TileError(.cancelled, "the server's thread pool has stopped")
        }
        return try handoff.take().get()
    }
}
