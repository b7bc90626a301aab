import Foundation
#if canImport(Glibc)
import Glibc
#endif
package import NIOCore
package import NIOPosix
package import TileCore

extension NIOThreadPool {
    /// Runs blocking work (file system calls, reads, decodes, encodes) on one of the pool's threads and
    /// returns its result; the calling task is suspended meanwhile, never blocked. The result is handed
    /// over through a ``TileCore/ResultHandoff`` (so that ThreadSanitizer sees the order of the two). A
    /// pool that has stopped (a server shutting down) still runs `work`, on a thread started for it.
    package func blocking<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        let handoff = ResultHandoff<T>()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            submit { state in
                let run: @Sendable () -> Void = {
                    handoff.put(work())
                    continuation.resume()
                }
                if case .active = state { run() } else { NIOThreadPool.runOnThreadOfItsOwn(run) }
            }
        }
        return handoff.take()
    }

    /// ``blocking(_:)`` for work that may fail.
    /// - Throws: what `work` throws.
    package func blocking<T: Sendable>(_ work: @escaping @Sendable () throws(TileError) -> T) async throws(TileError) -> T {
        try await blocking { () -> Result<T, TileError> in
            do throws(TileError) { return .success(try work()) } catch { return .failure(error) }
        }.get()
    }

    /// ``blocking(_:)`` for work that may throw any error.
    /// - Throws: what `work` throws.
    package func blockingAnyError<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await blocking { Result { try work() } }.get()
    }

    /// Runs `body` on a thread started for it, named as a pool's threads are (`TP-#stopped`, which the
    /// blocking-call check takes for a pool's): work a stopped pool no longer takes (a server shutting
    /// down, or a pool never started) still runs, never on the caller's thread.
    package static func runOnThreadOfItsOwn(_ body: @escaping @Sendable () -> Void) {
        Thread {
            // The name the kernel knows (comm), set by the thread itself before anything runs: a new
            // thread starts with its creator's (Foundation's name setter races with the thread's start).
            let raw = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
            if raw >= 0 {
                let comm = OwnedDescriptor(adopting: raw)
                _ = "TP-#stopped".withCString { write(comm.raw, $0, strlen($0)) }
            }
            body()
        }.start()
    }

    /// `count` bytes of `file` at `offset`, read on one of the pool's threads into a new buffer.
    /// - Throws: ``TileError/Code/io``, as ``TileCore/ReadOnlyFile/read(at:count:into:)``.
    package func read(_ file: ReadOnlyFile, at offset: Int, count: Int) async throws(TileError) -> ByteBuffer {
        try await blocking { () throws(TileError) -> ByteBuffer in
            var buffer = ByteBufferAllocator().buffer(capacity: count)
            var failure: TileError?
            buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { raw in
                do throws(TileError) { try file.read(at: offset, count: count, into: raw) } catch {
                    failure = error
                    return 0
                }
                return count
            }
            if let failure { throw failure }
            return buffer
        }
    }
}
