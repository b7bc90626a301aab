import Dispatch
import Foundation
import NIOConcurrencyHelpers
import NIOPosix
import Testing
import TileActors
import TestSupport
import TileCore

/// The concurrency defects of issue 11, each checked for what its fix promises.
@Suite("Concurrency: blocking work, loader reuse, one end of a build")
struct ConcurrencyDefectTests {
    @Test("blocking jobs run on the queue's thread pool: eight jobs that wait for each other all start on a pool of eight")
    func blockingJobsLeaveTheCooperativePool() async throws {
        // Each job blocks its thread until all eight have started. On Swift's cooperative pool (as
        // many threads as cores, 2 here) they could not all start; on a pool of eight threads they do.
        let pool = NIOThreadPool(numberOfThreads: 8)
        pool.start()
        let queue = HeavyWorkQueue(maximumConcurrency: 8, threadPool: pool)
        let threads = NIOLockedValueBox<Set<String>>([])
        let started = DispatchGroup()
        for _ in 0..<8 { started.enter() }
        let allStarted = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    (try? await queue.runBlocking { () -> Bool in
                        let name = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
                        threads.withLockedValue { _ = $0.insert(name.trimmingCharacters(in: .newlines)) }
                        started.leave()
                        return started.wait(timeout: .now() + 20) == .success
                    }) ?? false
                }
            }
            var results: [Bool] = []
            for await result in group { results.append(result) }
            return results
        }
        #expect(allStarted == Array(repeating: true, count: 8))
        // NIO names its pools' threads TP-#0...TP-#7.
        #expect(threads.withLockedValue { $0 } == Set((0..<8).map { "TP-#\($0)" }))
        try await pool.shutdownGracefully()
    }

    @Test("a pool that is not running still runs a builder's jobs and the queue's blocking work, on threads named as a pool's")
    func stoppedPool() async throws {
        let pool = NIOThreadPool(numberOfThreads: 1)  // never started: it takes no work
        let queue = HeavyWorkQueue(threadPool: pool)
        let name = try await queue.runBlocking { (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "" }
        #expect(name.trimmingCharacters(in: .newlines) == "TP-#stopped")
        let data = try Inputs.jpeg(width: 300, height: 200)
        let builder = try ImageBuilder(threadPool: pool)
        try await builder.append(data)
        let tiles = try await builder.finish().allTiles()
        #expect(tiles == (try TileBuilder.build(data: data).allTiles()))
    }

    /// Threads of this process now inside `openat` (`/proc/self/task/*/syscall`: its number first).
    static func threadsOpening() -> Int {
        #if arch(x86_64)
        let openat = "257"
        #else
        let openat = "56"
        #endif
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.filter { task in
            let call = FileFacts.procText("/proc/self/task/\(task)/syscall") ?? ""
            return call.split(separator: " ").first == Substring(openat)
        }.count
    }

    @Test(
        "file sources wait for their bytes off the cooperative pool: more FIFOs without a writer yet than it has threads hold none of them")
    func fileSourcesLeaveTheCooperativePool() async throws {
        let data = try Inputs.jpeg(width: 300, height: 200)
        let folder = try Inputs.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        // More than the cooperative pool has threads (one a core).
        let fifos = (0..<(ProcessInfo.processInfo.activeProcessorCount + 2)).map { folder.appendingPathComponent("fifo\($0)").path }
        for fifo in fifos { #expect(mkfifo(fifo, 0o600) == 0) }
        let expected = try TileBuilder.build(data: data).allTiles()
        try await withThrowingTaskGroup(of: [[UInt8]].self) { group in
            for fifo in fifos {
                group.addTask {
                    let builder = try ImageBuilder()
                    try await FileImageSource(path: fifo).feed(into: builder)
                    return try await builder.finish().allTiles()
                }
            }
            // Every feed waits in `open` for a writer. On the cooperative pool (one thread a core) fewer
            // could, and this task could not run again until a writer came: it would hang here.
            let deadline = ContinuousClock.now + .seconds(60)
            while Self.threadsOpening() < fifos.count, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
            #expect(Self.threadsOpening() >= fifos.count, "the feeds did not all wait in open within 60 s")
            for fifo in fifos {
                Thread.detachNewThread {
                    guard let handle = FileHandle(forWritingAtPath: fifo) else { return }
                    handle.write(data)
                    try? handle.close()
                }
            }
            for try await tiles in group { #expect(tiles == expected) }
        }
    }

    @Test("a loader used again does not pre-cancel the indices cancelled in its previous batch")
    func loaderReuseForgetsCancellations() async throws {
        let data = try Inputs.jpeg(width: 300, height: 200)
        func sources() -> [any ImageSource] { (0..<3).map { _ in ChunkSequenceSource(name: "x", chunks: [data].async) } }
        let loader = ImageLoader(maximumConcurrency: 3)
        async let first = loader.load(sources())
        await loader.cancel(1)  // during the first batch, or just after it: either way it names that batch
        _ = await first
        let second = await loader.load(sources())
        #expect(second.failures.isEmpty, "\(second.failures.map(\.result))")
    }

    @Test("every progress report is delivered before load returns, the last one the complete state")
    func progressEndsBeforeLoadReturns() async throws {
        let data = try Inputs.jpeg(width: 600, height: 500)
        let returned = NIOLockedValueBox(false)
        let late = NIOLockedValueBox(0)
        let last = NIOLockedValueBox<ImageBuilder.State?>(nil)
        let sources: [any ImageSource] = [ChunkSequenceSource(name: "x", chunks: [data].async)]
        _ = await ImageLoader().load(
            sources,
            onProgress: { _, progress in
                if returned.withLockedValue({ $0 }) { late.withLockedValue { $0 += 1 } }
                last.withLockedValue { $0 = progress.state }
            })
        returned.withLockedValue { $0 = true }
        #expect(last.withLockedValue { $0 } == .complete)
        #expect(late.withLockedValue { $0 } == 0)
    }

    @Test("a cancelled byte source is reported as cancellation, not as an I/O error")
    func cancellationIsCancellation() async throws {
        let builder = try ImageBuilder()
        let chunks = AsyncThrowingStream<Data, any Error> { continuation in
            continuation.finish(throwing: CancellationError())
        }
        let error = await #expect(throws: TileError.self) { try await builder.build(from: chunks) }
        #expect(error?.code == .cancelled)
        #expect(await builder.currentState == .cancelled)
    }

    @Test("a failed build leaves the budget's accounts when fail returns, not later")
    func failureUnregistersAtOnce() async throws {
        let budget = DiskCacheBudget(dirtyByteThreshold: 1 << 40, totalByteBudget: 1 << 40)
        let data = try Inputs.jpeg(width: 600, height: 500)
        let builder = try ImageBuilder(budget: budget)
        try await builder.append(data.prefix(data.count / 2))
        #expect(await budget.storeCount == 1)
        await builder.fail(TileError(.io, "the source failed"))
        #expect(await budget.storeCount == 0)
        #expect(await builder.currentState == .failed(TileError(.io, "the source failed")))
    }

    @Test("an append made while another is still running is refused and leaves the build intact")
    func overlappingAppendsAreRefused() async throws {
        // The first append decodes a large first half slice by slice; each slice ends with an await on
        // the budget actor, where a second call can get in. The second append (the second half) is
        // made once the first has reported progress, so it never comes first. With the fix it is
        // refused while the first runs (and nothing mixes); without it, its slices would interleave.
        // An attempt where the first append finishes before the second arrives proves nothing either
        // way, so up to five attempts are made; the image must be right in every one.
        let data = try Inputs.jpeg(width: 3000, height: 2000)
        let expected = try TileBuilder.build(data: data).allTiles()
        let half = data.count / 2
        var refusals = 0
        for _ in 0..<5 where refusals == 0 {
            let budget = DiskCacheBudget(dirtyByteThreshold: 1 << 40, totalByteBudget: 1 << 40)
            let builder = try ImageBuilder(budget: budget)
            let first = Task { try await builder.append(data.prefix(half)) }
            for await _ in builder.progress { break }
            var secondRefused = false
            do { try await builder.append(data.suffix(from: half)) } catch {
                #expect(error.code == .invalidArgument, "\(error)")
                secondRefused = true
            }
            try await first.value
            if secondRefused {
                refusals += 1
                try await builder.append(data.suffix(from: half))
            }
            #expect(try await builder.finish().allTiles() == expected)
        }
        #expect(refusals > 0, "the second append never overlapped the first in five attempts")
    }

    @Test("a failed eviction is reported as an event instead of being swallowed")
    func failedEvictionIsReported() async throws {
        let folder = try Inputs.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("a.tiles").path
        var options = BuildOptions()
        options.storage = .persistent(path: path)
        _ = try TileBuilder.build(data: try Inputs.jpeg(width: 300, height: 200), options: options)
        let budget = DiskCacheBudget(dirtyByteThreshold: 1 << 40, totalByteBudget: 1)
        let id = await budget.register(image: try TiledImage.open(store: path), path: path)
        // The store is damaged behind the budget's back: removing it as a store now fails.
        try FileManager.default.removeItem(atPath: "\(path)/manifest.json")
        await budget.close(id)
        // The first event about the store after the close: a failure, not a quiet success or nothing.
        var outcome: DiskCacheBudget.Event?
        for await event in budget.events {
            if case .flushed = event { continue }
            outcome = event
            break
        }
        guard case .failed(let operation, let failedPath, let error) = outcome else {
            Issue.record("the eviction of a damaged store was reported as \(String(describing: outcome)), not as a failure")
            return
        }
        #expect(operation == "evict")
        #expect(failedPath == path)
        #expect(error.code == .invalidStore)
    }
}

extension Array where Element: Sendable {
    /// The elements as an async sequence, one chunk each.
    var async: AsyncStream<Element> {
        AsyncStream { continuation in
            for element in self { continuation.yield(element) }
            continuation.finish()
        }
    }
}
