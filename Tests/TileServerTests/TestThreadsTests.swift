import Dispatch
import AsyncHTTPClient
import Foundation
import Testing
import TestSupport
import TestTraits

/// The in-process servers of these suites run on Swift's cooperative pool, as in production; the tests
/// that hold their thread run on ``TestTraits/TestThreads`` (``TestTraits/OwnThreads``). The two never
/// wait for each other: with eight of those threads held by blocking work, a server still answers, a
/// request its router answers (a 404) and one that goes through the catalogue (an `info.json`); and a
/// job for those threads meanwhile runs on one more.
@Suite("The test servers and the blocking tests' threads")
struct TestThreadsTests {
    @Test("a test server answers while blocking work holds eight of the blocking tests' threads; one more job still runs")
    func answersWhileTheTestThreadsAreHeld() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await TileServerTests.withServer(folder) { (base: String, client: HTTPClient) async throws in
            let (started, starting) = AsyncStream.makeStream(of: Void.self)
            let release = DispatchSemaphore(value: 0)
            let count = 8
            let holders = (0..<count).map { _ in
                Task(executorPreference: TestThreads.shared) {
                    starting.yield()
                    release.wait()
                }
            }
            var released = false
            defer {  // whatever happens below: held threads would stop every blocking test
                if !released { for _ in 0..<count { release.signal() } }
            }
            var iterator = started.makeAsyncIterator()
            for _ in 0..<count { _ = await iterator.next() }
            #expect(try await TileServerTests.get(client, "\(base)/no-such-page").status == 404)
            #expect(try await TileServerTests.get(client, "\(base)/iiif/3/photo/info.json").status == 200)
            let more = Task(executorPreference: TestThreads.shared) { true }
            #expect(await more.value)
            for _ in 0..<count { release.signal() }
            released = true
            for holder in holders { await holder.value }
        }
    }
}
