import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Spawns a process, waits for it with `wait4`, and reports its wall time and its own peak RSS.
struct ChildProcess {
    var exitStatus: Int32
    var seconds: Double
    var peakMiB: Double

    static var selfExecutable: String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    }

    /// - Parameter output: where its standard output goes.
    static func run(_ executable: String, _ arguments: [String], output: String = "/dev/null") throws -> ChildProcess {
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        var pid: pid_t = 0
        let clock = ContinuousClock()
        let start = clock.now
        let rc = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        guard rc == 0 else { throw BenchmarkError("cannot start \(executable): \(String(cString: strerror(rc)))") }
        var status: Int32 = 0
        var usage = rusage()
        while wait4(pid, &status, 0, &usage) < 0 && errno == EINTR {}
        let elapsed = clock.now - start
        let exited = status & 0x7f == 0
        let code = exited ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return ChildProcess(exitStatus: code, seconds: seconds, peakMiB: Double(usage.ru_maxrss) / 1024)
    }
}
