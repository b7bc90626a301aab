import NIOConcurrencyHelpers
import TileCore

/// How many renders (a region read, resized and encoded: up to seconds of CPU for a large one) a
/// server runs and keeps waiting, in all and for one client address. Renders that read and write at
/// most ``cheapPixels`` (a viewer's tiles: a millisecond or two each) run at once, as reads of stored
/// tiles do: a browser asks for a screenful of them at a time; but one client address has at most
/// ``readsPerClient`` of those under way.
public struct RenderLimits: Sendable, Hashable {
    /// Pixels read and written at most by a render that is not admitted, only run. Default 2^20
    /// (a 256-pixel tile read from its level and written is 2^17).
    public var cheapPixels: Int
    /// Renders running at once on the thread pool. Default: one fewer than its threads, at least one,
    /// so that a thread is always free for the pool's short work (file checks, store opens, reads of
    /// stored tiles) whatever renders are asked for.
    public var running: Int
    /// The memory the renders running at once may hold, in pixels of RGBA (4 bytes each): each render's
    /// footprint is the pixels it writes times what each holds (its copies, and its encoder's memory:
    /// 2 for a JPEG or a PNG, 3 for a WebP, 6 for an AVIF, whose encoder keeps about 20 bytes a pixel). A render past
    /// it waits its turn unless none runs, so the memory of large renders does not grow with the thread
    /// pool's size. Default 2^26 (256 MiB of RGBA: two 2^24-pixel JPEGs at once; such an AVIF runs alone).
    public var runningFootprint: Int
    /// Renders waiting for their turn, in all; one more is refused (503 with `Retry-After`). Default 32.
    public var waiting: Int
    /// Renders running or waiting for one client address; one more is refused. Default 4.
    public var perClient: Int
    /// Pixels (read from the level the render uses, plus written) of the renders running or waiting
    /// for one client address, past which another of its renders is refused; a client with none may
    /// always have one. Default 2^28.
    public var pixelsPerClient: Int
    /// Cheap renders and reads of stored tiles under way (on the thread pool or waiting for one of its
    /// threads) for one client address; one more is refused (503 with `Retry-After`). Default 256: a
    /// browser has at most 6 connections to a server, a load test or a proxy not trusted to name its
    /// clients may have hundreds; a client with thousands would otherwise queue that many reads ahead
    /// of everyone else's (600 connections asking 512-px regions: seconds).
    public var readsPerClient: Int

    /// - Parameters: see the properties; `threads` is the thread pool's size.
    public init(
        threads: Int, waiting: Int = 32, perClient: Int = 4, pixelsPerClient: Int = 1 << 28, cheapPixels: Int = 1 << 20,
        readsPerClient: Int = 256, runningFootprint: Int = 1 << 26
    ) {
        running = max(1, threads - 1)
        self.runningFootprint = max(1, runningFootprint)
        self.cheapPixels = max(0, cheapPixels)
        (self.waiting, self.perClient, self.pixelsPerClient) = (max(0, waiting), max(1, perClient), max(1, pixelsPerClient))
        self.readsPerClient = max(1, readsPerClient)
    }
}

/// Admits renders to the thread pool by ``RenderLimits``: a render waits its turn here (a
/// continuation, no thread held), first come first served; past the limits it is refused at once.
/// A render whose client has gone (its connection closed, or its side of it: ``peerClosed(_:)``) is
/// refused before it waits, dropped when its turn comes, and stopped between tile rows when running (``TileCore/TiledImage/renderEncoded(_:quality:lossless:effort:waitingUntil:isCancelled:)``).
final class RenderAdmission: Sendable {
    /// Who asks: an address, and whether its connection is still open (safe to call from any thread).
    struct Client: Sendable {
        var address: String
        var isConnected: @Sendable () -> Bool
        /// Whether the per-client limits apply (a library caller with no connection: not).
        var isCounted = true
        /// Its connection (its channel's identity), whose hang-up ``untilHangUp(of:_:)`` watches for.
        var connection: ObjectIdentifier?
    }

    /// What a render asking for its turn is told.
    private enum Turn: Sendable {
        case now
        /// Its client left before its turn.
        case gone
        case refused(String)
    }

    private struct Waiter {
        let client: Client
        let pixels: Int
        let footprint: Int
        let continuation: CheckedContinuation<Turn, Never>
    }

    private struct State {
        var running = 0
        /// The footprints of the renders running (``RenderLimits/runningFootprint``).
        var footprint = 0
        var queue: [Waiter] = []
        /// Renders running or waiting, and their pixels, by client address.
        var clients: [String: (count: Int, pixels: Int)] = [:]
        /// Cheap renders and reads under way, by client address.
        var reads: [String: Int] = [:]

        /// Whether a render of `footprint` may start beside those running: a thread for it, and room
        /// in ``RenderLimits/runningFootprint`` (always, when none runs).
        func fits(_ footprint: Int, _ limits: RenderLimits) -> Bool {
            running < limits.running && (running == 0 || self.footprint + footprint <= limits.runningFootprint)
        }
    }

