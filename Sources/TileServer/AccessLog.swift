import Foundation
import NIOConcurrencyHelpers
public import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// One line per answered request, in the Common Log Format (what nginx's and Apache's `common` logs
/// write, so the usual log tools read it), or in the combined format (nginx's default: the same line,
/// then the `Referer` and `User-Agent` quoted):
///
///     127.0.0.1 - - [27/Nov/2026:06:01:09 +0000] "GET /dzi/photo_files/11/0_0.jpg HTTP/1.1" 200 18342
///
/// A request's thread only queues a few integers and the strings it already holds (its client's
/// address, made once per connection; its method and target); the lines are formatted and written
/// by a thread of the log's own, many to one `write`, woken once per batch (``linger``). Past
/// ``maximumWaiting`` lines waiting, new ones are dropped and counted (a line says how many once the
/// writer catches up): a slow terminal or a full pipe never slows the answers.
///
/// A log written to a file (``init(path:format:)``) is reopened by ``reopen()`` (what `tiler serve` does
/// on `SIGHUP`): after `logrotate` has renamed it, the next lines go to a new file at the path.
public final class AccessLog: Sendable {
    /// What each line holds.
    public enum Format: String, Sendable, CaseIterable {
        /// `client - - [date] "request line" status bytes`: nginx's and Apache's `common`.
        case common
        /// The common line, then `"referer" "user agent"` (`"-"` when the request had none): nginx's
        /// default `combined`.
        case combined
    }

    /// Lines queued at most while the writer catches up.
    public static let maximumWaiting = 65_536
    /// Bytes of request targets (and referers and user agents) queued at most (a stalled output and long
    /// targets cannot make the queue grow past this).
    public static let maximumWaitingBytes = 16 << 20
    /// A target's bytes written at most (and a referer's, a user agent's); a longer one is cut, and ends with `...`.
    public static let maximumTargetBytes = 4096

    struct Entry: Sendable {
        var seconds: Int
        var client: String?
        var method: String
        var target: String
        var version: (major: Int, minor: Int)
        var status: Int
        var bytes: Int
        /// The request's `Referer` and `User-Agent`: queued only in the combined format.
        var referer: String? = nil
        var userAgent: String? = nil
    }

    /// What each line holds.
    public let format: Format
    private let waiting = NIOLockedValueBox<(entries: [Entry], bytes: Int, dropped: Int, reopen: Bool)>(([], 0, 0, false))
    /// Signalled by the line that finds the queue empty (once per batch), and by ``reopen()``.
    private let wake = DispatchSemaphore(value: 0)
    /// Never signalled: the writer's linger once woken (``linger``).
    private let pause = DispatchSemaphore(value: 0)
    /// How long the writer lets lines gather once woken before it takes them: a busy server's lines go
    /// out a few hundred to a write, with a few hundred wakes a second, not one of each per request
    /// (measured on 2 cores under wrk: a wake and a write per line cost a quarter of the requests).
    static let linger: DispatchTimeInterval = .milliseconds(2)

    /// Where the lines go: a descriptor that stays its giver's, or a file the writer thread opens, owns
    /// and reopens.
    private enum Output {
        case descriptor(Int32)
        case file(String)
    }

    /// A log written to `descriptor` (2, standard error, by default), which stays the caller's: it is
    /// never closed here. The writer thread lives as long as the process.
    public init(writingTo descriptor: Int32 = 2, format: Format = .common) {
        self.format = format
        start(.descriptor(descriptor), opened: descriptor)
    }

    /// A log appended to the file at `path` (created with mode 0666 less the process's umask), which the
    /// log owns: ``reopen()`` closes it and opens the file at `path` again. The writer thread lives as long
    /// as the process.
    /// - Throws: ``TileCore/TileError/Code/io`` when the file cannot be opened for appending, naming it and why.
    public init(path: String, format: Format = .common) throws(TileError) {
        self.format = format
        start(.file(path), opened: try Self.open(path))
    }

    private func start(_ output: Output, opened descriptor: Int32) {
        let thread = Thread { [self] in run(output, descriptor: descriptor) }
        thread.name = "tiler.access-log"
        thread.start()
    }

    /// Closes a log file and opens the file at its path again (a new one if it was renamed), before
    /// the next lines are written; a log written to a descriptor is left as it is. When the file cannot
    /// be opened, the lines go on to the old one and standard error says why.
    public func reopen() {
        waiting.withLockedValue { $0.reopen = true }
        wake.signal()
    }

