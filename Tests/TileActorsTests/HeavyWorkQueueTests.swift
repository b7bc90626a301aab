import TestSupport
import Testing
import TestTraits
import TileActors

@Suite("HeavyWorkQueue", .ownThreads)
struct HeavyWorkQueueTests {
    enum Mark: Sendable, Equatable { case start(Int), end(Int) }

    @Test("never runs more than its limit, runs in FIFO order, and publishes matching counts", arguments: [1, 2])
    func limitAndOrder(limit: Int) async throws {
        let queue = HeavyWorkQueue(maximumConcurrency: limit)
        let recorder = Recorder<Mark>()
        // Each job holds its turn until its own gate opens: the test frees one turn at a time, so which
        // job the queue starts next is the queue's choice alone (two jobs that run at once may record
        // their starts in either order: the order the queue gave turns in is read only where one turn
        // was free).
        let gates = (0..<6).map { _ in Gate() }
        var tasks: [Task<Int, any Error>] = []
        for i in 0..<6 {
            tasks.append(
                Task {
                    try await queue.run {
                        await recorder.record(.start(i))
                        await gates[i].wait()
                        await recorder.record(.end(i))
                        return i
                    }
                })
            while queue.currentCounts.active + queue.currentCounts.pending < i + 1 { await Task.yield() }
        }
        #expect(queue.currentCounts == .init(pending: 6 - limit, active: limit))
        func starts() async -> [Int] { await recorder.events.compactMap { if case .start(let i) = $0 { i } else { nil } } }
        /// Whether `count` jobs have started within a minute (a wait for a state, not a time).
        func waitForStarts(_ count: Int) async -> Bool {
            let deadline = ContinuousClock.now + .seconds(60)
            while await starts().count < count, ContinuousClock.now < deadline { await Task.yield() }
            return await starts().count >= count
        }
        /// Lets every job end (after a failure: a job out of order would hold its turn for good).
        func openAll() async { for gate in gates { await gate.open() } }
        // The first turns go to the first jobs submitted.
        guard await waitForStarts(limit), Set(await starts()) == Set(0..<limit) else {
            Issue.record("the first turns went to \(await starts())")
            return await openAll()
        }
        // Each turn freed goes to the oldest job waiting.
        for i in 0..<6 {
            await gates[i].open()
            #expect(try await tasks[i].value == i)
            guard limit + i < 6 else { continue }
            guard await waitForStarts(limit + i + 1), await starts().last == limit + i else {
                Issue.record("after job \(i) ended, the jobs started were \(await starts()), not job \(limit + i) next")
                return await openAll()
            }
        }
        var running = 0
        for event in await recorder.events {
            switch event {
            case .start:
                running += 1
                #expect(running <= limit)
            case .end: running -= 1
            }
        }
        #expect(await starts().count == 6)
        #expect(queue.currentCounts == .init(pending: 0, active: 0))
    }

    @Test("a cancelled pending job never starts and leaves the counts")
    func cancelledPendingJobNeverStarts() async throws {
        let queue = HeavyWorkQueue(maximumConcurrency: 1)
        let recorder = Recorder<Int>()
        let gate = Gate()
        let first = Task {
            try await queue.run {
                await gate.wait(); await recorder.record(1)
            }
        }
        while queue.currentCounts.active == 0 { await Task.yield() }
        let second = Task { try await queue.run { await recorder.record(2) } }
        while queue.currentCounts.pending == 0 { await Task.yield() }
        second.cancel()
        await #expect(throws: CancellationError.self) { try await second.value }
        #expect(queue.currentCounts == .init(pending: 0, active: 1))
        await gate.open()
        try await first.value
        #expect(await recorder.events == [1])
    }

    @Test("the counts stream reports each change")
    func countsStream() async throws {
        let queue = HeavyWorkQueue(maximumConcurrency: 1)
        _ = try await queue.run { 1 }
        var seen: [HeavyWorkQueue.Counts] = []
        for await counts in queue.counts {
            seen.append(counts)
            if seen.count == 3 { break }
        }
        #expect(seen == [.init(pending: 0, active: 0), .init(pending: 0, active: 1), .init(pending: 0, active: 0)])
    }
}

/// A one-shot gate: waiters wait until it opens.
actor Gate {
    private var isOpen = false
    private var waiters: [CheckedContinuation<Void, Never>] = []
    func wait() async {
        if isOpen { return }
        await withCheckedContinuation { waiters.append($0) }
    }
    func open() {
        isOpen = true
        waiters.forEach { $0.resume() }
        waiters = []
    }
}
