import Foundation
import Logging
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// A swift-log handler that never blocks its caller: a line is queued where it is logged and written
/// to standard error by a thread of its own, so an event loop or a request's task never waits on a
/// terminal or a full pipe. Past ``LineWriter/maximumWaiting`` lines waiting, new ones are dropped
/// and counted (a line says how many, once the writer catches up).
struct BackgroundLogHandler: LogHandler {
    static let writer = LineWriter()
    let label: String
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]

    init(label: String) { self.label = label }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var merged = metadata
        if let extra = event.metadata { merged.merge(extra) { _, new in new } }
        Self.writer.enqueue(
            .init(date: Date(), level: event.level, label: label, source: event.source, message: "\(event.message)", metadata: merged))
    }
}

/// The thread that writes queued log lines to standard error.
final class LineWriter: Sendable {
    struct Line: Sendable {
        var date: Date
        var level: Logger.Level
        var label: String
        var source: String
        var message: String
        var metadata: Logger.Metadata
    }

    static let maximumWaiting = 10_000
    private let waiting = NIOLockedValueBox<(lines: [Line], dropped: Int)>(([], 0))
    private let wake = DispatchSemaphore(value: 0)

    init() {
        let thread = Thread { [self] in run() }
        thread.name = "tiler.log"
        thread.start()
    }

    func enqueue(_ line: Line) {
        let added = waiting.withLockedValue { state -> Bool in
            guard state.lines.count < Self.maximumWaiting else {
                state.dropped += 1
                return false
            }
            state.lines.append(line)
            return state.lines.count == 1
        }
        if added { wake.signal() }
    }

    private func run() {
        let formatter = ISO8601DateFormatter()
        while true {
            wake.wait()
            let (lines, dropped) = waiting.withLockedValue { state in
                defer { state = ([], 0) }
                return (state.lines, state.dropped)
            }
            var text = ""
            for line in lines {
                let fields = line.metadata.sorted { $0.key < $1.key }.map { " \($0.key)=\($0.value)" }.joined()
                text += "\(formatter.string(from: line.date)) \(line.level) \(line.label):\(fields) [\(line.source)] \(line.message)\n"
            }
            if dropped > 0 { text += "\(formatter.string(from: Date())) warning tiler: \(dropped) log lines dropped (the log could not keep up)\n" }
            var bytes = Array(text.utf8)[...]
            while !bytes.isEmpty {
                let written = bytes.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
                if written < 0 && errno == EINTR { continue }
                if written <= 0 { break }
                bytes = bytes.dropFirst(written)
            }
        }
    }
}
