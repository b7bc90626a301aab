import Foundation
import Testing
import TestTraits

/// The trait the command-line suites run with (``TestTraits/OwnThreads``): a synchronous test, and the
/// default actors it awaits, run on its threads, never on Swift's cooperative pool.
@Suite("Tests that hold their thread run on threads of their own", .ownThreads)
struct OwnThreadsTests {
    actor Counter {
        var count = 0
        func increment() -> String? {
            count += 1
            return OwnThreadsTests.threadName()
        }
    }

    /// The kernel's name of the thread this runs on.
    static func threadName() -> String? {
        (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("a synchronous test runs on a thread of its own")
    func synchronous() {
        let here = Self.threadName()
        #expect(here?.hasPrefix("test-blocking-") == true, "\(here ?? "unnamed")")
    }

    @Test("an asynchronous test and a default actor it calls do too")
    func asynchronous() async {
        let here = Self.threadName()
        #expect(here?.hasPrefix("test-blocking-") == true, "\(here ?? "unnamed")")
        let name = await Counter().increment()
        #expect(name?.hasPrefix("test-blocking-") == true, "\(name ?? "unnamed")")
    }
}
