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
        let gate = Gate()
        // The first `limit` jobs hold their turns until all jobs are submitted, so order is decided.
        var tasks: [Task<Int, any Error>] = []
        for i in 0..<6 {
            tasks.append(
                Task {
                    try await queue.run {
                        await recorder.record(.start(i))
                        if i < limit { await gate.wait() }
                        await Task.yield()
                        await recorder.record(.end(i))
                        return i
                    }
                })
            while queue.currentCounts.active + queue.currentCounts.pending < i + 1 { await Task.yield() }
        }
        #expect(await queue.currentCounts == .init(pending: 6 - limit, active: limit))
        await gate.open()
        for (i, task) in tasks.enumerated() { #expect(try await task.value == i) }
        let events = await recorder.events
        var running = 0
        var starts: [Int] = []
        for event in events {
            switch event {
            case .start(let i):
                running += 1
                starts.append(i)
                #expect(running <= limit)
            case .end: running -= 1
            }
        }
        #expect(starts == Array(0..<6))
        #expect(await queue.currentCounts == .init(pending: 0, active: 0))
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
        #expect(await queue.currentCounts == .init(pending: 0, active: 1))
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
