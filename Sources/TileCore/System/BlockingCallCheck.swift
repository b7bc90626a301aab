#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// A check, for tests, that blocking work (file system calls, decoding, encoding) never runs on a
/// thread that must not block: a SwiftNIO event loop (threads named `NIO-ELT-...`), or Swift's
/// cooperative pool while a task runs inside ``withNonBlockingScope(_:)`` (a server's request
/// handlers). Blocking work belongs on a thread pool: SwiftNIO's `NIOThreadPool` (threads named
/// `TP-#N`, `SGLTN-TP-#N` for its shared one), where `ImageBuilder`'s and `ImageExporter`'s serial
/// executors run their jobs too, or a thread of its own.
///
/// Off unless ``enable()`` is called: each check reads the thread's name from `/proc`. When on, a
/// blocking call in the wrong place stops the process with a message naming the call and the thread.
package enum BlockingCallCheck {
    private static let isEnabled = Atomic<Bool>(false)

    /// Set by ``withNonBlockingScope(_:)`` for the task it runs.
    @TaskLocal private static var isNonBlockingScope = false

    /// Turns the check on for the rest of the process.
    package static func enable() { isEnabled.store(true, ordering: .relaxed) }

    /// Runs `body` as code that must not block: with the check on, a blocking call made by its task
    /// itself (on the cooperative pool) traps; work it hands to other threads is not checked.
    package static func withNonBlockingScope<R>(_ body: () async throws -> R) async rethrows -> R {
        try await $isNonBlockingScope.withValue(true, operation: body)
    }

    /// Traps when the check is on and the calling thread must not block.
    /// - Parameter operation: the blocking call, for the message.
    package static func check(_ operation: @autoclosure () -> String) {
        guard isEnabled.load(ordering: .relaxed) else { return }
        let name = threadName()
        if name.hasPrefix("NIO-ELT") { fatalError("blocking call on an event loop (\(name)): \(operation())") }
        // Swift's global executor runs on Dispatch's root queue threads ("...default-qos"); the actors
        // with executors of their own run on a thread pool's, which may block.
        if isNonBlockingScope, withUnsafeCurrentTask(body: { $0 != nil }), !name.contains("TP-#") {
            fatalError("blocking call on Swift's cooperative pool (\(name)) in a non-blocking scope: \(operation())")
        }
    }

    /// The calling thread's name (`/proc/thread-self/comm`, at most 15 bytes).
    private static func threadName() -> String {
        let raw = open("/proc/thread-self/comm", O_RDONLY | O_CLOEXEC)
        guard raw >= 0 else { return "" }
        let fd = OwnedDescriptor(adopting: raw)
        var bytes = [UInt8](repeating: 0, count: 32)
        let count = read(fd.raw, &bytes, bytes.count)
        guard count > 0 else { return "" }
        let end = bytes[..<count].firstIndex(of: 10) ?? count
        return String(decoding: bytes[..<end], as: UTF8.self)
    }
}
