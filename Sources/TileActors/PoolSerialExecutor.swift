import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A serial executor whose jobs run one at a time, in order, on an injected `NIOThreadPool`: an actor
/// that uses it (``ImageBuilder``, ``ImageExporter``) runs its blocking C work (decoding, file writes) on
/// the pool the rest of the process's blocking work shares, never on Swift's cooperative pool and never
/// on a thread of its own.
///
/// After each job the thread goes back to the pool: the next job is submitted again, behind what others
/// submitted meanwhile, so a long build (a slice of decoding per job) never holds a thread a tile read
/// waits for. A pool that has stopped (a server shutting down) still runs the jobs, each on a thread
/// started for it: an actor's job is never dropped.
final class PoolSerialExecutor: SerialExecutor, Sendable {
    private let pool: NIOThreadPool
    /// The jobs waiting, and whether one of them is submitted to the pool (then the others wait behind it).
    private let line = NIOLockedValueBox<(jobs: CircularBuffer<UnownedJob>, submitted: Bool)>((CircularBuffer(), false))

    init(pool: NIOThreadPool) { self.pool = pool }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let submits = line.withLockedValue { line -> Bool in
            line.jobs.append(job)
            defer { line.submitted = true }
            return !line.submitted
        }
        if submits { submit() }
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor { UnownedSerialExecutor(ordinary: self) }

    private func submit() {
        pool.submit { [self] state in
            guard case .active = state else {
                // Called on the submitter's thread: the job runs on one of its own instead.
                NIOThreadPool.runOnThreadOfItsOwn { self.runFirst() }
                return
            }
            runFirst()
        }
    }

    /// Runs the first job waiting, then submits the next, if any.
    private func runFirst() {
        let job = line.withLockedValue { $0.jobs.removeFirst() }
        job.runSynchronously(on: asUnownedSerialExecutor())
        let more = line.withLockedValue { line -> Bool in
            line.submitted = !line.jobs.isEmpty
            return line.submitted
        }
        if more { submit() }
    }
}
