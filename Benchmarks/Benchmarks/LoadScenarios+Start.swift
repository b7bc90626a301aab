import Foundation

#if canImport(Glibc)
import Glibc
#endif

extension LoadScenarios {
    /// `serve-start`: a server just started over an existing store, 64 clients asking 1,500 distinct
    /// level-0 tiles at once (h2load; the server stopped until every client is connected), against a
    /// server started the same way and primed by one tile request first: requests a second, the slowest
    /// answer, and the server's CPU time from its start (priming included).
    static func start(_ setup: Setup, runs: Int) throws -> [String] {
        guard Scenario.which("h2load") != nil else { return ["serve-start: skipped (needs h2load, Debian's nghttp2-client)"] }
        let paths = shuffledTiles(setup).prefix(1500).map { "/dzi/photo_files/\(setup.top)/\($0.0)_\($0.1).jpg" }
        // The store's files read once, untimed: the build wrote them past the page cache, and the first
        // run alone would otherwise read its tiles from the disk (measured: 882 req/s, max 248 ms, where
        // the runs after it gave 4,400 req/s): the runs compare a fresh server with a primed one, not disks.
        let store = "\(setup.images)/photo.tiles"
        for file in (try? FileManager.default.contentsOfDirectory(atPath: store)) ?? [] {
            guard let handle = FileHandle(forReadingAtPath: "\(store)/\(file)") else { continue }
            while let chunk = try? handle.read(upToCount: 8 << 20), !chunk.isEmpty {}
            try? handle.close()
        }
        var results: [Bool: [(rate: Double, max: Double, cpu: Double, failures: Int)]] = [false: [], true: []]
        for _ in 0..<runs {
            for primed in [false, true] {
                let (server, base) = try startServer(setup)
                defer { server.stop() }
                let cpu = server.cpuSeconds
                if primed {
                    let prime = try ChildProcess.run(
                        Scenario.which("h2load") ?? "h2load", ["--h1", "-n1", "-c1", "\(base)/dzi/photo_files/\(setup.top)/0_0.jpg"])
                    guard prime.exitStatus == 0 else { throw BenchmarkError("the priming request failed") }
                }
                let run = try OnceEachResult.run(base: base, paths: Array(paths), connections: 64, suspending: [server.pid])
                results[primed]!.append((run.requestsPerSecond, run.maxMilliseconds, server.cpuSeconds - cpu, run.failures))
            }
        }
        func line(_ name: String, _ r: [(rate: Double, max: Double, cpu: Double, failures: Int)]) -> String {
            String(
                format: "%@ %8.0f req/s  max %.0f ms  server CPU %.2f s  failures %d  (rates %@)",
                name.padding(toLength: 19, withPad: " ", startingAt: 0),
                ScenarioResult.median(r.map(\.rate)), r.map(\.max).max() ?? .nan, ScenarioResult.median(r.map(\.cpu)),
                r.map(\.failures).reduce(0, +), r.map { String(format: "%.0f", $0.rate) }.joined(separator: ", "))
        }
        let ratio = ScenarioResult.median(results[false]!.map(\.cpu)) / ScenarioResult.median(results[true]!.map(\.cpu))
        return [
            line("serve-start-primed", results[true]!), line("serve-start", results[false]!) + String(format: "  CPU %.2fx the primed run's", ratio)
        ]
    }
}
