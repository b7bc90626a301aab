import Dispatch
import Foundation

/// A wait for work that might hang (a FIFO opened, a walk that was once quadratic), with its deadline
/// counted from the call: `.timeLimit`'s is counted from when the test was scheduled, and a test that
/// waits its turn for a thread (``TestTraits/OwnThreads``) would spend it waiting.
public enum Deadline {
    private final class Outcome<T>: @unchecked Sendable {
        // @unchecked: `value` is written once by the worker before `done` is signalled and read by the
        // caller only after the wait for `done` succeeded.
        var value: Result<T, any Error>?
        let done = DispatchSemaphore(value: 0)
    }

    /// Runs `body` on a thread of its own and waits for it at most `limit`.
    /// - Returns: what `body` returned or threw; nil when it had not ended by then (the thread is left
    ///   to end on its own; the caller records the failure).
    public static func run<T>(within limit: Duration, _ body: @escaping @Sendable () throws -> T) -> Result<T, any Error>? {
        let outcome = Outcome<T>()
        Thread.detachNewThread {
            outcome.value = Result { try body() }
            outcome.done.signal()
        }
        let (seconds, attoseconds) = limit.components
        let nanoseconds = Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
        guard outcome.done.wait(timeout: .now() + .nanoseconds(nanoseconds)) == .success else { return nil }
        return outcome.value
    }
}
