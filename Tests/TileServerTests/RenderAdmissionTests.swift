import Foundation
import NIOConcurrencyHelpers
import NIOPosix
import Prometheus
import Testing
import TestSupport
import TileCore
@testable import TileServer

/// Renders are admitted to the thread pool (issue 37, point 1): a few at once, a few waiting, a few
/// for each client; those whose clients left are dropped at their turn; `/ready`, `/health` and
/// `/metrics` answer whatever the pool is doing. Driven by gates, never by time.
@Suite("Render admission")
struct RenderAdmissionTests {
    /// A render that runs until its gate opens, saying when it started.
    final class Gate: Sendable {
        private let (opened, open) = AsyncStream.makeStream(of: Void.self)
        private let (started, start) = AsyncStream.makeStream(of: Void.self)

        func run() async {
            start.yield()
            for await _ in opened { break }
        }
        func waitUntilStarted() async { for await _ in started { break } }
        func release() { open.yield() }
    }

    static func client(_ address: String, connected: NIOLockedValueBox<Bool> = NIOLockedValueBox(true)) -> RenderAdmission.Client {
        RenderAdmission.Client(address: address, isConnected: { connected.withLockedValue { $0 } })
    }

    /// Runs a render of `pixels` for `client` in a task of its own: its outcome (the order it ran in,
    /// or the error's code), recorded in `log`.
    static func ask(
        _ admission: RenderAdmission, _ client: RenderAdmission.Client, pixels: Int = 1 << 22, footprint: Int? = nil, name: String,
        gate: Gate? = nil, log: NIOLockedValueBox<[String]>
    ) -> Task<Void, Never> {
        Task {
            do throws(TileError) {
                try await admission.run(for: client, pixels: pixels, footprint: footprint) { () throws(TileError) in
                    log.withLockedValue { $0.append("ran \(name)") }
                    await gate?.run()
                }
            } catch {
                log.withLockedValue { $0.append("\(name): \(error.code)") }
            }
        }
    }

    /// Waits until `count` renders wait (a state, not a time).
    static func waitUntilWaiting(_ admission: RenderAdmission, _ count: Int) async {
        while admission.counts.waiting < count { await Task.yield() }
    }

    @Test("past the renders running, renders wait their turn first come first served; past the waiting ones they are refused (503)")
    func queueInOrder() async throws {
        let admission = RenderAdmission(limits: RenderLimits(threads: 2, waiting: 2, perClient: 4))
        #expect(admission.limits.running == 1)
        let log = NIOLockedValueBox<[String]>([])
        let first = Gate()
        let running = Self.ask(admission, Self.client("a"), name: "1", gate: first, log: log)
        await first.waitUntilStarted()
        let second = Self.ask(admission, Self.client("b"), name: "2", log: log)
        await Self.waitUntilWaiting(admission, 1)
        let third = Self.ask(admission, Self.client("c"), name: "3", log: log)
        await Self.waitUntilWaiting(admission, 2)
        await Self.ask(admission, Self.client("d"), name: "4", log: log).value  // refused at once
        #expect(log.withLockedValue { $0 } == ["ran 1", "4: notReady"])
        first.release()
        for task in [running, second, third] { await task.value }
        #expect(log.withLockedValue { $0 } == ["ran 1", "4: notReady", "ran 2", "ran 3"])
        #expect(admission.counts == (0, 0))
    }

    @Test("renders running hold at most their footprint: one that does not fit waits (a thread free or not), those behind it too; one alone runs")
    func footprint() async throws {
        let admission = RenderAdmission(limits: RenderLimits(threads: 4, waiting: 8, runningFootprint: 10))
        #expect(admission.limits.running == 3)
        let log = NIOLockedValueBox<[String]>([])
        // Larger than the whole budget, with nothing running: it runs.
        await Self.ask(admission, Self.client("a"), footprint: 100, name: "alone", log: log).value
        let (a, b, c) = (Gate(), Gate(), Gate())
        let first = Self.ask(admission, Self.client("a"), footprint: 6, name: "A", gate: a, log: log)
        await a.waitUntilStarted()
        // Each waits or runs (a state either way): running would be the failure.
        let second = Self.ask(admission, Self.client("b"), footprint: 6, name: "B", gate: b, log: log)
        while admission.counts.waiting + admission.counts.running < 2 { await Task.yield() }
        let third = Self.ask(admission, Self.client("c"), footprint: 1, name: "C", gate: c, log: log)
        while admission.counts.waiting + admission.counts.running < 3 { await Task.yield() }
        #expect(admission.counts == (1, 2), "B does not fit beside A (6 + 6 > 10); C, which would, waits behind it")
        #expect(admission.usage.footprint == 6, "A's alone (what /metrics says, times 4 bytes)")
        a.release()
        await b.waitUntilStarted()
        await c.waitUntilStarted()
        #expect(admission.counts == (2, 0), "A's end lets both in (6 + 1)")
        #expect(admission.usage.footprint == 7)
        b.release()
        c.release()
        for task in [first, second, third] { await task.value }
        #expect(log.withLockedValue { $0 } == ["ran alone", "ran A", "ran B", "ran C"])
        #expect(admission.counts == (0, 0) && admission.usage.footprint == 0)
    }

