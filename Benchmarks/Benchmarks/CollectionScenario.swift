import AsyncHTTPClient
import Foundation
import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// `serve-collection` (only when named): the release `tiler serve` over a folder of 2,000 images (hard
/// links of one small JPEG): `GET /iiif/3/collection` (its two pages listed) and its first page (1,000
/// manifests), asked once cold, then 50 times each, one at a time; latency p50 and p99 of the warm
/// answers, and the stores built meanwhile (none: a collection opens no image). Issue 40's bar: the
/// first page under 50 ms warm.
enum CollectionScenario {
    static let name = "serve-collection"

    static func run(runs: Int) async throws -> [String] {
        let tiler = (ChildProcess.selfExecutable as NSString).deletingLastPathComponent + "/tiler"
        guard access(tiler, X_OK) == 0 else {
            return ["serve-collection: skipped (no release tiler beside the Benchmarks executable: swift build -c release)"]
        }
        let folder = NSTemporaryDirectory() + "/tiledimagekit-collection-\(getpid())"
        try? FileManager.default.removeItem(atPath: folder)
        try FileManager.default.createDirectory(atPath: "\(folder)/images", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let jpeg = "\(folder)/one.jpg"
        try DemoImage.jpeg(width: 640, height: 480).write(to: URL(fileURLWithPath: jpeg))
        for n in 0..<2000 where link(jpeg, "\(folder)/images/" + String(format: "image%04d.jpg", n)) != 0 {
            try FileManager.default.copyItem(atPath: jpeg, toPath: "\(folder)/images/" + String(format: "image%04d.jpg", n))
        }
        var lines: [String] = []
        for (label, path) in [("collection", "/iiif/3/collection"), ("page 1", "/iiif/3/collection?page=1")] {
            var (cold, p50s, p99s, errors) = ([Double](), [Double](), [Double](), 0)
            for run in 0..<runs {
                let (server, base) = try CLIServeScenario.start(
                    tiler, images: "\(folder)/images", cache: "\(folder)/cache-\(run)", log: "\(folder)/tiler-\(run).log")
                defer { server.stop() }
                let client = HTTPClient(eventLoopGroupProvider: .singleton)
                do {
                    cold.append(try await BusyServeScenario.get(client, base + path))
                    var latencies: [Double] = []
                    for _ in 0..<50 { latencies.append(try await BusyServeScenario.get(client, base + path)) }
                    errors += latencies.filter { $0 < 0 }.count + (cold.last ?? -1 < 0 ? 1 : 0)
                    let sorted = latencies.filter { $0 >= 0 }.sorted()
                    p50s.append(sorted[sorted.count / 2])
                    p99s.append(sorted[min(sorted.count - 1, sorted.count * 99 / 100)])
                    try await client.shutdown()
                } catch {
                    try? await client.shutdown()
                    throw error
                }
            }
            let stores = ((try? FileManager.default.subpathsOfDirectory(atPath: folder)) ?? []).filter { $0.hasSuffix(".tiles") }.count
            lines.append(
                String(
                    format: "serve-collection  %@ of 2,000 images: cold %.1f ms, warm p50 %.2f ms  p99 %.2f ms  errors %d  stores built %d",
                    label, ScenarioResult.median(cold), ScenarioResult.median(p50s), ScenarioResult.median(p99s), errors, stores))
        }
        return lines
    }
}
