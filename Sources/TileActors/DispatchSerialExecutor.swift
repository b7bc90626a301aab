import Dispatch

/// A serial executor over a private dispatch queue: an actor that uses it runs its blocking C work
/// (libjpeg decoding, file writes) on that queue's thread, never on the cooperative thread pool.
///
/// `DispatchSerialQueue` cannot be an actor's executor on Linux; this is the small stand-in.
final class DispatchSerialExecutor: SerialExecutor, @unchecked Sendable {
    // @unchecked: the only state is the queue, which is itself thread-safe.
    private let queue: DispatchQueue

    init(label: String) { queue = DispatchQueue(label: label) }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedSerialExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor { UnownedSerialExecutor(ordinary: self) }
}
