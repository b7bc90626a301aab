import Foundation
import NIOConcurrencyHelpers
import TestSupport
import TileCore

#if canImport(Glibc)
import Glibc
#endif

extension ServeCommandTests {
    /// A running `tiler serve`: its process, the port it printed, and its standard error so far.
    final class Server {
        let process = Process()
        let errors = Pipe()
        private(set) var port = 0
        /// What the server wrote to standard error up to the line saying where it listens.
        private(set) var startup = ""

        /// - Parameters:
        ///   - command: `serve`, or `demo` (with `--serve`), whose URL line is on standard output.
        ///   - descriptors: a limit on the process's descriptors (`ulimit -n`, soft and hard), if any.
        ///   - user: a user (and group) of that number to run as, through util-linux's `setpriv` (root only).
        init(
            _ arguments: [String], command: String = "serve", descriptors: Int? = nil, user: uid_t? = nil,
            environment extra: [String: String] = [:]
        ) throws {
            if let user {
                process.executableURL = URL(fileURLWithPath: Users.setpriv)
                process.arguments = ["--reuid=\(user)", "--regid=\(user)", "--clear-groups", TilerCommandTests.binary, command] + arguments
            } else if let descriptors {  // the shell sets the limit, then becomes tiler (the same process)
                process.executableURL = URL(fileURLWithPath: "/bin/sh")
                process.arguments = ["-c", "ulimit -n \(descriptors) && exec \"$0\" \(command) \"$@\"", TilerCommandTests.binary] + arguments
            } else {
                process.executableURL = URL(fileURLWithPath: TilerCommandTests.binary)
                process.arguments = [command] + arguments
            }
            var environment = ProcessInfo.processInfo.environment
            environment["ASAN_OPTIONS"] = "detect_leaks=0"
            environment.merge(extra) { $1 }
            process.environment = environment
            process.standardError = errors
            process.standardOutput = command == "serve" ? FileHandle.nullDevice : errors
            try process.run()
            // "tiler: serving FOLDER at http://127.0.0.1:PORT/ (the list of images; ...)" (the demo's: "open
            // http://127.0.0.1:PORT/view/demo ..."), within 60 s.
            var text = ""
            let deadline = Date().addingTimeInterval(60)
            while port == 0, Date() < deadline {
                let data = errors.fileHandleForReading.availableData
                if data.isEmpty { break }
                text += String(decoding: data, as: UTF8.self)
                if let range = text.range(of: command == "serve" ? "at http://127.0.0.1:" : "open http://127.0.0.1:") {
                    port = Int(text[range.upperBound...].prefix { $0.isNumber }) ?? 0
                }
            }
            guard port > 0 else { throw TileError(.io, "tiler \(command) did not say where it listens: \(text)") }
            startup = text
            drain()
        }

        /// What the server has written to standard error since it said where it listens, up to now.
        func errorsSoFar() -> String {
            usleep(100_000)  // what was written just now, read by the drain
            return log.text.withLockedValue { String(decoding: $0, as: UTF8.self) }
        }

        /// Standard error after the port line, read as it comes by a thread of its own: a server whose
        /// log fills the pipe would block on it (and never exit).
        private final class Log: Sendable { let text = NIOLockedValueBox(Data()) }
        private let log = Log()

        private func drain() {
            // A descriptor of the thread's own, closed by it at the end of the pipe: the pipe's own is
            // closed when this value goes, and its number may then be another test's pipe (a read there
            // would take that test's output).
            let fd = dup(errors.fileHandleForReading.fileDescriptor)
            guard fd >= 0 else { return }
            let thread = Thread { [log] in
                defer { close(fd) }
                var buffer = [UInt8](repeating: 0, count: 65536)
                while true {
                    let n = read(fd, &buffer, buffer.count)
                    if n < 0, errno == EINTR { continue }
                    if n <= 0 { return }
                    log.text.withLockedValue { $0.append(contentsOf: buffer[0..<n]) }
                }
            }
            thread.start()
        }

        /// Sends SIGTERM and waits (at most `seconds`) for the exit. The child is reaped here when
        /// Foundation has not (seen here: a child left a zombie, `isRunning` true, while other children
        /// ran beside it).
        func terminate(within seconds: Double) -> (status: Int32, signalled: Bool)? {
            let pid = process.processIdentifier
            kill(pid, SIGTERM)
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                var status: Int32 = 0
                let reaped = waitpid(pid, &status, WNOHANG)
                if reaped == pid {
                    return status & 0x7f == 0 ? ((status >> 8) & 0xff, false) : (status & 0x7f, true)
                }
                if reaped < 0, !process.isRunning { return (process.terminationStatus, process.terminationReason == .uncaughtSignal) }
                usleep(50_000)
            }
            kill(pid, SIGKILL)
            return nil
        }
    }
}
