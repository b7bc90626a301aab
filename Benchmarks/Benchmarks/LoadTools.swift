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

    /// User and system CPU time the process has used so far, in seconds (`/proc/PID/stat`).
    var cpuSeconds: Double {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = text.lastIndex(of: ")") else { return .nan }
        // After the command's closing parenthesis: state is field 3; utime and stime are fields 14 and 15.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return .nan }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// A `kB` field of `/proc/PID/status` (VmRSS, VmHWM), in MiB.
    func statusMiB(_ field: String) -> Double { Self.statusMiB(of: pid, field) }

    /// A `kB` field of `/proc/PID/status` of any process, in MiB.
    static func statusMiB(of pid: pid_t, _ field: String) -> Double {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") }),
            let kib = Double(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        else { return .nan }
        return kib / 1024
    }
}

/// What `wrk --latency` printed.
struct WrkResult {
    /// Each run's rate over the rate of the run of `reference` made just before it ("0.91, 0.89"): the
    /// machine's speed drifts from run to run.
    /// wrk against our server and nginx alternately, 64 connections: 3 s of each untimed, then up to
    /// three timed runs of 10 s each, nginx's first in each pair (``pairedRatios(_:to:)`` pairs them).
    static func alternating(ours: String, nginx: String, script: String, runs: Int) throws -> (ours: [WrkResult], nginx: [WrkResult]) {
        _ = try run(url: ours, connections: 64, seconds: 3, script: script)
        _ = try run(url: nginx, connections: 64, seconds: 3, script: script)
        var (mine, theirs): ([WrkResult], [WrkResult]) = ([], [])
        for _ in 0..<min(runs, 3) {
            theirs.append(try run(url: nginx, connections: 64, seconds: 10, script: script))
            mine.append(try run(url: ours, connections: 64, seconds: 10, script: script))
        }
        return (mine, theirs)
    }

    static func pairedRatios(_ runs: [WrkResult], to reference: [WrkResult]) -> String {
        zip(runs, reference).map { String(format: "%.2f", $0.requestsPerSecond / $1.requestsPerSecond) }.joined(separator: ", ")
    }

    var requestsPerSecond: Double
    var p50Milliseconds: Double
    var p99Milliseconds: Double
    var maxMilliseconds: Double
    var requests: Int
    /// Socket errors (connect, read, write, timeout) and responses other than 2xx/3xx.
    var errors: Int

    /// Runs wrk on `url` with `script` (a Lua file choosing each request; nil: `url` each time), on
    /// `threads` threads.
    static func run(url: String, connections: Int, seconds: Int, script: String?, timeoutSeconds: Int = 2, threads: Int = 2) throws -> WrkResult {
        let out = NSTemporaryDirectory() + "/tiledimagekit-wrk-\(getpid()).txt"
        defer { unlink(out) }
        let process = try BackgroundProcess(
            Scenario.which("wrk") ?? "/usr/bin/wrk",
            ["-t\(threads)", "-c\(connections)", "-d\(seconds)s", "--latency", "--timeout", "\(timeoutSeconds)s"] + (script.map { ["-s", $0] } ?? [])
                + [url],
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
///
/// Starting 64 h2load processes costs about 0.45 s of CPU (7 ms each: exec, its libraries, its set-up),
/// as much as the server's whole cold run; started against a running server, that start-up competes
/// with the server for the two cores and is charged to it. So the server's processes (`suspended`) are
/// stopped (SIGSTOP) while the clients start, connect (the kernel completes the handshakes into the
/// listen backlog) and send their first requests, and continued (SIGCONT) when all are waiting: the
/// clock starts there, as wrk's does after its threads have connected. Times come from h2load's own
/// per-request log (`--log-file`: start in microseconds since the epoch, status, duration): the run
/// ends with the last response; a request's latency counts from its start or the SIGCONT, whichever
/// is later.
struct OnceEachResult {
    var requestsPerSecond: Double
    var maxMilliseconds: Double
    var requests: Int
    var failures: Int

    static func run(base: String, paths: [String], connections: Int, suspending suspended: [pid_t]) throws -> OnceEachResult {
        let folder = NSTemporaryDirectory() + "/tiledimagekit-h2load-\(getpid())"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let shares = (0..<connections).map { i in stride(from: i, to: paths.count, by: connections).map { paths[$0] } }
        for pid in suspended { kill(pid, SIGSTOP) }
        // Never left stopped, whatever throws below (a stopped process would not even take SIGTERM).
        defer { for pid in suspended { kill(pid, SIGCONT) } }
        var clients: [(BackgroundProcess, log: String)] = []
        do {
            for (i, share) in shares.enumerated() where !share.isEmpty {
                let list = "\(folder)/\(i).txt", log = "\(folder)/\(i).log"
                try share.map { base + $0 }.joined(separator: "\n").appending("\n").write(toFile: list, atomically: false, encoding: .utf8)
                clients.append(
                    (
                        try BackgroundProcess(
                            Scenario.which("h2load") ?? "/usr/bin/h2load", ["--h1", "-c1", "-n\(share.count)", "-i", list, "--log-file=\(log)"],
                            outputPath: "\(folder)/\(i).out"), log
                    ))
            }
        } catch {
            for (client, _) in clients {
                kill(client.pid, SIGKILL)
                client.wait()
            }
            throw error
        }
        // Every client started and waiting on its first response (7 ms each; a wide margin).
        usleep(1_500_000)
        var now = timeval()
        gettimeofday(&now, nil)
        let start = Int(now.tv_sec) * 1_000_000 + Int(now.tv_usec)
        for pid in suspended { kill(pid, SIGCONT) }
        var result = OnceEachResult(requestsPerSecond: 0, maxMilliseconds: 0, requests: 0, failures: 0)
        var end = start
        for (client, log) in clients {
            client.wait()
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            for line in text.split(separator: "\n") {
                let fields = line.split(separator: "\t")
                guard fields.count >= 3, let began = Int(fields[0]), let status = Int(fields[1]), let took = Int(fields[2]) else { continue }
                result.requests += 1
                if !(200..<300).contains(status) { result.failures += 1 }
                end = max(end, began + took)
                result.maxMilliseconds = max(result.maxMilliseconds, Double(began + took - max(began, start)) / 1000)
            }
        }
        result.failures += paths.count - result.requests
        // No response after the SIGCONT: the server was not stopped (a process missed), not a rate.
        guard end > start else { throw BenchmarkError("every response came before the clock started") }
        result.requestsPerSecond = Double(result.requests) / (Double(end - start) / 1e6)
        return result
    }
}

/// The processes whose parent is `pid` (nginx's workers).
func childProcesses(of pid: pid_t) -> [pid_t] {
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    return entries.compactMap { name -> pid_t? in
        guard let child = pid_t(name), let stat = try? String(contentsOfFile: "/proc/\(name)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        // "pid (comm) state ppid ...": the comm may hold spaces and parentheses, so read after the last ")".
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return fields.count > 1 && pid_t(fields[1]) == pid ? child : nil
    }
}
