import NIOConcurrencyHelpers

/// A result handed from the thread that made it (a thread pool's) to the task
/// that awaits it, through a lock.
///
/// The continuation that wakes the task already orders the two for the program. ThreadSanitizer
/// cannot see that ordering on Linux (Swift 6.3): the runtime hands the woken task to Dispatch by a
/// call that TSan does not intercept, so the task's first look at what the thread made (a store
/// opened on the pool) is reported as a race. Putting the result behind a pthread mutex (the
/// thread's unlock, then the task's lock) makes the ordering visible, so that the TSan stage reports
/// only real races. Used by the blocking helper (`NIOThreadPool.blocking`).
package final class ResultHandoff<Value: Sendable>: Sendable {
    private let slot = NIOLockedValueBox<Value?>(nil)

    package init() {}

    /// Keeps `value` for ``take()``; called once, by the thread that made it, before it wakes the task.
    package func put(_ value: Value) { slot.withLockedValue { $0 = value } }

    /// The value ``put(_:)`` kept. Traps when nothing was put: the task was woken before its result
    /// was handed over (a programming error).
    package func take() -> Value {
        slot.withLockedValue { value in
            guard let taken = value else { preconditionFailure("a result taken before it was put") }
            value = nil
            return taken
        }
    }
}
