/// Runs memory-heavy jobs (whole-image decodes, thumbnails, exports) at most `maximumConcurrency` at a
/// time, in the order they were submitted.
///
/// A job that is cancelled while it waits leaves the queue without running. The counts of pending and
/// active jobs are published on ``counts`` each time they change, so an app can show "optimizing 3
/// photos...".
public actor HeavyWorkQueue {
    /// How many jobs wait and how many run.
    public struct Counts: Sendable, Hashable, CustomStringConvertible {
        public var pending: Int
        public var active: Int
        public init(pending: Int, active: Int) {
            self.pending = pending
            self.active = active
        }
        public var description: String { "\(pending) pending, \(active) active" }
    }

    /// The most jobs that run at once.
    public nonisolated let maximumConcurrency: Int
    /// Every change of the counts, starting with the current ones. One consumer.
    public nonisolated let counts: AsyncStream<Counts>
    private let countsContinuation: AsyncStream<Counts>.Continuation
    private var active = 0
    private var waiters: [(id: Int, continuation: CheckedContinuation<Void, any Error>)] = []
    private var nextID = 0

    /// Creates a queue.
    /// - Parameter maximumConcurrency: jobs run at once, at least 1 (default 1).
    public init(maximumConcurrency: Int = 1) {
        self.maximumConcurrency = max(1, maximumConcurrency)
        (counts, countsContinuation) = AsyncStream.makeStream(of: Counts.self, bufferingPolicy: .unbounded)
        countsContinuation.yield(Counts(pending: 0, active: 0))
    }

    deinit { countsContinuation.finish() }

    /// The current counts.
    public var currentCounts: Counts { Counts(pending: waiters.count, active: active) }

    /// Waits for a turn, then runs `job` in the caller's task. For blocking work use
    /// ``runBlocking(_:)``: `job` here runs on the caller's executor.
    /// - Returns: what `job` returns.
    /// - Throws: `CancellationError` when the caller is cancelled before the job starts (the job then
    ///   never runs), else what `job` throws.
    public func run<T: Sendable>(_ job: @Sendable () async throws -> T) async throws -> T {
        try await acquire()
        defer { release() }
        try Task.checkCancellation()  // cancelled just as its turn came: it still never starts
        return try await job()
    }

    /// Waits for a turn, then runs the blocking `job` (a decode, an encode, an fsync) on a thread of
    /// its own, never on Swift's cooperative pool; the caller's task is suspended meanwhile.
    /// - Returns: what `job` returns.
    /// - Throws: `CancellationError` when the caller is cancelled before the job starts (the job then
    ///   never runs), else what `job` throws. A job that has started runs to its end.
    public func runBlocking<T: Sendable>(_ job: @escaping @Sendable () throws -> T) async throws -> T {
        try await acquire()
        defer { release() }
        try Task.checkCancellation()
        return try await BlockingWork.run(job)
    }

    private func acquire() async throws {
        try Task.checkCancellation()
        if active < maximumConcurrency && waiters.isEmpty {
            active += 1
            publish()
            return
        }
        let id = nextID
        nextID += 1
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                waiters.append((id, continuation))
                publish()
            }
        } onCancel: {
            Task { await self.cancelWaiter(id) }
        }
    }

    private func cancelWaiter(_ id: Int) {
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return }
        let waiter = waiters.remove(at: index)
        publish()
        waiter.continuation.resume(throwing: CancellationError())
    }

    private func release() {
        if waiters.isEmpty {
            active -= 1
        } else {
            waiters.removeFirst().continuation.resume()  // the turn passes on; active stays
        }
        publish()
    }

    private func publish() { countsContinuation.yield(currentCounts) }
}
