import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A process started in the background (a server, nginx, a load generator) and stopped later.
final class BackgroundProcess: Sendable {
    let pid: pid_t
    let outputPath: String

    /// Starts `executable` with `arguments`; its standard output and error go to `outputPath`.
    init(_ executable: String, _ arguments: [String], outputPath: String) throws {
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        guard rc == 0 else { throw BenchmarkError("cannot start \(executable): \(String(cString: strerror(rc)))") }
        self.pid = pid
        self.outputPath = outputPath
    }

    var output: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }

    /// Waits for the process to end by itself; its exit status.
    @discardableResult
    func wait() -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }

    /// Sends SIGTERM and waits; the exit status.
    @discardableResult
    func stop() -> Int32 {
        kill(pid, SIGTERM)
        return wait()
    }

    /// Descriptors the process has open now.
    var descriptorCount: Int { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1 }

    /// Descriptors the process has open now, by kind: sockets, level files of stores (`.tiles/`), others.
    var descriptorKinds: (sockets: Int, stores: Int, others: Int) {
        let folder = "/proc/\(pid)/fd"
        var kinds = (sockets: 0, stores: 0, others: 0)
        for name in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [] {
            let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: "\(folder)/\(name)")) ?? ""
            if target.hasPrefix("socket:") { kinds.sockets += 1 } else if target.contains(".tiles/") { kinds.stores += 1 } else { kinds.others += 1 }
        }
        return kinds
    }

    /// A `kB` field of `/proc/PID/status` (VmRSS, VmHWM), in MiB.
    func statusMiB(_ field: String) -> Double {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") }),
            let kib = Double(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        else { return .nan }
        return kib / 1024
    }
}

/// What `wrk --latency` printed.
struct WrkResult {
    var requestsPerSecond: Double
    var p50Milliseconds: Double
    var p99Milliseconds: Double
    var maxMilliseconds: Double
    var requests: Int
    /// Socket errors (connect, read, write, timeout) and responses other than 2xx/3xx.
    var errors: Int

    /// Runs wrk on `url` with `script` (a Lua file choosing each request).
    static func run(url: String, connections: Int, seconds: Int, script: String, timeoutSeconds: Int = 2) throws -> WrkResult {
        let out = NSTemporaryDirectory() + "/tiledimagekit-wrk-\(getpid()).txt"
        defer { unlink(out) }
        let process = try BackgroundProcess(
            Scenario.which("wrk") ?? "/usr/bin/wrk",
            ["-t2", "-c\(connections)", "-d\(seconds)s", "--latency", "--timeout", "\(timeoutSeconds)s", "-s", script, url],
            outputPath: out)
        guard process.wait() == 0 else { throw BenchmarkError("wrk failed: \(process.output)") }
        return try parse(process.output)
    }

    static func parse(_ text: String) throws -> WrkResult {
        func milliseconds(_ word: Substring) -> Double {
            let units: [(String, Double)] = [("us", 1e-3), ("ms", 1), ("s", 1000), ("m", 60000)]
            for (unit, factor) in units where word.hasSuffix(unit) {
                return (Double(word.dropLast(unit.count)) ?? .nan) * factor
            }
            return .nan
        }
        var result = WrkResult(requestsPerSecond: .nan, p50Milliseconds: .nan, p99Milliseconds: .nan, maxMilliseconds: .nan, requests: 0, errors: 0)
        for line in text.split(separator: "\n") {
            let words = line.split(separator: " ", omittingEmptySubsequences: true)
            guard let first = words.first else { continue }
            switch first {
            case "Requests/sec:": result.requestsPerSecond = Double(words[1]) ?? .nan
            case "50%": result.p50Milliseconds = milliseconds(words[1])
            case "99%": result.p99Milliseconds = milliseconds(words[1])
            case "Latency" where words.count >= 4: result.maxMilliseconds = milliseconds(words[3])
            case "Socket":  // Socket errors: connect 0, read 0, write 0, timeout 0
                result.errors += words.compactMap { Int($0.trimmingCharacters(in: CharacterSet(charactersIn: ","))) }.reduce(0, +)
            case "Non-2xx": result.errors += Int(words.last ?? "") ?? 0
            default:
                if words.count >= 3, words[1] == "requests", words[2] == "in" { result.requests = Int(first) ?? 0 }
            }
        }
        guard result.requestsPerSecond.isFinite else { throw BenchmarkError("wrk printed no rate:\n\(text)") }
        return result
    }
}

/// Every URI requested exactly once, by `connections` clients at once: one `h2load --h1 -c1` per
/// client, each given its own share of the URIs (h2load's `-i` gives every client the same list, in
/// the same order, so a single h2load with `-c 64` would ask for the first URIs 64 times).
struct OnceEachResult {
    var requestsPerSecond: Double
    var maxMilliseconds: Double
    var requests: Int
    var failures: Int

    static func run(base: String, paths: [String], connections: Int) throws -> OnceEachResult {
        let folder = NSTemporaryDirectory() + "/tiledimagekit-h2load-\(getpid())"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let shares = (0..<connections).map { i in stride(from: i, to: paths.count, by: connections).map { paths[$0] } }
        let clock = ContinuousClock()
        let start = clock.now
        var clients: [BackgroundProcess] = []
        for (i, share) in shares.enumerated() where !share.isEmpty {
            let list = "\(folder)/\(i).txt"
            try share.map { base + $0 }.joined(separator: "\n").appending("\n").write(toFile: list, atomically: false, encoding: .utf8)
            clients.append(
                try BackgroundProcess(
                    Scenario.which("h2load") ?? "/usr/bin/h2load", ["--h1", "-c1", "-n\(share.count)", "-i", list],
                    outputPath: "\(folder)/\(i).out"))
        }
        var result = OnceEachResult(requestsPerSecond: 0, maxMilliseconds: 0, requests: 0, failures: 0)
        for client in clients {
            client.wait()
            for line in client.output.split(separator: "\n") {
                let words = line.split(separator: " ", omittingEmptySubsequences: true)
                if line.hasPrefix("requests:"), let done = words.firstIndex(of: "done,") {
                    result.requests += Int(words[done - 1]) ?? 0
                    for key in ["failed,", "errored,"] { if let i = words.firstIndex(of: Substring(key)) { result.failures += Int(words[i - 1]) ?? 0 } }
                } else if line.hasPrefix("status codes:") {
                    result.failures += words.enumerated().filter { $0.element.hasPrefix("4xx") || $0.element.hasPrefix("5xx") }
                        .map { Int(words[$0.offset - 1]) ?? 0 }.reduce(0, +)
                } else if line.hasPrefix("time for request:"), words.count >= 5 {
                    let max = words[4]
                    let value = max.hasSuffix("ms") ? Double(max.dropLast(2)) : max.hasSuffix("us") ? Double(max.dropLast(2)).map { $0 / 1000 } : Double(max.dropLast()).map { $0 * 1000 }
                    result.maxMilliseconds = Swift.max(result.maxMilliseconds, value ?? .infinity)
                }
            }
        }
        let elapsed = seconds(clock.now - start)
        result.failures += paths.count - result.requests
        result.requestsPerSecond = Double(result.requests) / elapsed
        return result
    }
}
