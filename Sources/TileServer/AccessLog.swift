import Foundation
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// One line per answered request, in the Common Log Format (what nginx's and Apache's `common` logs
/// write, so the usual log tools read it):
///
///     127.0.0.1 - - [27/Nov/2026:06:01:09 +0000] "GET /dzi/photo_files/11/0_0.jpg HTTP/1.1" 200 18342
///
/// A request's thread only queues a few integers and the strings it already holds (its client's
/// address, made once per connection; its method and target); the lines are formatted and written
/// by a thread of the log's own, many to one `write`, woken once per batch (``linger``). Past
/// ``maximumWaiting`` lines waiting, new ones are dropped and counted (a line says how many once the
/// writer catches up): a slow terminal or a full pipe never slows the answers.
public final class AccessLog: Sendable {
    /// Lines queued at most while the writer catches up.
    public static let maximumWaiting = 65_536
    /// Bytes of request targets queued at most (a stalled output and long targets cannot make the
    /// queue grow past this).
    public static let maximumWaitingBytes = 16 << 20
    /// A target's bytes written at most; a longer one is cut, and ends with `...`.
    public static let maximumTargetBytes = 4096

    struct Entry: Sendable {
        var seconds: Int
        var client: String?
        var method: String
        var target: String
        var version: (major: Int, minor: Int)
        var status: Int
        var bytes: Int
    }

    private let waiting = NIOLockedValueBox<(entries: [Entry], bytes: Int, dropped: Int)>(([], 0, 0))
    /// Signalled by the line that finds the queue empty: once per batch.
    private let wake = DispatchSemaphore(value: 0)
    /// Never signalled: the writer's linger once woken (``linger``).
    private let pause = DispatchSemaphore(value: 0)
    /// How long the writer lets lines gather once woken before it takes them: a busy server's lines go
    /// out a few hundred to a write, with a few hundred wakes a second, not one of each per request
    /// (measured on 2 cores under wrk: a wake and a write per line cost a quarter of the requests).
    static let linger: DispatchTimeInterval = .milliseconds(2)
    private let descriptor: Int32

    /// A log written to `descriptor` (2, standard error, by default), which stays the caller's: it is
    /// never closed here. The writer thread lives as long as the process.
    public init(writingTo descriptor: Int32 = 2) {
        self.descriptor = descriptor
        let thread = Thread { [self] in run() }
        thread.name = "tiler.access-log"
        thread.start()
    }

    /// Queues one request's line. Never blocks on the log's output.
    func record(
        client: String?, method: String, target: String, version: (major: Int, minor: Int) = (1, 1), status: Int, bytes: Int
    ) {
        let cut = target.utf8.count > Self.maximumTargetBytes
        let kept = cut ? String(decoding: target.utf8.prefix(Self.maximumTargetBytes), as: UTF8.self) + "..." : target
        let entry = Entry(seconds: time(nil), client: client, method: method, target: kept, version: version, status: status, bytes: bytes)
        let size = kept.utf8.count
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

    private func run() {
        var clock = DateText()
        var text: [UInt8] = []
        var spare: [Entry] = []
        while true {
            wake.wait()
            _ = pause.wait(timeout: .now() + Self.linger)
            let dropped = waiting.withLockedValue { state -> Int in
                swap(&state.entries, &spare)  // the emptied array of the last batch goes back, its room kept
                defer { (state.bytes, state.dropped) = (0, 0) }
                return state.dropped
            }
            text.removeAll(keepingCapacity: true)
            for entry in spare { Self.append(entry, date: clock.text(entry.seconds), to: &text) }
            // Room kept for a busy second's lines, not for the largest batch ever.
            spare.removeAll(keepingCapacity: spare.count <= 4096)
            if dropped > 0 { text += Array("tiler: \(dropped) access-log lines dropped (the log could not keep up)\n".utf8) }
            write(text)
            if text.capacity > 1 << 20 { text = [] }
        }
    }

    /// Appends one line in the Common Log Format; the target's bytes that could forge a line or a
    /// field (controls, `"`, `\`, bytes past ASCII) written as `\xHH`.
    static func append(_ entry: Entry, date: [UInt8], to text: inout [UInt8]) {
        text += (entry.client ?? "-").utf8
        text += " - - [".utf8
        text += date
        text += "] \"".utf8
        text += entry.method.utf8
        text.append(UInt8(ascii: " "))
        let hex = Array("0123456789ABCDEF".utf8)
        for byte in entry.target.utf8 {
            if byte < 0x21 || byte >= 0x7F || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                text += [UInt8(ascii: "\\"), UInt8(ascii: "x"), hex[Int(byte >> 4)], hex[Int(byte & 15)]]
            } else {
                text.append(byte)
            }
        }
        text += " HTTP/".utf8
        appendDecimal(entry.version.major, to: &text)
        text.append(UInt8(ascii: "."))
        appendDecimal(entry.version.minor, to: &text)
        text += "\" ".utf8
        appendDecimal(entry.status, to: &text)
        text.append(UInt8(ascii: " "))
        if entry.bytes > 0 { appendDecimal(entry.bytes, to: &text) } else { text.append(UInt8(ascii: "-")) }
        text.append(UInt8(ascii: "\n"))
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

    private func write(_ text: [UInt8]) {
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
            let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
            func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
            return Array(
                "\(two(parts.tm_mday))/\(months[Int(parts.tm_mon)])/\(parts.tm_year + 1900):\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) +0000"
                    .utf8)
        }
    }
}
