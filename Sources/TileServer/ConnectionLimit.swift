import HummingbirdCore
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Synchronization

/// Counts of a server's connections, readable from any thread; and, when the server has its maximum,
/// room made for the next: the connection that has waited longest for a request (``minimumWait`` at
/// least) is closed.
///
/// Without that, connections that send nothing, or a request's head a byte at a time, held every slot
/// until the idle timeout closed them (a minute by default, the head's own deadline), and whoever
/// opened them again at once kept every other client out (slowloris). A connection waiting for a
/// request has nothing in progress: closing it loses nothing (a client sends a request it had not sent
/// on a new connection, RFC 9112 9.3.1), and a client that sends its request as it connects is answered
/// long before it could be the oldest.
public final class ConnectionCounts: Sendable {
    private struct State {
        var open = 0
        var peak = 0
        var waits = 0
        var evictions = 0
        /// The connections' waits for a request, by connection.
        var waiting: [ObjectIdentifier: HeadWait] = [:]
        /// Those being closed to make room (counted as room already).
        var evicting: Set<ObjectIdentifier> = []
        /// Those found busy when they were to be closed (a request had come, an answer was still being
        /// sent), with the wait they were found in: passed over until they wait anew.
        var passedOver: [ObjectIdentifier: UInt64] = [:]
        /// Whether a timer will look again (the oldest wait too young, or none).
        var looksAgain = false
        /// When each warning was last logged (one a second at most: an attack makes thousands).
        var warned: (waits: UInt64, evictions: UInt64) = (0, 0)
    }

    private let state = NIOLockedValueBox(State())
    /// Where the looks again run: a connection's own registration may come after the server's first
    /// look (NIO adds its handlers in a later turn of its loop), so none need be there to run one.
    private let timers = MultiThreadedEventLoopGroup.singleton.any()

    /// How long a connection must have waited for a request before it is closed to make room: a
    /// browser's kept-alive connection between two tiles is not.
    static let minimumWait = TimeAmount.seconds(1)

    public init() {}

    /// Connections open now.
    public var open: Int { state.withLockedValue { $0.open } }
    /// The most connections open at once so far.
    public var peak: Int { state.withLockedValue { $0.peak } }
    /// How many times the server stopped accepting connections because it had its maximum.
    public var waits: Int { state.withLockedValue { $0.waits } }
    /// How many connections waiting for a request were closed to make room for new ones.
    public var evictions: Int { state.withLockedValue { $0.evictions } }

    func opened() { state.withLockedValue { ($0.open, $0.peak) = ($0.open + 1, max($0.peak, $0.open + 1)) } }
    func closed() { state.withLockedValue { $0.open -= 1 } }

    /// Counts a stop of the accepting; the count when it is to be logged (a second after the last), or nil.
    func waited() -> Int? {
        let now = NIODeadline.now().uptimeNanoseconds
        return state.withLockedValue {
            $0.waits += 1
            guard $0.warned.waits == 0 || now &- $0.warned.waits >= 1_000_000_000 else { return nil }
            $0.warned.waits = now
            return $0.waits
        }
    }

    /// The channels whose connection handler is in place now (what a test looks at when one stays open).
    var channelsTracked: [any Channel] { state.withLockedValue { $0.waiting.values.map(\.channel) } }

    /// The connections waiting for a request now, or lingering: those that may be closed to make room.
    var waitingForRequest: Int { state.withLockedValue { $0.waiting.values.count { $0.since.load(ordering: .relaxed) != 0 } } }

    /// A connection's wait, looked at from now until ``remove(_:)``.
    func add(_ wait: HeadWait) { state.withLockedValue { $0.waiting[ObjectIdentifier(wait)] = wait } }

    func remove(_ wait: HeadWait) {
        state.withLockedValue {
            $0.waiting[ObjectIdentifier(wait)] = nil
            $0.evicting.remove(ObjectIdentifier(wait))
            $0.passedOver[ObjectIdentifier(wait)] = nil
        }
    }

    private enum Step {
        case none
        case close(HeadWait, since: UInt64)
        case lookAgain(at: NIODeadline)
    }

