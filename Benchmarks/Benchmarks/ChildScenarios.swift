import AsyncHTTPClient
import CJpegShim
import NIOCore
import Foundation
import TileActors
import TileCore
import TileNetwork

/// The in-process scenarios, run once in a child process; the elapsed seconds go to `--report`.
func runChild(_ name: String, arguments: Arguments) async throws {
    guard let input = arguments.value("--input"), let report = arguments.value("--report") else {
        throw BenchmarkError("--child needs --input and --report")
    }
    let clock = ContinuousClock()
    let start = clock.now
    switch name {
    case "decode-floor":
        var result = cjs_reference_result()
        guard cjs_reference_decode_file_discard(input, &result) == CJS_OK else {
            throw BenchmarkError("decode failed")
        }
    case "build", "build-lean", "build-buffered", "build-1thread", "build-mmap":
        // build: the defaults (pwrite strips; tiling on a worker thread, writing on a write-behind
        // thread with two tile rows per level; O_DIRECT).
        // build-lean: one tile row per level, the worker writes its strips itself.
        // build-buffered: the same through the page cache; build-1thread: everything on the caller's
        // thread, through the page cache; build-mmap: the two-tile-row mmap window, one thread.
        var options = BuildOptions()
        options.writer = name == "build-mmap" ? .mappedWindow : .stripWrite
        options.overlapsWriting = name == "build" || name == "build-lean" || name == "build-buffered"
        options.writesBehind = name != "build-lean"
        options.bypassesPageCache = name == "build" || name == "build-lean"
        let image = try TileBuilder.build(contentsOfFile: input, options: options)
        guard image.isComplete else { throw BenchmarkError("incomplete pyramid") }
    case "read-tile-1", "read-tile-6":
        let (cold, warm) = try ReadScenarios.tileReads(input: input, orientation: name == "read-tile-6" ? .rotate90 : .identity)
        try latencyReport(["warm": warm, "cold": cold], to: report)
        return
    case "load-8-c1", "load-8-c2":
        // 8 copies of one photo through ImageLoader; the harness measures the whole process's peak RSS.
        let sources: [any ImageSource] = (0..<8).map { _ in FileImageSource(path: input) }
        let report = await ImageLoader(maximumConcurrency: name == "load-8-c1" ? 1 : 2).load(sources)
        guard report.failures.isEmpty else { throw BenchmarkError("a load failed") }
    case "thumb-1500":
        let out = NSTemporaryDirectory() + "/tiledimagekit-bench-thumb-\(getpid()).jpg"
        defer { unlink(out) }
        _ = try ImageResizer.resize(contentsOfFile: input, to: [.init(maxEdge: 1500, path: out)])
    case "thumbnailer-100-q1", "thumbnailer-100-q2":
        // 100 photos (the same file), a 1500 px copy and a 256 px thumbnail each, through the queue.
        let folder = NSTemporaryDirectory() + "/tiledimagekit-bench-thumbs-\(getpid())"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let thumbnailer = Thumbnailer(queue: HeavyWorkQueue(maximumConcurrency: name.hasSuffix("q1") ? 1 : 2))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<100 {
                group.addTask {
                    _ = try await thumbnailer.makeCopies(
                        of: input, targets: [.init(maxEdge: 1500, path: "\(folder)/\(i)-1500.jpg"),
                                             .init(maxEdge: 256, path: "\(folder)/\(i)-256.jpg")])
                }
            }
            try await group.waitForAll()
        }
    case "net-download-only", "net-download-then-build":
        // The whole body into memory (AsyncHTTPClient), then (for the second) a build of it.
        guard let url = arguments.value("--url") else { throw BenchmarkError("--url missing") }
        let response = try await HTTPImageSource.sharedClient.execute(HTTPClientRequest(url: url), timeout: .minutes(5))
        var body = try await response.body.collect(upTo: 1 << 31)
        let bytes = body.readBytes(length: body.readableBytes) ?? []
        if name == "net-download-then-build" { _ = try TileBuilder.build(data: bytes) }
    case "net-stream-build":
        // Build while downloading: HTTPImageSource streams the body into an ImageBuilder.
        guard let url = arguments.value("--url") else { throw BenchmarkError("--url missing") }
        let builder = try ImageBuilder()
        try await HTTPImageSource(url: url).feed(into: builder)
        _ = try await builder.finish()
    case "info-read":
        try latencyReport(["warm": try ReadScenarios.infoReads(input: input)], to: report)
        return
    default:
        throw BenchmarkError("unknown scenario \(name)")
    }
    try "\(seconds(clock.now - start))\n".write(toFile: report, atomically: false, encoding: .utf8)
}

/// Writes `p50 p99` lines per series: the primary (first line) is the warm median.
func latencyReport(_ series: [String: [Double]], to path: String) throws {
    var lines: [String] = []
    for key in ["warm", "cold"] {
        guard let values = series[key] else { continue }
        lines.append("\(percentile(values, 0.5)) \(key)-p99=\(percentile(values, 0.99)) \(key)-p50=\(percentile(values, 0.5))")
    }
    try (lines.joined(separator: " ") + "\n").write(toFile: path, atomically: false, encoding: .utf8)
}
