import Foundation
import Hummingbird
import Logging
import Synchronization
import TileCore
import TileServer

#if canImport(Glibc)
import Glibc
#endif

/// The child processes of the load scenarios.
enum LoadChildren {
    /// `serve-server`: `TileServer` over the folder `input` (a cache beside it), access log off, until
    /// SIGTERM; the port it listens on goes to `report`. `serve-server-uploads` takes uploads too;
    /// `serve-server-metrics` counts its requests through swift-prometheus, as `tiler serve` does.
    static func serve(input: String, report: String, uploads: Bool, metrics: Bool = false) async throws {
        let registry = metrics ? ServerMetrics.bootstrapPrometheus() : nil
        var server = try TileServer(root: input, cache: "\(input)/.cache", uploads: uploads ? UploadPolicy(token: "bench") : nil)
        server.metricsRegistry = registry
        var logger = Logger(label: "bench.server")
        logger.logLevel = .warning
        let app = server.application(host: "127.0.0.1", port: 0, logger: logger) { channel in
            try? "\(channel.localAddress?.port ?? 0)\n".write(toFile: report, atomically: true, encoding: .utf8)
        }
        try await app.runService()
    }

    /// `encode-floor`: every level-0 tile of the store `input/photo.tiles`, in the cold scenario's order,
    /// read (`readTile`, one `pread` into the thread's own buffer) and encoded as JPEG Q80 by the
    /// server's encoder, on two threads, as the server reads and encodes a tile not yet cached; the
    /// elapsed seconds.
    static func encodeFloor(input: String) throws -> Double {
        let image = try TiledImage.open(store: "\(input)/photo.tiles")
        let g = image.geometry
        var generator = SplitMix(seed: 42)
        let tiles = (0..<g.levels[0].rows).flatMap { r in (0..<g.levels[0].columns).map { ($0, r) } }.shuffled(using: &generator)
        // Untimed: every tile read once, so the page cache holds the level as it does for the server
        // that runs after this (the store was written with O_DIRECT, past the page cache). Through
        // another image of the store: the one timed has read nothing yet, as the server's has not.
        let warming = try TiledImage.open(store: "\(input)/photo.tiles")
        var scratch = [UInt8](repeating: 0, count: g.tileByteCount)
        for (c, r) in tiles {
            try scratch.withUnsafeMutableBytes { try warming.readTile(level: 0, column: c, row: r, into: $0) }
        }
        let next = Atomic<Int>(0)
        let failed = Atomic<Bool>(false)
        let start = ContinuousClock.now
        let done = DispatchGroup()
        for _ in 0..<2 {
            done.enter()
            Thread.detachNewThread {
                defer { done.leave() }
                guard let encoder = try? TileJPEGEncoder(quality: 80) else { return failed.store(true, ordering: .relaxed) }
                var own = [UInt8](repeating: 0, count: g.tileByteCount)  // as the server's encoders keep one
                while true {
                    let i = next.wrappingAdd(1, ordering: .relaxed).oldValue
                    guard i < tiles.count else { return }
                    let (c, r) = tiles[i]
                    let (w, h) = (min(g.tileSize, g.levels[0].width - c * g.tileSize), min(g.tileSize, g.levels[0].height - r * g.tileSize))
                    do {
                        let data = try own.withUnsafeMutableBytes { raw in
                            try image.readTile(level: 0, column: c, row: r, into: raw)
                            return try encoder.encode(UnsafeRawBufferPointer(raw), stride: g.tileSize * 4, width: w, height: h)
                        }
                        if data.isEmpty { failed.store(true, ordering: .relaxed) }
                    } catch { failed.store(true, ordering: .relaxed) }
                }
            }
        }
        done.wait()
        guard !failed.load(ordering: .relaxed) else { throw BenchmarkError("an encode failed") }
        return seconds(ContinuousClock.now - start)
    }
}
