import NIOPosix
import TileCore

extension NIOThreadPool {
    /// Runs blocking work (file system calls, reads, decodes, encodes) on one of the pool's threads and
    /// returns its result; the calling task is suspended meanwhile, never blocked.
    /// - Throws: what `work` throws; ``TileError/Code/cancelled`` when the pool has stopped.
    func blocking<T: Sendable>(_ work: @escaping @Sendable () throws(TileError) -> T) async throws(TileError) -> T {
        let result: Result<T, TileError>
        do {
            result = try await runIfActive { () -> Result<T, TileError> in
                do throws(TileError) { return .success(try work()) } catch { return .failure(error) }
            }
        } catch {
            throw TileError(.cancelled, "the server's thread pool has stopped")
        }
        return try result.get()
    }
}
