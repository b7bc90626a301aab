import Testing
import TestSupport
@testable import TileServer

/// The catalog's task group: jobs wait for a run, run in it, are cancelled one by one or with it, and
/// none is left hanging when a run ends.
@Suite("The catalog's task nursery")
struct TaskNurseryTests {
    @Test("a job spawned before the run waits for it; its value is what it returned")
    func waitsForRun() async {
        let nursery = TaskNursery()
        let job = nursery.spawn(ifNotRun: 0) { 42 }
        await withDiscardingTaskGroup { group in
            group.addTask { await nursery.run(preferring: nil) }
            #expect(await job.value == 42)
            group.cancelAll()
        }
    }

    @Test("cancel() cancels the job's task (a sleep of an hour ends at once); the run's cancellation cancels the others")
    func cancellation() async {
        let nursery = TaskNursery()
        await withDiscardingTaskGroup { group in
            group.addTask { await nursery.run(preferring: nil) }
            let sleeper = nursery.spawn(ifNotRun: false) { (try? await Task.sleep(for: .seconds(3600))) == nil }
            sleeper.cancel()
            #expect(await sleeper.value == true, "the sleep was cancelled")
            let other = nursery.spawn(ifNotRun: false) { (try? await Task.sleep(for: .seconds(3600))) == nil }
            group.cancelAll()
            #expect(await other.value == true, "the run's cancellation reached it")
        }
    }

    @Test("a job spawned once the run ends is never run: its value is ifNotRun, at once; a later run takes new jobs")
    func ending() async {
        let nursery = TaskNursery()
        let (started, didStart) = AsyncStream.makeStream(of: Void.self)
        let (late, lateIn) = AsyncStream.makeStream(of: TaskNursery.Handle<Int>.self)
        await withDiscardingTaskGroup { group in
            group.addTask { await nursery.run(preferring: nil) }
            // A job that, once cancelled (the run ending), spawns another: as the admin build's loop does.
            // It waits for the state in which the run takes no job any more (the run waits for this job).
            nursery.spawn {
                didStart.yield()
                while !nursery.isEnding { await Task.yield() }
                lateIn.yield(nursery.spawn(ifNotRun: -1) { 1 })
                lateIn.finish()
            }
            for await _ in started { break }
            group.cancelAll()
        }
        var handles = late.makeAsyncIterator()
        let spawnedLate = await handles.next()
        #expect(await spawnedLate?.value == -1 && spawnedLate?.wasAbandoned == true)
        // Served again: a new run takes the jobs spawned after.
        await withDiscardingTaskGroup { group in
            group.addTask { await nursery.run(preferring: nil) }
            #expect(await nursery.spawn(ifNotRun: 0) { 7 }.value == 7)
            group.cancelAll()
        }
    }

    @Test("a job spawned as the run is cancelled, before it ends, always ends: not run, or run cancelled; never run as if live")
    func spawnedWhileCancelled() async {
        // Which of the two happens depends on when the run's loop sees its cancellation: both are right.
        for _ in 0..<50 {
            let nursery = TaskNursery()
            let (started, didStart) = AsyncStream.makeStream(of: Void.self)
            let (late, lateIn) = AsyncStream.makeStream(of: TaskNursery.Handle<Int>.self)
            await withDiscardingTaskGroup { group in
                group.addTask { await nursery.run(preferring: nil) }
                nursery.spawn {
                    didStart.yield()
                    while !Task.isCancelled { await Task.yield() }
                    lateIn.yield(nursery.spawn(ifNotRun: -1) { Task.isCancelled ? 2 : 1 })
                    lateIn.finish()
                }
                for await _ in started { break }
                group.cancelAll()
            }
            var handles = late.makeAsyncIterator()
            let value = await handles.next()?.value
            #expect(value == -1 || value == 2, "not run (-1) or run cancelled (2), never run live (1)")
        }
    }
}