    /// With `maximum` connections open (those being closed aside): closes the one that has waited
    /// longest for a request, if it has waited ``minimumWait``; otherwise looks again when it will have
    /// (or in ``minimumWait``, none waiting), while the server stays full. A connection closed makes
    /// Hummingbird accept the next.
    func makeRoom(maximum: Int, logger: Logger) {
        let now = NIODeadline.now().uptimeNanoseconds
        let minimum = UInt64(Self.minimumWait.nanoseconds)
        let step = state.withLockedValue { state -> Step in
            guard state.open - state.evicting.count >= maximum else { return .none }
            var (oldest, since): (HeadWait?, UInt64) = (nil, .max)
            for (key, wait) in state.waiting where !state.evicting.contains(key) {
                let waiting = wait.since.load(ordering: .relaxed)
                if waiting != 0, waiting < since, state.passedOver[key] != waiting { (oldest, since) = (wait, waiting) }
            }
            if let oldest, since <= now, now - since >= minimum {
                state.evicting.insert(ObjectIdentifier(oldest))
                return .close(oldest, since: since)
            }
            guard !state.looksAgain else { return .none }
            state.looksAgain = true
            return .lookAgain(at: .uptimeNanoseconds((oldest == nil ? now : since) &+ minimum))
        }
        switch step {
        case .none:
            return
        case .close(let wait, let since):
            wait.channel.eventLoop.execute {
                // Closed already (it is counted as room until it is gone).
                guard wait.channel.isActive else { return }
                // Still waiting since then (its wait is written on this loop), its last answer all sent:
                // closed. Otherwise (a request came meanwhile, a slow client still takes an answer)
                // another is looked for.
                let unsent = (try? wait.channel.syncOptions?.getOption(.bufferedWritableBytes)) ?? 0
                guard wait.since.load(ordering: .relaxed) == since, unsent == 0 else {
                    self.state.withLockedValue {
                        let key = ObjectIdentifier(wait)
                        $0.evicting.remove(key)
                        $0.passedOver[key] = since
                    }
                    return self.makeRoom(maximum: maximum, logger: logger)
                }
                let now = NIODeadline.now().uptimeNanoseconds
                let count = self.state.withLockedValue { state -> Int? in
                    state.evictions += 1
                    guard state.warned.evictions == 0 || now &- state.warned.evictions >= 1_000_000_000 else { return nil }
                    state.warned.evictions = now
                    return state.evictions
                }
                if let count {
                    logger.warning(
                        "connection limit reached: closed the connection waiting longest for a request (one a second logged)",
                        metadata: ["waited": "\(Int((Double(now &- since) / 1e9).rounded())) s", "limit": "\(maximum)", "times": "\(count)"])
                }
                wait.channel.close(promise: nil)
            }
        case .lookAgain(let deadline):
            timers.scheduleTask(deadline: deadline) {
                self.state.withLockedValue { $0.looksAgain = false }
                self.makeRoom(maximum: maximum, logger: logger)
            }
        }
    }
}

/// One connection's wait for a request, as the thread that accepts connections sees it.
final class HeadWait: Sendable {
    let channel: any Channel
    /// `NIODeadline.uptimeNanoseconds` since the connection has waited for a request's head (or
    /// lingered after its last answer); 0 while a request is in progress. Written on the channel's event
    /// loop only.
    let since = Atomic<UInt64>(0)

    init(channel: any Channel) { self.channel = channel }
}

/// Hummingbird's connection gate over ``ConnectionCounts``: past the maximum the server stops
/// accepting (the kernel's backlog holds new connections) until one closes, says so in the log, and
/// makes room (``ConnectionCounts/makeRoom(maximum:logger:)``).
struct ConnectionLimit: AvailableConnectionsDelegate {
    let maximum: Int
    let counts: ConnectionCounts
    let logger: Logger

    mutating func connectionOpened() { counts.opened() }
    mutating func connectionClosed() { counts.closed() }

    func isAcceptingNewConnections() -> Bool {
        guard counts.open >= maximum else { return true }
        if let waits = counts.waited() {
            logger.warning(
                "connection limit reached: new connections wait (one a second logged)",
                metadata: ["open": "\(counts.open)", "limit": "\(maximum)", "times": "\(waits)"])
        }
        counts.makeRoom(maximum: maximum, logger: logger)
        return false
    }
}
