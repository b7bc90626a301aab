import AsyncHTTPClient
import Foundation
import Hummingbird
import Logging
import NIOCore
import NIOHTTP1
import TileServer

#if canImport(Glibc)
import Glibc
#endif

/// A JPEG just dropped into a served folder: how soon its `info.json`, a tile of its top row, and the
/// tiles of the viewer's fitted view (1920x1080: every tile of the level it shows, which needs every
/// row decoded) are answered, from the first request.
enum ServeScenarios {
    static func dropped(input: String) async throws -> [String: Double] {
        let folder = NSTemporaryDirectory() + "/tiledimagekit-bench-serve-\(getpid())"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        if link(input, "\(folder)/photo.jpg") != 0 { try FileManager.default.copyItem(atPath: input, toPath: "\(folder)/photo.jpg") }
        let server = try TileServer(root: folder, cache: "\(folder)/.cache")
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        var logger = Logger(label: "bench")
        logger.logLevel = .warning
        let app = server.application(host: "127.0.0.1", port: 0, logger: logger) { continuation.yield($0.localAddress?.port ?? 0) }
        let running = Task { try await app.runService(gracefulShutdownSignals: []) }
        defer { running.cancel() }
        var iterator = ports.makeAsyncIterator()
        let base = "http://127.0.0.1:\(await iterator.next() ?? 0)/iiif/3/photo"
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let clock = ContinuousClock()
        let start = clock.now
        func fetch(_ url: String) async throws -> [String: Any]? {
            let response = try await client.execute(HTTPClientRequest(url: url), timeout: .seconds(120))
            let body = try await response.body.collect(upTo: 64 << 20)
            guard response.status == .ok else { throw BenchmarkError("\(url): \(response.status)") }
            return url.hasSuffix("info.json") ? try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any] : nil
        }
        let info = try await fetch("\(base)/info.json")
        let infoTime = seconds(clock.now - start)
        _ = try await fetch("\(base)/0,0,256,256/max/0/default.jpg")
        let topTime = seconds(clock.now - start)
        // The viewer's fitted view of a 1920x1080 window: the level whose pixels are at most the
        // screen's (scale 2^k with 2^k * zoom <= 1 < 2^(k+1) * zoom), every tile of it.
        let (w, h) = (info?["width"] as? Int ?? 1, info?["height"] as? Int ?? 1)
        let zoom = min(1920 / Double(w), 1080 / Double(h))
        var k = 0
        while Double(1 << (k + 1)) * zoom <= 1 { k += 1 }
        let s = 1 << k, span = 256 * s
        var urls: [String] = []
        for y in stride(from: 0, to: h, by: span) {
            for x in stride(from: 0, to: w, by: span) {
                let (rw, rh) = (min(span, w - x), min(span, h - y))
                urls.append("\(base)/\(x),\(y),\(rw),\(rh)/\((rw + s - 1) / s),\((rh + s - 1) / s)/0/default.jpg")
            }
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (i, url) in urls.enumerated() {
                if i >= 6 { try await group.next() }  // six in flight, as the viewer
                group.addTask { _ = try await fetch(url) }
            }
            try await group.waitForAll()
        }
        let fittedTime = seconds(clock.now - start)
        try await client.shutdown()
        return ["info": infoTime, "topTile": topTime, "fitted": fittedTime]
    }
}
