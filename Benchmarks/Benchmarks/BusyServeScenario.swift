import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// `serve-busy` (only when named): the release `tiler serve` (its defaults) while four copies of the
/// input are asked for at once (four builds of it, one running, three waiting for their turn), and a
/// small image already built (a 4096x3072 TIFF store) is looked at: its `info.json`, then 200 of its
/// tiles not asked for before, by 8 clients at once. Latency of each answer (p50, p99, max) and the
/// errors; the builds still going when the last answer came. Issue 42's bar: p99 under 50 ms.
enum BusyServeScenario {
    static let name = "serve-busy"

    static func run(input: String, runs: Int) async throws -> [String] {
        let tiler = (ChildProcess.selfExecutable as NSString).deletingLastPathComponent + "/tiler"
        guard access(tiler, X_OK) == 0 else {
            return ["serve-busy: skipped (no release tiler beside the Benchmarks executable: swift build -c release)"]
        }
        let folder = NSTemporaryDirectory() + "/tiledimagekit-busy-\(getpid())"
        try? FileManager.default.removeItem(atPath: folder)
        try FileManager.default.createDirectory(atPath: "\(folder)/images", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var options = BuildOptions()
        options.format = .tiff()
        options.storage = .persistent(path: "\(folder)/images/small.tiles")
        let small = try TileBuilder.build(data: try DemoImage.jpeg(width: 4096, height: 3072), options: options).geometry
        var tiles: [String] = []
        for (index, level) in small.levels.enumerated() {
            for row in 0..<level.rows {
                for column in 0..<level.columns { tiles.append("/dzi/small_files/\(small.deepZoomTopLevel - index)/\(column)_\(row).jpg") }
            }
        }
        var generator = SplitMix(seed: 42)
        let paths = Array(tiles.shuffled(using: &generator).prefix(200))
        var lines: [String] = []
        var (p50s, p99s, maxima, errors, building): ([Double], [Double], [Double], Int, [String]) = ([], [], [], 0, [])
        for run in 0..<runs {
            // Copies named anew each run: nothing built before.
            for copy in 0..<4 where link(input, "\(folder)/images/big\(run)-\(copy).jpg") != 0 {
                try FileManager.default.copyItem(atPath: input, toPath: "\(folder)/images/big\(run)-\(copy).jpg")
            }
            let (server, base) = try CLIServeScenario.start(
                tiler, images: "\(folder)/images", cache: "\(folder)/cache", log: "\(folder)/tiler-\(run).log")
            defer { server.stop() }
            let root = base
            let client = HTTPClient(eventLoopGroupProvider: .singleton)
            do {
                // The four builds asked for at once; the clock starts once one is running.
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for copy in 0..<4 { group.addTask { _ = try await get(client, "\(root)/iiif/3/big\(run)-\(copy)/info.json") } }
                    try await group.waitForAll()
                }
                for _ in 0..<600 where try await metric(client, base, "tiler_builds_running") < 1 { try await Task.sleep(for: .milliseconds(50)) }
                var latencies = [try await get(client, "\(base)/iiif/3/small/info.json")]
                latencies += try await withThrowingTaskGroup(of: [Double].self) { group in
                    for share in 0..<8 {
                        group.addTask {
                            var mine: [Double] = []
                            for path in paths.enumerated().filter({ $0.offset % 8 == share }).map(\.element) {
                                mine.append(try await get(client, root + path))
                            }
                            return mine
                        }
                    }
                    return try await group.reduce(into: []) { $0 += $1 }
                }
                let (running, queued) = (
                    try await metric(client, base, "tiler_builds_running"), try await metric(client, base, "tiler_builds_queued")
                )
                building.append(String(format: "%.0f running, %.0f queued", running, queued))
                let sorted = latencies.filter { $0 >= 0 }.sorted()
                errors += latencies.filter { $0 < 0 }.count
                p50s.append(sorted[sorted.count / 2])
                p99s.append(sorted[min(sorted.count - 1, sorted.count * 99 / 100)])
                maxima.append(sorted.last ?? .nan)
                try await client.shutdown()
            } catch {
                try? await client.shutdown()
                throw error
            }
        }
        lines.append(
            String(
                format:
                    "serve-busy          info.json + 200 tiles of a built image by 8 clients beside 4 builds of the input: p50 %.1f ms  p99 %.1f ms  max %.1f ms  errors %d  (builds still going at the end: %@; p99 by run %@)",
                ScenarioResult.median(p50s), ScenarioResult.median(p99s), ScenarioResult.median(maxima), errors,
                building.joined(separator: "; "), p99s.map { String(format: "%.1f", $0) }.joined(separator: ", ")))
        return lines
    }

    /// One GET: its latency in milliseconds, or -1 for an answer other than 200.
    static func get(_ client: HTTPClient, _ url: String) async throws -> Double {
        let clock = ContinuousClock(), start = clock.now
        let response = try await client.execute(HTTPClientRequest(url: url), timeout: .seconds(120))
        _ = try await response.body.collect(upTo: 64 << 20)
        let (seconds, attoseconds) = (clock.now - start).components
        return response.status == .ok ? Double(seconds) * 1000 + Double(attoseconds) / 1e15 : -1
    }

    /// A gauge or counter of `/metrics` (0 when absent).
    static func metric(_ client: HTTPClient, _ base: String, _ name: String) async throws -> Double {
        let response = try await client.execute(HTTPClientRequest(url: "\(base)/metrics"), timeout: .seconds(60))
        let text = String(buffer: try await response.body.collect(upTo: 16 << 20))
        for line in text.split(separator: "\n") where line.hasPrefix(name + " ") { return Double(line.split(separator: " ").last ?? "") ?? 0 }
        return 0
    }
}
