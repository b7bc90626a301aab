import Dispatch
import Foundation
import Testing
import TestSupport

/// The servers these tests start run on ``TestSupport/ServerExecutor``'s threads, not on Swift's
/// cooperative pool: the test holds every thread of the pool (one per core, as `activeProcessorCount`
/// counts them) with blocking work, as synchronous tests running beside it do, and a request the
/// router answers (a 404, made by the connection's own task) is still answered. On the pool, it waited
/// until the pool was free. (Requests that need the catalogue's refresh, an unstructured task, still
/// wait for the pool: see ``TestSupport/ServerExecutor``.)
@Suite("The test servers' executor")
struct ServerExecutorTests {
    /// Blocks the calling thread until `release` is signalled, after signalling `started`.
    static func hold(_ started: DispatchSemaphore, _ release: DispatchSemaphore) {
        started.signal()
        release.wait()
    }

    @Test("a test server answers while blocking work holds every thread of the cooperative pool")
    func answersWhileThePoolIsHeld() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await TileServerTests.withServer(folder) { base, _ in
            let port = try #require(base.split(separator: ":").last.flatMap { UInt16($0) })
            let connection = try LoopbackConnection(port: port)
            let (started, release) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
            // This task holds its own thread below; tasks hold the others (or other tests already do).
            let others = max(0, ProcessInfo.processInfo.activeProcessorCount - 1)
            for _ in 0..<others { Task.detached { Self.hold(started, release) } }
            defer {  // whatever happens below: a held pool would stop every other test
                for _ in 0..<others { release.signal() }
                connection.shutDown()
            }
            for _ in 0..<others { _ = started.wait(timeout: .now() + 10) }
            try connection.send(Data("GET /no-such-page HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8))
            let (bytes, _) = connection.read(timeout: .seconds(20), until: { $0.count >= 12 })
            #expect(String(decoding: bytes.prefix(12), as: UTF8.self) == "HTTP/1.1 404")
        }
    }
}
