import AsyncHTTPClient
import Foundation
import Testing
import TestSupport
import TileCore
@testable import TileServer

/// Password checks take turns (``AccessState/concurrentChecks`` at once, ``AccessState/waitingChecks``
/// waiting): logins from many clients cannot take the blocking pool from everything else. Over HTTP on
/// loopback; the turns the test holds itself stand for other clients' logins (one client is limited to
/// five attempts a minute, too few to fill the queue).
@Suite("Login checks take turns", .serialized)
struct AccessLoginTurnTests {
    /// Waits until `policy`'s checks are `running` and `waiting` (states, not times).
    static func until(_ policy: AccessPolicy, running: Int, waiting: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while policy.state.checks != (running, waiting) {
            #expect(ContinuousClock.now < deadline, "checks \(policy.state.checks)")
            guard ContinuousClock.now < deadline else { return }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    @Test("a login waits for its turn and is checked once a turn is given back")
    func waitsForItsTurn() async throws {
        let folder = try AccessTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let policy = AccessTests.policy()
        try await TileServerTests.withServer(try AccessTests.server(folder, policy: policy)) { base, client in
            for _ in 0..<AccessState.concurrentChecks { #expect(await policy.state.beginCheck()) }
            let login = Task { try await AccessTests.logIn(client, base, user: "alice", password: "wonderland-7") }
            try await Self.until(policy, running: AccessState.concurrentChecks, waiting: 1)
            for _ in 0..<AccessState.concurrentChecks { policy.state.endCheck() }
            let (reply, session) = try await login.value
            #expect(reply.status == 200 && session != nil)
            try await Self.until(policy, running: 0, waiting: 0)
        }
    }

    @Test("past the logins waiting, 503 with Retry-After at once, and the attempt is not counted")
    func refusedPastTheQueue() async throws {
        let folder = try AccessTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let policy = AccessTests.policy()
        try await TileServerTests.withServer(try AccessTests.server(folder, policy: policy)) { base, client in
            // Every turn taken, and every place in the queue.
            for _ in 0..<AccessState.concurrentChecks { #expect(await policy.state.beginCheck()) }
            let waiters = (0..<AccessState.waitingChecks).map { _ in Task { await policy.state.beginCheck() } }
            try await Self.until(policy, running: AccessState.concurrentChecks, waiting: AccessState.waitingChecks)
            for _ in 0..<AccessState.failuresAllowed + 1 {
                let (reply, session) = try await AccessTests.logIn(client, base, user: "alice", password: "wonderland-7")
                #expect(reply.status == 503 && reply.headers["retry-after"] == "2" && session == nil, "\(reply.status)")
            }
            // Given back: each waiter's turn comes, then is given back too.
            for _ in 0..<AccessState.concurrentChecks { policy.state.endCheck() }
            for waiter in waiters {
                #expect(await waiter.value)
                policy.state.endCheck()
            }
            try await Self.until(policy, running: 0, waiting: 0)
            // The refused attempts were not counted: five wrong passwords are checked, the sixth is not.
            var statuses: [Int] = []
            for _ in 0..<AccessState.failuresAllowed + 1 {
                statuses.append(try await AccessTests.logIn(client, base, user: "alice", password: "guess").0.status)
            }
            #expect(statuses == Array(repeating: 401, count: AccessState.failuresAllowed) + [429], "\(statuses)")
        }
    }
}
