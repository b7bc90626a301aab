import NIOConcurrencyHelpers
public import NIOPosix

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
    /// Who runs and who waits, under a lock: a waiter's cancellation handler (synchronous, on any
    /// thread) takes it out of the line at once. A pthread mutex (NIO's), which ThreadSanitizer sees.
    private let line = NIOLockedValueBox(Line())
    /// Where ``runBlocking(_:)``'s jobs run.
    private let threadPool: NIOThreadPool

    private struct Line {
        var active = 0
        var waiters: [(id: Int, continuation: CheckedContinuation<Void, any Error>)] = []
        var nextID = 0
        var counts: Counts { Counts(pending: waiters.count, active: active) }
    }

    /// Creates a queue.
    /// - Parameters:
    ///   - maximumConcurrency: jobs run at once, at least 1 (default 1).
    ///   - threadPool: where ``runBlocking(_:)``'s jobs run (default NIO's shared pool; a server passes
    ///     its own, the one all its blocking work shares).
    public init(maximumConcurrency: Int = 1, threadPool: NIOThreadPool = .singleton) {
        self.maximumConcurrency = max(1, maximumConcurrency)
        self.threadPool = threadPool
        (counts, countsContinuation) = AsyncStream.makeStream(of: Counts.self, bufferingPolicy: .unbounded)
        countsContinuation.yield(Counts(pending: 0, active: 0))
    }

    deinit { countsContinuation.finish() }

    /// The current counts.
    public nonisolated var currentCounts: Counts { line.withLockedValue { $0.counts } }

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

    /// Waits for a turn, then runs the blocking `job` (a decode, an encode, an fsync) on a thread of the
    /// queue's pool, never on Swift's cooperative pool; the caller's task is suspended meanwhile.
    /// - Returns: what `job` returns.
    /// - Throws: `CancellationError` when the caller is cancelled before the job starts (the job then
    ///   never runs), else what `job` throws. A job that has started runs to its end.
    public func runBlocking<T: Sendable>(_ job: @escaping @Sendable () throws -> T) async throws -> T {
        try await acquire()
        defer { release() }
        try Task.checkCancellation()
        return try await threadPool.blockingAnyError(job)
    }

    private nonisolated func acquire() async throws {
        try Task.checkCancellation()
        let id = line.withLockedValue { line -> Int? in
            if line.active < maximumConcurrency && line.waiters.isEmpty {
                line.active += 1
                countsContinuation.yield(line.counts)
                return nil
            }
            line.nextID += 1
            return line.nextID
        }
        guard let id else { return }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                // Under the lock: a cancellation either finds the waiter in the line, or comes before
                // it joins (the task is marked cancelled before its handler runs) and is seen here.
                let joined = line.withLockedValue { line -> Bool in
                    guard !Task.isCancelled else { return false }
                    line.waiters.append((id, continuation))
                    countsContinuation.yield(line.counts)
                    return true
                }
                if !joined { continuation.resume(throwing: CancellationError()) }
            }
        } onCancel: {
            // Not in the line: not joined yet (it will not), or its turn has come (it runs).
            let waiter = line.withLockedValue { line -> CheckedContinuation<Void, any Error>? in
                guard let index = line.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                defer { countsContinuation.yield(line.counts) }
                return line.waiters.remove(at: index).continuation
            }
            waiter?.resume(throwing: CancellationError())
        }
    }

    private nonisolated func release() {
        let next = line.withLockedValue { line -> CheckedContinuation<Void, any Error>? in
            defer { countsContinuation.yield(line.counts) }
            if line.waiters.isEmpty {
                line.active -= 1
                return nil
            }
            return line.waiters.removeFirst().continuation  // the turn passes on; active stays
        }
        next?.resume()
    }
}
