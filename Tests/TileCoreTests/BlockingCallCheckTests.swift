import Foundation
import Testing
import TileCore

/// The check that keeps blocking work off the threads that must not block: it stops the process for a
/// blocking call made by a task in a non-blocking scope on Swift's cooperative pool, and lets the same
/// call through on a thread of its own.
@Suite("Blocking call check")
struct BlockingCallCheckTests {
    @Test("a file read in a non-blocking scope on the cooperative pool stops the process")
    func trapsOnCooperativePool() async {
        await #expect(processExitsWith: .failure) {
            BlockingCallCheck.enable()
            await BlockingCallCheck.withNonBlockingScope { _ = try? SourceFingerprint.read(path: "/proc/self/stat") }
        }
    }

    @Test("the same read handed to a thread of its own, or outside the scope, passes")
    func passesElsewhere() async {
        await #expect(processExitsWith: .success) {
            BlockingCallCheck.enable()
            let path = CommandLine.arguments[0]
            _ = try? SourceFingerprint.read(path: path)  // not in a non-blocking scope
            await BlockingCallCheck.withNonBlockingScope {
                await withCheckedContinuation { continuation in
                    Thread {
                        _ = try? SourceFingerprint.read(path: path)
                        continuation.resume()
                    }.start()
                }
            }
        }
    }
}