    let limits: RenderLimits
    private let state = NIOLockedValueBox(State())
    /// Connections whose peer has closed its side (``peerClosed(_:)``), by the channel's identity, and
    /// what to do when one does (``untilHangUp(of:_:)``).
    private struct HangUps {
        var closed = Set<ObjectIdentifier>()
        var watchers: [ObjectIdentifier: [Int: @Sendable () -> Void]] = [:]
        var nextWatcher = 0
    }
    private let hangUps = NIOLockedValueBox(HangUps())

    init(limits: RenderLimits) { self.limits = limits }

    /// Notes that the peer of `connection` (a channel's identity) has closed its side: the server lets
    /// peers half-close (Hummingbird's channels do, to answer what they asked), so the channel stays
    /// open, but a client that hangs up while its render runs or waits is gone for this purpose, as
    /// nginx takes it (499): the render stops. Until ``connectionEnded(_:)``.
    func peerClosed(_ connection: ObjectIdentifier) {
        let watchers = hangUps.withLockedValue { hangUps in
            hangUps.closed.insert(connection)
            return hangUps.watchers.removeValue(forKey: connection).map { Array($0.values) } ?? []
        }
        for watcher in watchers { watcher() }
    }

    /// Forgets `connection` (its channel is gone: its identity may be another's next).
    func connectionEnded(_ connection: ObjectIdentifier) {
        hangUps.withLockedValue { hangUps in
            hangUps.closed.remove(connection)
            hangUps.watchers[connection] = nil
        }
    }

    /// Whether the peer of `connection` has closed its side.
    func hasHungUp(_ connection: ObjectIdentifier) -> Bool { hangUps.withLockedValue { $0.closed.contains(connection) } }

    /// Whether `client` has gone: its connection closed, or its side of it.
    func hasGone(_ client: Client?) -> Bool { client.map { !$0.isConnected() } ?? false }

    /// `wait` in a child task, cancelled when `client`'s peer hangs up (at once if it has), or when
    /// the caller's task is cancelled. For waits that are not renders (a render checks
    /// ``Client/isConnected`` itself), such as a request's wait for rows still being built.
    func untilHangUp<T: Sendable>(of client: Client?, _ wait: @escaping @Sendable () async -> T) async -> T {
        guard let connection = client?.connection else { return await wait() }
        return await withTaskGroup(of: T?.self) { group in
            group.addTask { await wait() }
            group.addTask {
                await self.hangUp(of: connection)
                return nil
            }
            // The first to end cancels the other: the wait's value is kept whichever it was.
            var value: T?
            for await result in group {
                if let result { value = result }
                group.cancelAll()
            }
            return value!  // the wait's child always gives one
        }
    }