    static func open(_ path: String) throws(TileError) -> Int32 {
        let descriptor = Glibc.open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o666)
        guard descriptor >= 0 else {
            throw TileError(.io, "cannot open the access log \(path) for appending: \(String(cString: strerror(errno)))", errno: errno)
        }
        return descriptor
    }

    /// Queues one request's line. Never blocks on the log's output.
    /// - Parameters:
    ///   - referer: the request's `Referer` (read by the caller only when the ``format`` is combined).
    ///   - userAgent: the request's `User-Agent` (likewise).
    func record(
        client: String?, method: String, target: String, version: (major: Int, minor: Int) = (1, 1), status: Int, bytes: Int,
        referer: String? = nil, userAgent: String? = nil
    ) {
        var entry = Entry(
            seconds: time(nil), client: client, method: method, target: Self.cut(target), version: version, status: status, bytes: bytes)
        var size = entry.target.utf8.count
        if format == .combined {
            (entry.referer, entry.userAgent) = (referer.map(Self.cut), userAgent.map(Self.cut))
            size += (entry.referer?.utf8.count ?? 0) + (entry.userAgent?.utf8.count ?? 0)
        }
        let first = waiting.withLockedValue { state -> Bool in
            guard state.entries.count < Self.maximumWaiting, state.bytes + size <= Self.maximumWaitingBytes else {
                state.dropped += 1
                return false
            }
            state.entries.append(entry)
            state.bytes += size
            return state.entries.count == 1
        }
        if first { wake.signal() }
    }

    /// `text`, or its first ``maximumTargetBytes`` bytes and `...`.
    private static func cut(_ text: String) -> String {
        text.utf8.count > maximumTargetBytes ? String(decoding: text.utf8.prefix(maximumTargetBytes), as: UTF8.self) + "..." : text
    }

    /// The writer thread: `descriptor` is written to (and, for a file, owned) here only.
    private func run(_ output: Output, descriptor: Int32) {
        var descriptor = descriptor
        var clock = DateText()
        var text: [UInt8] = []
        var spare: [Entry] = []
        while true {
            wake.wait()
            _ = pause.wait(timeout: .now() + Self.linger)
            let (dropped, reopen) = waiting.withLockedValue { state -> (Int, Bool) in
                swap(&state.entries, &spare)  // the emptied array of the last batch goes back, its room kept
                defer { (state.bytes, state.dropped, state.reopen) = (0, 0, false) }
                return (state.dropped, state.reopen)
            }
            if reopen, case .file(let path) = output {
                do {
                    let opened = try Self.open(path)
                    close(descriptor)
                    descriptor = opened
                } catch {
                    Self.write(Array("tiler: \(error.message); the lines go on to the file it was\n".utf8), to: 2)
                }
            }
            text.removeAll(keepingCapacity: true)
            for entry in spare { Self.append(entry, date: clock.text(entry.seconds), format: format, to: &text) }
            // Room kept for a busy second's lines, not for the largest batch ever.
            spare.removeAll(keepingCapacity: spare.count <= 4096)
            if dropped > 0 { text += Array("tiler: \(dropped) access-log lines dropped (the log could not keep up)\n".utf8) }
            Self.write(text, to: descriptor)
            if text.capacity > 1 << 20 { text = [] }
        }
    }

    /// Appends one line in `format`; the bytes of the target (and referer and user agent) that could
    /// forge a line or a field written as `\xHH` (``appendEscaped(_:escapingSpaces:to:)``).
    static func append(_ entry: Entry, date: [UInt8], format: Format = .common, to text: inout [UInt8]) {
        text += (entry.client ?? "-").utf8
        text += " - - [".utf8
        text += date
        text += "] \"".utf8
        text += entry.method.utf8
        text.append(UInt8(ascii: " "))
        appendEscaped(entry.target, escapingSpaces: true, to: &text)
        text += " HTTP/".utf8
        appendDecimal(entry.version.major, to: &text)
        text.append(UInt8(ascii: "."))
        appendDecimal(entry.version.minor, to: &text)
        text += "\" ".utf8
        appendDecimal(entry.status, to: &text)
        text.append(UInt8(ascii: " "))
        if entry.bytes > 0 { appendDecimal(entry.bytes, to: &text) } else { text.append(UInt8(ascii: "-")) }
        if format == .combined {
            for field in [entry.referer ?? "-", entry.userAgent ?? "-"] {
                text += " \"".utf8
                appendEscaped(field, escapingSpaces: false, to: &text)
                text.append(UInt8(ascii: "\""))
            }
        }
        text.append(UInt8(ascii: "\n"))
    }

    /// Appends `field`'s bytes, those that could forge a line or a field (controls, `"`, `\`, bytes past
    /// ASCII, and spaces where they separate fields) written as `\xHH`, as nginx writes them.
    static func appendEscaped(_ field: String, escapingSpaces: Bool, to text: inout [UInt8]) {
        let hex = Array("0123456789ABCDEF".utf8)
        for byte in field.utf8 {
            if byte < 0x20 || (byte == 0x20 && escapingSpaces) || byte >= 0x7F || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                text += [UInt8(ascii: "\\"), UInt8(ascii: "x"), hex[Int(byte >> 4)], hex[Int(byte & 15)]]
            } else {
                text.append(byte)
            }
        }
    }

    /// The digits of a non-negative number, without a String made for them.
    static func appendDecimal(_ value: Int, to text: inout [UInt8]) {
        guard value > 0 else { return text.append(UInt8(ascii: "0")) }
        let start = text.count
        var rest = value
        while rest > 0 {
            text.append(UInt8(ascii: "0") + UInt8(rest % 10))
            rest /= 10
        }
        text[start...].reverse()
    }

    private static func write(_ text: [UInt8], to descriptor: Int32) {
        var offset = 0
        while offset < text.count {
            let written = text.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0 && errno == EINTR { continue }
            if written <= 0 { return }  // a closed or broken output: the lines are lost, the server goes on
            offset += written
        }
    }

    /// `27/Nov/2026:06:01:09 +0000` for a time in seconds since 1970, made once a second.
    struct DateText {
        private var second = -1
        private var cached: [UInt8] = []

        mutating func text(_ seconds: Int) -> [UInt8] {
            if seconds != second {
                second = seconds
                cached = Self.format(seconds)
            }
            return cached
        }

        static func format(_ seconds: Int) -> [UInt8] {
            var t = time_t(seconds)
            var parts = tm()
            gmtime_r(&t, &parts)
            func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
            return Array(
                "\(two(parts.tm_mday))/\(HTTPDate.months[Int(parts.tm_mon)])/\(parts.tm_year + 1900):\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) +0000"
                    .utf8)
        }
    }
}
