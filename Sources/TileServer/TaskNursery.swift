import NIOConcurrencyHelpers

/// Where the catalog's long-lived work runs: builds' feeds and watchers, lookups shared by concurrent
/// requests, waiters' deadlines, admin builds. Each job is a child of the one task group that
/// ``run(preferring:)`` holds (the catalog's service task, run beside the server), so none outlives
/// the service, a cancellation of the service cancels them all, and none is an unstructured `Task`.
///
/// A job spawned before a run (a catalog not started yet, or served again, as the tests do) waits for
/// it. One spawned while a run ends (its jobs cancelled, the group waiting for them) never runs: its
/// handle's ``Handle/value`` is the `ifNotRun` value given to ``spawn(ifNotRun:_:)``, at once.
final class TaskNursery: Sendable {
    /// A spawned job: cancel it, or wait for what it returns.
    struct Handle<Value: Sendable>: Sendable {
        fileprivate let job: Job<Value>
        /// Whether the job was spawned as a run ended: it never runs (its value is the `ifNotRun` given).
        let wasAbandoned: Bool

        /// Cancels the job's task (as `Task.cancel()` would): it ends at its next check.
        func cancel() { job.cancel() }

        /// What the job returned, once it has ended.
        var value: Value { get async { await job.value() } }

        /// Whether two handles are of the same job.
        func isSame(as other: Handle<Value>) -> Bool { job === other.job }
    }

    private enum Phase {
        /// No run yet, or between runs: jobs wait for the next.
        case idle
        /// Jobs are taken as they come.
        case running
        /// The run is ending: no job is taken any more.
        case ending
    }

    /// The jobs not started yet, and where the current run takes them from.
    private struct Line {
        var phase = Phase.idle
        var submit: AsyncStream<any Runnable>.Continuation?
        var generation = 0
        var waiting: [ObjectIdentifier: any Runnable] = [:]
    }

    /// A pthread mutex (NIO's): ThreadSanitizer sees its order, which it does not see of the standard
    /// library's `Mutex` on Linux (a futex of its own: CI's TSan stage reported races under it).
    private let line = NIOLockedValueBox(Line())

    /// Whether a run is ending: its jobs cancelled, no job taken any more (what the tests wait for).
    var isEnding: Bool { line.withLockedValue { $0.phase == .ending } }

    /// Runs `operation` as a child of the nursery's group.
    /// - Parameter ifNotRun: what the handle's value is when the job is spawned as a run ends.
    @discardableResult
    func spawn<Value: Sendable>(ifNotRun: Value, _ operation: @escaping @Sendable () async -> Value) -> Handle<Value> {
        let job = Job(operation, ifNotRun: ifNotRun)
        let taken = line.withLockedValue { line -> Bool in
            switch line.phase {
            case .ending: return false
            case .idle: line.waiting[ObjectIdentifier(job)] = job
            case .running:
                line.waiting[ObjectIdentifier(job)] = job
                line.submit?.yield(job)
            }
            return true
        }
        if !taken { job.abandon() }
        return Handle(job: job, wasAbandoned: !taken)
    }

    /// Runs `operation` as a child of the nursery's group.
    @discardableResult
    func spawn(_ operation: @escaping @Sendable () async -> Void) -> Handle<Void> {
        spawn(ifNotRun: (), operation)
    }