    @Test("a client has at most its renders running or waiting, and pixels; others are admitted meanwhile")
    func perClient() async throws {
        let admission = RenderAdmission(limits: RenderLimits(threads: 2, waiting: 8, perClient: 2, pixelsPerClient: 3 << 22))
        let log = NIOLockedValueBox<[String]>([])
        let gate = Gate()
        let running = Self.ask(admission, Self.client("a"), name: "a1", gate: gate, log: log)
        await gate.waitUntilStarted()
        let waiting = Self.ask(admission, Self.client("a"), name: "a2", log: log)
        await Self.waitUntilWaiting(admission, 1)
        await Self.ask(admission, Self.client("a"), name: "a3", log: log).value  // a's third: refused
        let other = Self.ask(admission, Self.client("b"), name: "b1", log: log)
        await Self.waitUntilWaiting(admission, 2)
        // b has one waiting of 2^22 pixels; another of 2^24 would pass its 3 x 2^22.
        await Self.ask(admission, Self.client("b"), pixels: 1 << 24, name: "b2", log: log).value
        #expect(log.withLockedValue { $0 } == ["ran a1", "a3: notReady", "b2: notReady"])
        gate.release()
        for task in [running, waiting, other] { await task.value }
        #expect(log.withLockedValue { $0 } == ["ran a1", "a3: notReady", "b2: notReady", "ran a2", "ran b1"])
    }

    @Test("a waiting render whose client left is dropped at its turn, without running; cheap renders are never held")
    func goneClientsAndCheapRenders() async throws {
        let admission = RenderAdmission(limits: RenderLimits(threads: 1, waiting: 8, perClient: 8, cheapPixels: 1 << 20))
        let log = NIOLockedValueBox<[String]>([])
        let gate = Gate()
        let running = Self.ask(admission, Self.client("a"), name: "1", gate: gate, log: log)
        await gate.waitUntilStarted()
        let left = NIOLockedValueBox(true)
        let gone = Self.ask(admission, Self.client("b", connected: left), name: "gone", log: log)
        await Self.waitUntilWaiting(admission, 1)
        let stays = Self.ask(admission, Self.client("c"), name: "stays", log: log)
        await Self.waitUntilWaiting(admission, 2)
        // A tile's render (2^17 pixels) runs at once, past the running and waiting ones.
        await Self.ask(admission, Self.client("d"), pixels: 1 << 17, name: "tile", log: log).value
        left.withLockedValue { $0 = false }
        gate.release()
        for task in [running, gone, stays] { await task.value }
        // The two resumed at once: in either order.
        let outcomes = log.withLockedValue { $0 }
        #expect(outcomes.prefix(2) == ["ran 1", "ran tile"] && Set(outcomes.dropFirst(2)) == ["gone: cancelled", "ran stays"], "\(outcomes)")
        #expect(admission.counts == (0, 0))
    }

    @Test("a client has at most its reads under way (cheap renders, stored tiles' reads): one more is refused, another client's run")
    func readsPerClient() async throws {
        let admission = RenderAdmission(limits: RenderLimits(threads: 2, readsPerClient: 2))
        let log = NIOLockedValueBox<[String]>([])
        let gates = [Gate(), Gate()]
        // Two tiles' renders (2^17 pixels each) of client a, held under way.
        let held = gates.indices.map { Self.ask(admission, Self.client("a"), pixels: 1 << 17, name: "a\($0)", gate: gates[$0], log: log) }
        for gate in gates { await gate.waitUntilStarted() }
        await Self.ask(admission, Self.client("a"), pixels: 1 << 17, name: "a2", log: log).value
        await Self.ask(admission, Self.client("b"), pixels: 1 << 17, name: "b", log: log).value
        // A stored tile's read is counted with them.
        var refused: TileError?
        do throws(TileError) { _ = try await admission.read(for: Self.client("a")) { () throws(TileError) in 1 } } catch { refused = error }
        #expect(refused?.code == .notReady)
        for gate in gates { gate.release() }
        for task in held { await task.value }
        await Self.ask(admission, Self.client("a"), pixels: 1 << 17, name: "a3", log: log).value  // room again
        let outcomes = log.withLockedValue { $0 }
        #expect(Set(outcomes.prefix(2)) == ["ran a0", "ran a1"] && Array(outcomes.dropFirst(2)) == ["a2: notReady", "ran b", "ran a3"], "\(outcomes)")
    }