    /// Returns when the peer of `connection` hangs up (at once if it has), or when the task is cancelled.
    private func hangUp(of connection: ObjectIdentifier) async {
        let key = hangUps.withLockedValue { hangUps in
            hangUps.nextWatcher += 1
            return hangUps.nextWatcher
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                // Registered, or resumed at once, under the lock that a hang-up and a cancellation take
                // to find it: it is resumed exactly once.
                let now = hangUps.withLockedValue { hangUps -> Bool in
                    if hangUps.closed.contains(connection) || Task.isCancelled { return true }
                    hangUps.watchers[connection, default: [:]][key] = { continuation.resume() }
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let watcher = hangUps.withLockedValue { hangUps -> (@Sendable () -> Void)? in
                let watcher = hangUps.watchers[connection]?.removeValue(forKey: key)
                if hangUps.watchers[connection]?.isEmpty == true { hangUps.watchers[connection] = nil }
                return watcher
            }
            watcher?()
        }
    }

    /// Renders running and waiting now.
    var counts: (running: Int, waiting: Int) { state.withLockedValue { ($0.running, $0.queue.count) } }

    /// Renders running and waiting now, and the footprint of those running (RGBA pixels: ``RenderLimits/runningFootprint``).
    var usage: (running: Int, waiting: Int, footprint: Int) { state.withLockedValue { ($0.running, $0.queue.count, $0.footprint) } }

    /// Runs `render` once admitted.
    /// - Throws: ``TileCore/TileError/Code/notReady`` past the limits (the server is busy: 503),
    ///   `.cancelled` when the client left before its turn; what `render` throws.
    /// - Parameters:
    ///   - client: who asks; nil (a caller of the library's own, no connection): only the server-wide
    ///     limits apply.
    ///   - pixels: the pixels it reads and writes.
    ///   - footprint: the memory it holds, in RGBA pixels (``RenderLimits/runningFootprint``); nil:
    ///     `pixels`.
    func run<T>(for client: Client?, pixels: Int, footprint: Int? = nil, _ render: () async throws(TileError) -> T) async throws(TileError)
        -> T
    {
        let footprint = footprint ?? pixels
        if pixels <= limits.cheapPixels { return try await read(for: client, render) }
        let client = client ?? Client(address: "", isConnected: { true }, isCounted: false)
        guard client.isConnected() else { throw TileError(.cancelled, "the client went away before its render was admitted") }
        // Decided and queued under one lock: a render ending meanwhile sees the waiter.
        let turn = await withCheckedContinuation { (continuation: CheckedContinuation<Turn, Never>) in
            var gone: [CheckedContinuation<Turn, Never>] = []
            let now = state.withLockedValue { state -> Turn? in
                // Waiters whose clients have left count no more (they would be dropped at their turn).
                gone = Self.dropGone(&state)
                let mine: (count: Int, pixels: Int) = client.isCounted ? state.clients[client.address, default: (0, 0)] : (0, 0)
                if mine.count >= limits.perClient { return .refused("\(mine.count) renders of this client are running or waiting") }
                if mine.count > 0, mine.pixels + pixels > limits.pixelsPerClient {
                    return .refused("this client's renders running or waiting read and write \(mine.pixels) pixels")
                }
                let runs = state.queue.isEmpty && state.fits(footprint, limits)
                guard runs || state.queue.count < limits.waiting else { return .refused("\(state.queue.count) renders are waiting") }
                if client.isCounted { state.clients[client.address] = (mine.count + 1, mine.pixels + pixels) }
                if runs {
                    (state.running, state.footprint) = (state.running + 1, state.footprint + footprint)
                    return .now
                }
                state.queue.append(Waiter(client: client, pixels: pixels, footprint: footprint, continuation: continuation))
                return nil
            }
            for waiter in gone { waiter.resume(returning: .gone) }
            if let now { continuation.resume(returning: now) }
        }
        switch turn {
        case .refused(let why): throw TileError(.notReady, "the server is busy rendering (\(why)); try again shortly")
        case .gone: throw TileError(.cancelled, "the client went away before its render's turn")
        case .now: break
        }
        defer { finish(client.isCounted ? client.address : nil, pixels: pixels, footprint: footprint) }
        return try await render()
    }

    /// Runs `read` (a stored tile's read, or a cheap render) at once, unless its client already has
    /// ``RenderLimits/readsPerClient`` under way.
    /// - Throws: ``TileCore/TileError/Code/notReady`` past that (503); what `read` throws.
    func read<T>(for client: Client?, _ read: () async throws(TileError) -> T) async throws(TileError) -> T {
        guard let client, client.isCounted else { return try await read() }
        let underWay = state.withLockedValue { state -> Int? in
            let count = state.reads[client.address, default: 0]
            guard count < limits.readsPerClient else { return count }
            state.reads[client.address] = count + 1
            return nil
        }
        if let underWay { throw TileError(.notReady, "the server is busy: \(underWay) reads of this client are under way; try again shortly") }
        defer {
            state.withLockedValue { state in
                let count = state.reads[client.address, default: 1] - 1
                state.reads[client.address] = count > 0 ? count : nil
            }
        }
        return try await read()
    }

    /// A render's end: its client's count down, and the waiting renders whose clients are still there
    /// started in their order while they fit (those whose clients left are dropped on the way).
    private func finish(_ address: String?, pixels: Int, footprint: Int) {
        var dropped: [CheckedContinuation<Turn, Never>] = []
        let next = state.withLockedValue { state -> [CheckedContinuation<Turn, Never>] in
            (state.running, state.footprint) = (state.running - 1, state.footprint - footprint)
            if let address { Self.forget(address, pixels: pixels, in: &state) }
            var started: [CheckedContinuation<Turn, Never>] = []
            while let waiter = state.queue.first {
                guard waiter.client.isConnected() else {
                    state.queue.removeFirst()
                    if waiter.client.isCounted { Self.forget(waiter.client.address, pixels: waiter.pixels, in: &state) }
                    dropped.append(waiter.continuation)
                    continue
                }
                guard state.fits(waiter.footprint, limits) else { break }
                state.queue.removeFirst()
                (state.running, state.footprint) = (state.running + 1, state.footprint + waiter.footprint)
                started.append(waiter.continuation)
            }
            return started
        }
        for continuation in dropped { continuation.resume(returning: .gone) }
        for continuation in next { continuation.resume(returning: .now) }
    }

    /// Takes the waiters whose clients have left out of the queue and the clients' counts.
    /// - Returns: their continuations, to resume (with `.gone`) once the lock is released.
    private static func dropGone(_ state: inout State) -> [CheckedContinuation<Turn, Never>] {
        var gone: [CheckedContinuation<Turn, Never>] = []
        var kept: [Waiter] = []
        for waiter in state.queue {
            if waiter.client.isConnected() {
                kept.append(waiter)
                continue
            }
            if waiter.client.isCounted { forget(waiter.client.address, pixels: waiter.pixels, in: &state) }
            gone.append(waiter.continuation)
        }
        state.queue = kept
        return gone
    }

    private static func forget(_ address: String, pixels: Int, in state: inout State) {
        let mine = state.clients[address, default: (1, pixels)]
        state.clients[address] = mine.count <= 1 ? nil : (mine.count - 1, mine.pixels - pixels)
    }
}
