import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A server program run for a test (nginx, a FastCGI program under spawn-fcgi): started with
/// `posix_spawn`, every signal unblocked and at its default (Foundation's `Process` passes its own
/// blocked mask on, so such servers ignore SIGTERM), output to /dev/null; stopped and reaped by
/// ``stop()`` with `waitpid` on its own pid, in a process group of its own that ``stop()`` ends too,
/// with no descriptor of this process but the three standard ones.
public final class Daemon {
    public let pid: Int32
    private var reaped = false

    /// Starts `path` with `arguments` (`environment` added to this process's).
    public init(_ path: String, _ arguments: [String], environment: [String: String] = [:]) throws {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t(), all = sigset_t()
        sigemptyset(&none)
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        // A process group of its own, so that ``stop(_:)`` ends whatever it started too.
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        // Nothing else of this process's: a descriptor another test opened without close-on-exec (a
        // socket, a locked folder) must not outlive that test in this program or its children.
        // (glibc declares it only for _GNU_SOURCE, which Swift's Glibc module lacks: looked up by name.)
        typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        if let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") {
            _ = unsafeBitCast(symbol, to: CloseFrom.self)(&actions, 3)
        }
        var merged = ProcessInfo.processInfo.environment
        for (key, value) in environment { merged[key] = value }
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp = merged.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var child: Int32 = 0
        let status = posix_spawn(&child, path, &actions, &attributes, argv, envp)
        guard status == 0 else { throw POSIXError(POSIXErrorCode(rawValue: status) ?? .EIO) }
        pid = child
    }

    /// Sends `signal` (SIGTERM, 15, by default), waits for the process to end, then kills what is left
    /// of its process group (children it started). Idempotent.
    public func stop(_ signal: Int32 = 15) {
        guard !reaped else { return }
        kill(pid, signal)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        kill(-pid, SIGKILL)
        reaped = true
    }

    deinit { stop(SIGKILL) }
}