    @Test("a client's waiting renders whose connections have closed stop counting against it at its next request")
    func goneWaitersFreeTheirClient() async throws {
        let admission = RenderAdmission(limits: RenderLimits(threads: 2, waiting: 8, perClient: 1))
        let log = NIOLockedValueBox<[String]>([])
        let gate = Gate()
        let running = Self.ask(admission, Self.client("a"), name: "a", gate: gate, log: log)
        await gate.waitUntilStarted()
        let open = NIOLockedValueBox(true)
        let first = Self.ask(admission, Self.client("b", connected: open), name: "b1", log: log)
        await Self.waitUntilWaiting(admission, 1)
        open.withLockedValue { $0 = false }  // b1's connection closes while it waits
        let second = Self.ask(admission, Self.client("b"), name: "b2", log: log)  // admitted: b1 no longer counts
        await first.value
        await Self.waitUntilWaiting(admission, 1)
        gate.release()
        for task in [running, second] { await task.value }
        #expect(log.withLockedValue { $0 } == ["ran a", "b1: cancelled", "ran b2"])
    }

    @Test("a peer that closes its side is gone: a wait it started ends, a later one ends at once, its render is dropped; others are untouched")
    func hangUps() async throws {
        let admission = RenderAdmission(limits: RenderLimits(threads: 1, waiting: 8, perClient: 8))
        // Connections are told apart by their channels' identities: two objects (kept alive to the
        // end) stand for them here.
        let channels = (NSObject(), NSObject())
        defer { withExtendedLifetime(channels) {} }
        let (mine, other) = (ObjectIdentifier(channels.0), ObjectIdentifier(channels.1))
        let client: @Sendable (ObjectIdentifier) -> RenderAdmission.Client = { id in
            RenderAdmission.Client(address: "a", isConnected: { !admission.hasHungUp(id) }, connection: id)
        }
        // A wait that would never end but for a cancellation; started, then the peer hangs up.
        let (started, start) = AsyncStream.makeStream(of: Void.self)
        let waiting = Task {
            await admission.untilHangUp(of: client(mine)) { @Sendable () async -> Bool in
                start.yield()
                return (try? await Task.sleep(for: .seconds(86_400))) != nil
            }
        }
        for await _ in started { break }
        #expect(!admission.hasGone(client(mine)))
        admission.peerClosed(mine)
        #expect(await waiting.value == false, "the wait was cancelled")
        #expect(admission.hasGone(client(mine)) && !admission.hasGone(client(other)))
        // A wait after the hang-up is cancelled before it begins.
        let late = await admission.untilHangUp(of: client(mine)) { @Sendable () async -> Bool in (try? await Task.sleep(for: .seconds(86_400))) != nil
        }
        #expect(late == false)
        // Its render waiting behind another's is dropped at its turn.
        let log = NIOLockedValueBox<[String]>([])
        let gate = Gate()
        let running = Self.ask(admission, client(other), name: "other", gate: gate, log: log)
        await gate.waitUntilStarted()
        let dropped = Self.ask(admission, client(mine), name: "mine", log: log)
        await dropped.value  // refused at once: its client is gone before it waits
        gate.release()
        await running.value
        #expect(log.withLockedValue { $0 } == ["ran other", "mine: cancelled"])
        // Once its channel is gone, its identity is forgotten (another connection may have it next).
        admission.connectionEnded(mine)
        #expect(!admission.hasGone(client(mine)))
    }

    @Test("a render stops between tile rows once its client has gone")
    func runningRenderStops() throws {
        let jpeg = try JPEGEncoder.encode(pixels: Synthetic.smooth(width: 1300, height: 900), width: 1300, height: 900)
        let image = try TileBuilder.build(data: jpeg)
        let request = try ImageRequest(path: "full/max/0/default.png").resolve(width: 1300, height: 900, limits: .default)
        let asked = NIOLockedValueBox(0)
        let error = try #require(throws: TileError.self) {
            try image.renderEncoded(
                request,
                isCancelled: {
                    asked.withLockedValue {
                        $0 += 1; return $0 > 2
                    }
                })
        }
        #expect(error.code == .cancelled)
        #expect(asked.withLockedValue { $0 } == 3, "asked once a tile row, stopped at the third of four")
    }

    @Test("/ready, /health and /metrics answer while every thread of the pool is held")
    func probesDoNotWaitOnThePool() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let pool = NIOThreadPool(numberOfThreads: 1)
        pool.start()
        let catalog = try ImageCatalog(root: folder, cache: "\(folder)/.cache", threadPool: pool)
        var server = TileServer(catalog: catalog)
        server.metricsRegistry = PrometheusCollectorRegistry()
        try await TileServerTests.withServer(server) { base, _ in
            let port = UInt16(base.split(separator: ":").last!)!
            // The pool's one thread held until the probes have answered.
            let held = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
            let holder = Task {
                try await pool.runIfActive {
                    held.signal(); release.wait()
                }
            }
            await withCheckedContinuation { continuation in
                DispatchQueue.global().async {
                    held.wait()
                    continuation.resume()
                }
            }
            for path in ["/ready", "/health", "/metrics"] {
                let reply = try await RequestGuardTests.send(port, "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                #expect(reply.status == 200, "\(path): \(reply.status)")
            }
            release.signal()
            try await holder.value
        }
        try await pool.shutdownGracefully()
    }
}
