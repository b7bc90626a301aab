import Foundation
import Synchronization
import TileCore

/// A fixed set of threads for the server's renders and encodes (CPU work of a fraction of a
/// millisecond to a few): one per core by default, so that a burst of requests for tiles not encoded
/// yet is worked through a few at a time, each encoder kept busy, instead of one thread per request
/// contending for the cores with the event loops. Never Swift's cooperative pool.
final class RenderThreads: Sendable {
    /// Jobs in order; a job taken is cleared from its slot at once (it holds what it renders: an image,
    /// a continuation), and the taken slots are dropped from time to time.
    private struct Queue {
        var jobs: [(@Sendable () -> Void)?] = []
        var head = 0
    }

    private let queue = Mutex(Queue())
    private let available: DispatchSemaphore

    static let shared = RenderThreads(count: ProcessInfo.processInfo.activeProcessorCount)

    init(count: Int) {
        available = DispatchSemaphore(value: 0)
        for index in 0..<max(1, count) {
            let thread = Thread { [self] in work() }
            thread.name = "tiler.render.\(index)"
            thread.start()
        }
    }

    private func work() {
        while true {
            available.wait()
            let job = queue.withLock { q -> (@Sendable () -> Void)? in
                guard q.head < q.jobs.count else { return nil }
                let job = q.jobs[q.head]
                q.jobs[q.head] = nil
                q.head += 1
                if q.head == q.jobs.count {
                    q.jobs.removeAll(keepingCapacity: true)
                    q.head = 0
                } else if q.head > 256, q.head * 2 > q.jobs.count {
                    q.jobs.removeFirst(q.head)
                    q.head = 0
                }
                return job
            }
            job?()
        }
    }

    /// Runs `work` on one of the threads, in the order submitted, and returns its result.
    func run<T: Sendable>(_ work: @escaping @Sendable () throws(TileError) -> T) async throws(TileError) -> T {
        let result: Result<T, TileError> = await withCheckedContinuation { continuation in
            queue.withLock {
                $0.jobs.append {
                    do throws(TileError) { continuation.resume(returning: .success(try work())) } catch {
                        continuation.resume(returning: .failure(error))
                    }
                }
            }
            available.signal()
        }
        return try result.get()
    }
}
