import Foundation

/// The threads ``OwnThreads`` runs tests on: a task executor of threads of its own, apart from Swift's
/// cooperative pool.
///
/// The pool has a thread per core (two on CI), and it never takes a thread back from the job running on
/// it. Tests that hold their thread (synchronous decodes and builds, waits for child processes, polls)
/// run here instead, so the pool stays free for what awaits: the in-process servers of the server
/// suites, their catalogues' lookups and builds, the actors they call. (Before, the servers were given
/// an executor of their own instead.)
///
/// A job never waits for a thread: when none is idle, one more is started (a test holding its thread
/// while its child tasks, which prefer these threads too, run). How many tests run here at once is
/// bounded by ``OwnThreads`` instead (``TestSlots``). Idle threads wait for jobs.
public final class TestThreads: TaskExecutor, @unchecked Sendable {
    /// Started on first use; the threads end with the test process.
    public static let shared = TestThreads(name: "test-blocking")

    private let name: String
    /// Guards the rest (a pthread mutex and condition: visible to ThreadSanitizer).
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    /// Threads waiting for a job, and how many of them a job has already claimed (signalled, not yet
    /// awake): a job counts on an idle thread only if no other job has claimed it.
    private var idle = 0
    private var claimed = 0
    private var count = 0

    private init(name: String) { self.name = name }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        let starts = idle == claimed
        if starts {
            count += 1
        } else {
            claimed += 1
            condition.signal()
        }
        let index = count
        condition.unlock()
        if starts { start(index) }
    }

    private func start(_ index: Int) {
        let name = "\(self.name)-\(index)"
        let thread = Thread { [self] in
            // The kernel's name of the thread too (`comm`, what ps and perf show): a thread starts with
            // its creator's, a pool thread's when the executor is first used from one.
            try? name.write(toFile: "/proc/thread-self/comm", atomically: false, encoding: .utf8)
            run()
        }
        thread.name = name
        thread.start()
    }

    private func run() {
        while true {
            condition.lock()
            while jobs.isEmpty {
                idle += 1
                condition.wait()
                idle -= 1
                if claimed > 0 { claimed -= 1 }
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}

/// How many tests run on ``TestThreads`` at once: a test waits for a slot, suspended (holding no
/// thread), before its body starts; its deadlines start with it.
public final class TestSlots: @unchecked Sendable {
    /// As many as the machine has cores, and at least four.
    public static let shared = TestSlots(max(4, ProcessInfo.processInfo.activeProcessorCount))

    /// Guards `free` and `waiters`.
    private let lock = NSLock()
    private var free: Int
    private var waiters: [CheckedContinuation<Void, Never>] = []

    init(_ slots: Int) { free = slots }

    func acquire() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            lock.lock()
            if free > 0 {
                free -= 1
                lock.unlock()
                continuation.resume()
            } else {
                waiters.append(continuation)
                lock.unlock()
            }
        }
    }

    func release() {
        lock.lock()
        if waiters.isEmpty {
            free += 1
            lock.unlock()
        } else {
            let next = waiters.removeFirst()
            lock.unlock()
            next.resume()  // the slot passes on
        }
    }
}
