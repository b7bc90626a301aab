import AsyncHTTPClient
import CJpegShim
import CJpegReference
import NIOCore
import Foundation
import Synchronization
import TileActors
import TileCore
import TileNetwork

/// The in-process scenarios, run once in a child process; the elapsed seconds go to `--report`.
func runChild(_ name: String, input: String, report: String, url: String?) async throws {
    guard !input.isEmpty, !report.isEmpty else {
        throw BenchmarkError("--child needs --input and --report")
    }
    let clock = ContinuousClock()
    let start = clock.now
    switch name {
    case "decode-floor":
        var result = cjs_reference_result()
        guard cjs_reference_decode_file_discard(input, &result) == 0 else {
            throw BenchmarkError("decode failed")
        }
    case "bomb":
        try AttackScenario.bombChild(input: input, report: report)
        return
    case "master-tiff", "master-raw":
        let (elapsed, extras) = try MasterScenarios.build(name, input: input)
        try writeReport(elapsed, extras: extras)
        return
    case "build-tiff", "build-tiff-progressive", "build-tiff-turned":
        // A TIFF store (issue 26): level 0 copied from the coefficients, the lower levels encoded;
        // turned by orientation 6 (issue 39), level 0 turned in the DCT domain.
        let (elapsed, extras) = try TIFFScenarios.build(input: input, orientation: name == "build-tiff-turned" ? .rotate90 : nil)
        try writeReport(elapsed, extras: extras)
        return
    case "build", "build-lean", "build-buffered", "build-1thread", "build-window", "build-whole-tiles", "build-memory",
        "build-progressive":
        // build: the defaults (the band writer: bands of 64 rows, tiled on a worker thread, written
        // with O_DIRECT AIO while the next band fills, three bands a level).
        // build-whole-tiles: the same with bands of whole tile rows (256 KiB blocks, two a level).
        // build-lean: one band a level, the worker writes it itself (synchronously).
        // build-buffered: the defaults through the page cache; build-1thread: everything on the
        // caller's thread, through the page cache; build-window: the two-tile-row mmap window.
        // build-memory: the defaults with a progressive JPEG's coefficients in memory (libjpeg's own
        // arrays) instead of a temporary file; the same as build for a baseline JPEG.
        var options = BuildOptions()
        if name == "build-memory" { options.coefficientStorage = .memory }
        switch name {
        case "build-window": options.writer = .window
        case "build-whole-tiles": options.writer = .bands(.init(rowsPerBlock: options.tileSize))
        case "build-lean": options.writer = .bands(.init(threading: .onWorker))
        case "build-buffered": options.writer = .bands(.init(bypassesPageCache: false))
        case "build-1thread": options.writer = .bands(.init(threading: .onCaller, bypassesPageCache: false))
        default: options.writer = .bands()
        }
        var image: TiledImage? = try TileBuilder.build(contentsOfFile: input, options: options)
        guard image?.isComplete == true else { throw BenchmarkError("incomplete pyramid") }
        // The pyramid is complete here; closing it (the kernel frees the unlinked files' blocks) is
        // timed on its own.
        let complete = clock.now
        image = nil
        try writeReport(seconds(complete - start), extras: ["release": seconds(clock.now - complete)])
        return
    case "write-only":
        // The build's writes alone: the same level files, writer and options (64-row bands, AIO,
        // O_DIRECT), fed a constant row for every level-0 row, with no decode: the device's share.
        try writeOnly(input: input)
        let complete = clock.now
        try writeReport(seconds(complete - start), extras: [:])
        return
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
                        of: input,
                        targets: [
                            .init(maxEdge: 1500, path: "\(folder)/\(i)-1500.jpg"),
                            .init(maxEdge: 256, path: "\(folder)/\(i)-256.jpg")
                        ])
                }
            }
            try await group.waitForAll()
        }
    case "net-download-only", "net-download-then-build":
        // The whole body into memory (AsyncHTTPClient), then (for the second) a build of it.
        guard let url else { throw BenchmarkError("--url missing") }
        let response = try await HTTPImageSource.sharedClient.execute(HTTPClientRequest(url: url), timeout: .minutes(5))
        var body = try await response.body.collect(upTo: 1 << 31)
        let bytes = body.readBytes(length: body.readableBytes) ?? []
        if name == "net-download-then-build" {
            let lastByte = clock.now
            let image = try TileBuilder.build(data: bytes)
            let complete = clock.now
            try writeReport(seconds(complete - start), extras: ["afterLastByte": seconds(complete - lastByte)])
            withExtendedLifetime(image) {}
            return
        }
    case "net-stream-build", "net-stream-build-nopreview", "net-stream-tiff":
        // Build while downloading: HTTPImageSource streams the body into an ImageBuilder, with the
        // previews a network source gets by default (ImageLoader's choice; set here as it would), or
        // without previews.
        guard let url else { throw BenchmarkError("--url missing") }
        var options = BuildOptions()
        options.preview = name == "net-stream-build-nopreview" ? .off : .afterScans(PreviewPolicy.automatic.scanCount(streaming: true))
        // net-stream-tiff: into a TIFF store, as `tiler serve` builds an upload or `tiler build` a URL
        // (issue 43: within 1.05x the bare download).
        if name == "net-stream-tiff" { options.format = .tiff() }
        let builder = try ImageBuilder(options: options)
        // The first and last bytes' arrivals: when the source hands over a body part, before decoding it.
        let firstByte = Mutex<ContinuousClock.Instant?>(nil)
        let lastByte = Mutex<ContinuousClock.Instant?>(nil)
        var source = HTTPImageSource(url: url)
        source.onBodyPart = { received, expected in
            let now = ContinuousClock.now
            firstByte.withLock { if $0 == nil { $0 = now } }
            if received == expected { lastByte.withLock { $0 = now } }
        }
        // The first progress report with a preview: its tiles are readable from then on.
        let firstPreview = Task { () -> ContinuousClock.Instant? in
            for await progress in builder.progress where progress.previewScan != nil { return ContinuousClock.now }
            return nil
        }
        try await source.feed(into: builder)
        let image = try await builder.finish()
        let complete = clock.now
        var extras = ["afterLastByte": seconds(complete - (lastByte.withLock { $0 } ?? complete))]
        if let preview = await firstPreview.value, let first = firstByte.withLock({ $0 }) {
            extras["firstPreview"] = seconds(preview - first)
        }
        try writeReport(seconds(complete - start), extras: extras)
        withExtendedLifetime(image) {}
        return
    case "info-read":
        try latencyReport(["warm": try ReadScenarios.infoReads(input: input)], to: report)
        return
    case "export-dzi":
        // tiler export's defaults: DeepZoom, 256-pixel tiles, no overlap, JPEG quality 80, tiles
        // encoded from the build's rows on every core. Outputs stay until the run ends (see
        // ExportScenarios.outputFolder).
        try ExportScenarios.exportDZI(input: input)
    case "serve-dropped":
        let extras = try await ServeScenarios.dropped(input: input)
        try writeReport(extras["fitted"] ?? 0, extras: extras)
        return
    case "files-floor":
        try ExportScenarios.createFiles(input: input)
    case "serve-server", "serve-server-uploads", "serve-server-metrics":
        try await LoadChildren.serve(input: input, report: report, uploads: name == "serve-server-uploads", metrics: name == "serve-server-metrics")
        return
    case "nio-floor":
        try await NIOFloorServer.serve(root: input, report: report)
        return
    case "encode-floor":
        try writeReport(try LoadChildren.encodeFloor(input: input), extras: [:])
        return
    case "render-512":
        let (cold, warm) = try ExportScenarios.renders(input: input)
        try latencyReport(["warm": warm, "cold": cold], to: report)
        return
    default:
        throw BenchmarkError("unknown scenario \(name)")
    }
    try "\(seconds(clock.now - start)) rss=\(ownPeakMiB())\n".write(toFile: report, atomically: false, encoding: .utf8)

    /// Writes the elapsed seconds, this process's own peak RSS and `extras` (seconds) to the report.
    func writeReport(_ elapsed: Double, extras: [String: Double]) throws {
        let words = extras.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        try ([String(elapsed), "rss=\(ownPeakMiB())"] + words).joined(separator: " ")
            .appending("\n").write(toFile: report, atomically: false, encoding: .utf8)
    }
}