    /// Runs the jobs as they are spawned, each a child task preferring `executor`, until the calling
    /// task is cancelled; then cancels them and waits for them to end (the jobs spawned but not started
    /// by then are started too, cancelled: a job spawned during a run always ends). A run started while
    /// another runs takes the jobs over, and the other ends.
    func run(preferring executor: (any TaskExecutor)?) async {
        let (jobs, submit) = AsyncStream.makeStream(of: (any Runnable).self)
        let generation = line.withLockedValue { line in
            line.submit?.finish()
            (line.phase, line.submit) = (.running, submit)
            line.generation += 1
            for job in line.waiting.values { submit.yield(job) }
            return line.generation
        }
        let take = { @Sendable (job: any Runnable) -> Bool in
            self.line.withLockedValue { $0.waiting.removeValue(forKey: ObjectIdentifier(job)) } != nil
        }
        await withDiscardingTaskGroup { group in
            for await job in jobs where take(job) {
                group.addTask(executorPreference: executor) { await job.run() }
            }
            let left = line.withLockedValue { line -> [any Runnable] in
                guard line.generation == generation else { return [] }  // a newer run has them
                line.submit?.finish()
                (line.phase, line.submit) = (.ending, nil)
                defer { line.waiting = [:] }
                return Array(line.waiting.values)
            }
            for job in left { group.addTask(executorPreference: executor) { await job.run() } }
        }
        line.withLockedValue { line in
            if line.generation == generation { line.phase = .idle }
        }
    }
}

/// A job the nursery runs, whatever it returns.
private protocol Runnable: AnyObject, Sendable {
    func run() async
    /// Ends the job without running it.
    func abandon()
}

/// One job: its operation, and the state its handles and its task share.
private final class Job<Value: Sendable>: Runnable {
    private struct State {
        var isCancelled = false
        /// Set once the operation has returned.
        var isOver = false
        var result: Value?
        /// The job's watcher of cancellation, resumed by a cancel or by the operation's end.
        var watcher: CheckedContinuation<Void, Never>?
        var waiters: [CheckedContinuation<Value, Never>] = []
    }

    /// The operation, until it runs: let go of then, as a task lets go of its closure (what it
    /// captures may hold the handle: a build's watcher captures the build, which holds the watcher).
    private let operation: NIOLockedValueBox<(@Sendable () async -> Value)?>
    private let ifNotRun: Value
    private let state = NIOLockedValueBox(State())

    init(_ operation: @escaping @Sendable () async -> Value, ifNotRun: Value) {
        self.operation = NIOLockedValueBox(operation)
        self.ifNotRun = ifNotRun
    }

    /// The operation in a child task, beside a watcher that cancels it when ``cancel()`` is called.
    func run() async {
        guard let operation = operation.withLockedValue({ $0.take() }) else { return }
        let result = await withTaskGroup(of: Value?.self) { group in
            group.addTask { await operation() }
            group.addTask { [self] in
                await watchForCancel()
                return nil
            }
            var result: Value?
            while let next = await group.next() {
                if let next {
                    result = next
                    stopWatching()
                } else {
                    group.cancelAll()  // cancelled: the operation ends at its next check
                }
            }
            return result
        }
        finish(with: result!)  // the operation's child always returns, with its value
    }

    func abandon() {
        _ = operation.withLockedValue { $0.take() }
        finish(with: ifNotRun)
    }

    func cancel() {
        let watcher = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
            state.isCancelled = true
            defer { state.watcher = nil }
            return state.watcher
        }
        watcher?.resume()
    }

    func value() async -> Value {
        await withCheckedContinuation { continuation in
            let result = state.withLockedValue { state -> Value? in
                if let result = state.result { return result }
                state.waiters.append(continuation)
                return nil
            }
            if let result { continuation.resume(returning: result) }
        }
    }

    private func watchForCancel() async {
        await withCheckedContinuation { continuation in
            let now = state.withLockedValue { state -> Bool in
                if state.isCancelled || state.isOver { return true }
                state.watcher = continuation
                return false
            }
            if now { continuation.resume() }
        }
    }

    private func stopWatching() {
        let watcher = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
            state.isOver = true
            defer { state.watcher = nil }
            return state.watcher
        }
        watcher?.resume()
    }

    private func finish(with result: Value) {
        let waiters = state.withLockedValue { state -> [CheckedContinuation<Value, Never>] in
            state.isOver = true
            state.result = result
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: result) }
    }
}
