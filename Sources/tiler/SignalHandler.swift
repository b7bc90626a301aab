import ServiceLifecycle
import UnixSignals

/// A service that runs `action` each time one of the signals it took comes, until the service group
/// shuts down.
struct SignalHandler: Service {
    let signals: UnixSignalsSequence
    let action: @Sendable () -> Void

    /// Takes `signal` for the process from now on (its default action, for `SIGHUP`, would end it):
    /// made before the server says where it listens, a signal sent once it has is never missed.
    init(trapping signal: UnixSignal, action: @escaping @Sendable () -> Void) async {
        signals = await UnixSignalsSequence(trapping: signal)
        self.action = action
    }

    func run() async throws {
        for await _ in signals.cancelOnGracefulShutdown() { action() }
    }
}
