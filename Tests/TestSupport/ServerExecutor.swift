import Foundation

/// A task executor of four threads of its own, for the servers tests run in their own process.
///
/// Swift's cooperative pool has a thread per core (two on CI), and it never takes a thread back from
/// the job running on it. Synchronous tests running beside a server (waiting for child processes,
/// building pyramids) can hold every pool thread for a minute; a server whose tasks ran on the pool
/// answered nothing meanwhile (CI, 2026-11-26: a request the routes answer at once got no answer in
/// 30 s). A server run in a task that prefers this executor (`Task(executorPreference:)`) keeps
/// answering what its connections' tasks answer themselves (child tasks: they inherit the preference),
/// and the kernel shares the cores between these threads and the pool's. The catalogue's own tasks
/// (lookups, builds, deadlines) are children of its service's task group, and inherit it too.
///
/// The threads block only while the queue is empty. ``TileCore/BlockingCallCheck`` still traps
/// blocking calls in route handlers here: its check is by thread name, and these are not its
/// exceptions.
public final class ServerExecutor: TaskExecutor, @unchecked Sendable {
    /// Started on first use; the threads end with the test process.
    public static let shared = ServerExecutor(name: "test-server", threads: 4)
    /// The threads ``OwnThreads`` runs tests on: apart from the servers', so that tests holding their
    /// thread never take one a server answers on.
    public static let blockingTests = ServerExecutor(name: "test-blocking", threads: 4)

    /// Guards `jobs` (a pthread mutex and condition: visible to ThreadSanitizer).
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []

    private init(name: String, threads: Int) {
        for index in 0..<threads {
            let thread = Thread { [self] in
                // The kernel's name of the thread too (`comm`, what ps and perf show): a thread starts
                // with its creator's, a pool thread's when the executor is first used from one.
                try? "\(name)-\(index)".write(toFile: "/proc/thread-self/comm", atomically: false, encoding: .utf8)
                run()
            }
            thread.name = "\(name)-\(index)"
            thread.start()
        }
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    private func run() {
        while true {
            condition.lock()
            while jobs.isEmpty { condition.wait() }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}