/// This process's own peak resident set (`VmHWM`), in MiB. `wait4`'s `ru_maxrss` is not used for the
/// in-process scenarios: Linux carries the spawning parent's high-water mark into a child spawned
/// with `posix_spawn` (vfork), so it can never read lower than the harness itself.
func ownPeakMiB() -> Double {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
        let kib = Double(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
    else { return .nan }
    return kib / 1024
}

/// Writes `p50 p99` lines per series: the primary (first line) is the warm median.
func latencyReport(_ series: [String: [Double]], to path: String) throws {
    var lines: [String] = []
    for key in ["warm", "cold"] {
        guard let values = series[key] else { continue }
        lines.append("\(percentile(values, 0.5)) \(key)-p99=\(percentile(values, 0.99)) \(key)-p50=\(percentile(values, 0.5))")
    }
    try (lines.joined(separator: " ") + " rss=\(ownPeakMiB())\n").write(toFile: path, atomically: false, encoding: .utf8)
}

/// See the `write-only` scenario.
func writeOnly(input: String) throws {
    let info = try ImageInfo.read(contentsOfFile: input)
    let geometry = try TileGeometry(storedWidth: info.width, storedHeight: info.height)
    var descriptors: [Int32] = []
    defer { descriptors.forEach { close($0) } }
    let levels = geometry.levels.map { level -> cjs_level in
        var template = Array("\(NSTemporaryDirectory())/tiledimagekit-bench-write-XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        descriptors.append(fd)
        return cjs_level(
            fd: fd, width: UInt32(level.width), height: UInt32(level.height), x_offset: 0, y_offset: 0,
            columns: UInt32(level.columns), rows: UInt32(level.rows))
    }
    guard !descriptors.contains(-1) else { throw BenchmarkError("cannot create the level files") }
    var handle: OpaquePointer?
    var config = cjs_writer_config(
        kind: Int32(CJS_WRITER_BANDS.rawValue), band_rows: 0, band_threading: Int32(CJS_BANDS_WRITE_BEHIND.rawValue),
        bypass_page_cache: 1, export_to: nil, tiff: nil, tiff_quality: 0, tiff_tables: 0, tiff_orientation: 0, first_level: 0)
    var number: Int32 = 0
    guard
        cjs_pyramid_create(levels, UInt32(levels.count), UInt32(geometry.tileSize), &config, nil, &handle, &number)
            == CJS_OK, let pyramid = handle
    else { throw BenchmarkError("cannot create the pyramid writer (errno \(number))") }
    defer { cjs_pyramid_destroy(pyramid) }
    var pushed = 0
    var filled = Set<UnsafeMutableRawPointer>()
    while pushed < info.height {
        var slot: UnsafeMutableRawPointer?
        var stride = 0
        var capacity: UInt32 = 0
        guard cjs_pyramid_acquire_rows(pyramid, &slot, &stride, &capacity) == CJS_OK, let slot else {
            throw BenchmarkError("write failed")
        }
        let count = min(Int(capacity), info.height - pushed)
        // The row slots are the pyramid's; each is filled with grey once (the rows' content is not
        // the point here, their bytes are).
        if filled.insert(slot).inserted { slot.initializeMemory(as: UInt8.self, repeating: 128, count: stride * Int(capacity)) }
        guard cjs_pyramid_submit_rows(pyramid, UInt32(count)) == CJS_OK else { throw BenchmarkError("write failed") }
        pushed += count
    }
    guard cjs_pyramid_finish(pyramid) == CJS_OK else { throw BenchmarkError("write failed") }
}
