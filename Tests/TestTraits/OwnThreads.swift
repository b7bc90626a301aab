public import Testing

/// Runs a suite's tests on threads of their own (``TestThreads``), not on Swift's
/// cooperative pool: for tests that hold their thread on purpose, waiting for child processes or polling a
/// server they started. On the pool (a thread a core, two here) a few of them at once took every thread
/// for minutes, and everything else in the process that awaited (an actor's call, a `Task.sleep`) waited
/// behind them (a catalogue's lookup, in another suite, not run for two minutes on a loaded machine).
/// A synchronous test body runs on the executor its task prefers, and so do the default actors it calls.
/// At most ``TestSlots``' count of such tests run at once (the pool's width once throttled them), and
/// their deadlines are their own (``TestSupport/Deadline``), not `.timeLimit`'s, which counts the wait.
public struct OwnThreads: SuiteTrait, TestTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        // One of the slots first (a test case's scope, not a suite's: a suite holding one would keep its own
        // tests waiting), waited for suspended.
        if testCase != nil { await TestSlots.shared.acquire() }
        defer { if testCase != nil { TestSlots.shared.release() } }
        // A child task that prefers those threads (structured: the test's task-locals and cancellation
        // reach it): it starts there, and so does the test function, which runs on its caller's executor.
        // (The group ends before this returns: the function does not outlive the call.)
        try await withoutActuallyEscaping(function) { function in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask(executorPreference: TestThreads.shared) { try await function() }
                try await group.waitForAll()
            }
        }
    }
}

extension Trait where Self == OwnThreads {
    /// ``OwnThreads``.
    public static var ownThreads: Self { OwnThreads() }
}
