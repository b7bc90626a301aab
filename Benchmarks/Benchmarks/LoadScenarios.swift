import AsyncHTTPClient
import Foundation
import NIOCore
import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// The server under load on loopback, side by side with nginx serving `vips dzsave`'s static tiles of
/// the same image (256, overlap 0, Q80): level-0 DeepZoom tiles, 64 connections.
///
/// - `serve-warm`: a working set of 400 tiles already encoded (each server asked for all once first),
///   `wrk -t2 -c64` for 10 s, nginx and ours alternately: requests per second and p99.
/// - `serve-cold`: every level-0 tile once, in random order, none encoded before (a new server process
///   each run), 64 clients (`h2load`, one per client: see ``OnceEachResult``); against the rate at which
///   the same tiles are read and encoded in-process on both cores (`encode-floor`, measured just before).
/// - `serve-soak` (run only when named): `wrk -c256` for `--soak-seconds` with mixed IIIF and DeepZoom
///   requests while JPEGs are built (first requests of 8 JPEGs, an upload every 15 s): errors, peak RSS,
///   descriptors before and after.
///
/// Access logs are off on both sides (nginx `access_log off`; our logger at `warning`).
enum LoadScenarios {
    static let names = ["serve-warm", "serve-cold", "serve-start", "serve-soak"]

    struct Setup {
        var folder: String
        /// The served folder: `photo.tiles`, the store of the input.
        var images: String
        /// vips dzsave's output (`dz.dzi`, `dz_files/`), when vips is on PATH.
        var deepZoom: String?
        /// DeepZoom's number of the full-size level, and its tile columns and rows.
        var top: Int
        var columns: Int
        var rows: Int
    }

    static func prepare(input: String) throws -> Setup {
        let folder = NSTemporaryDirectory() + "/tiledimagekit-load-\(getpid())"
        try? FileManager.default.removeItem(atPath: folder)
        try FileManager.default.createDirectory(atPath: "\(folder)/images", withIntermediateDirectories: true)
        var options = BuildOptions()
        options.storage = .persistent(path: "\(folder)/images/photo.tiles")
        let image = try TileBuilder.build(contentsOfFile: input, options: options)
        let g = image.geometry
        let top = g.deepZoomTopLevel
        var deepZoom: String?
        if let vips = Scenario.which("vips") {
            let run = try ChildProcess.run(
                vips, ["dzsave", input, "\(folder)/dz", "--tile-size", "256", "--overlap", "0", "--suffix", ".jpg[Q=80]"])
            if run.exitStatus == 0 { deepZoom = folder }
        }
        return Setup(folder: folder, images: "\(folder)/images", deepZoom: deepZoom, top: top, columns: g.levels[0].columns, rows: g.levels[0].rows)
    }

    /// Our server in a child process (`--child serve-server`), once it listens; its base URL.
    static func startServer(_ setup: Setup, uploads: Bool = false, metrics: Bool = false) throws -> (BackgroundProcess, String) {
        try startChild(
            uploads ? "serve-server-uploads" : metrics ? "serve-server-metrics" : "serve-server", input: setup.images, folder: setup.folder,
            name: "server")
    }

    /// A server of this executable in a child process (`--child scenario --input input`), once it has
    /// written its port to its report; its base URL. Its output goes to `folder/name.log`.
    static func startChild(_ scenario: String, input: String, folder: String, name: String) throws -> (BackgroundProcess, String) {
        let report = "\(folder)/\(name)-\(UUID().uuidString).txt"
        let process = try BackgroundProcess(
            ChildProcess.selfExecutable, ["--child", scenario, "--input", input, "--report", report], outputPath: "\(folder)/\(name).log")
        for _ in 0..<600 {
            if let text = try? String(contentsOfFile: report, encoding: .utf8), let port = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) {
                return (process, "http://127.0.0.1:\(port)")
            }
            usleep(50_000)
        }
        process.stop()
        throw BenchmarkError("the \(name) (\(scenario)) did not start: \(process.output)")
    }

    /// nginx (Debian's nginx-light) on a free loopback port, serving `root` at `/dzi/` (and `iiifRoot`'s
    /// `iiif/` folder at `/iiif/`, when given); its access log off, or to `accessLog` (one `write` per
    /// request, its default).
    static func startNginx(_ setup: Setup, root: String, iiifRoot: String? = nil, accessLog: String? = nil) throws -> (BackgroundProcess, String)? {
        guard let nginx = Scenario.which("nginx") ?? ["/usr/sbin/nginx"].first(where: { access($0, X_OK) == 0 }) else { return nil }
        let port = 20000 + Int(getpid() % 20000)
        let config = """
            worker_processes auto;
            pid \(setup.folder)/nginx.pid;
            error_log \(setup.folder)/nginx-error.log;
            daemon off;
            events { worker_connections 4096; }
            http {
              access_log \(accessLog ?? "off");
              sendfile on;
              tcp_nopush on;
              keepalive_requests 1000000;
              open_file_cache max=20000 inactive=60s;
              types { image/jpeg jpg; application/xml dzi; image/webp webp; image/avif avif; }
              client_body_temp_path \(setup.folder)/nginx-body;
              proxy_temp_path \(setup.folder)/nginx-proxy;
              server { listen 127.0.0.1:\(port); location /dzi/ { alias \(root)/; } \(iiifRoot.map { "location /iiif/ { root \($0); }" } ?? "") }
            }

            """
        try config.write(toFile: "\(setup.folder)/nginx.conf", atomically: false, encoding: .utf8)
        let process = try BackgroundProcess(nginx, ["-c", "\(setup.folder)/nginx.conf"], outputPath: "\(setup.folder)/nginx.log")
        for _ in 0..<100 {
            if FileManager.default.fileExists(atPath: "\(setup.folder)/nginx.pid") { return (process, "http://127.0.0.1:\(port)") }
            usleep(50_000)
        }
        process.stop()
        return nil
    }

    /// nginx's workers (one per core), once it has forked them all: nginx writes its pid file before
    /// it forks them, and a run that stops nginx until its clients wait must stop every one of them
    /// too, or they would answer before the clock starts.
    static func nginxWorkers(of master: pid_t) -> [pid_t] {
        var workers = childProcesses(of: master)
        for _ in 0..<100 where workers.count < ProcessInfo.processInfo.activeProcessorCount {
            usleep(50_000)
            workers = childProcesses(of: master)
        }
        return workers
    }

    /// A wrk script cycling through `paths`.
    static func cyclingScript(_ paths: [String], at path: String) throws -> String {
        let list = paths.map { "\"\($0)\"" }.joined(separator: ",\n")
        try """
        local paths = {\(list)}
        local i = 0
        request = function()
          i = i % #paths + 1
          return wrk.format(nil, paths[i])
        end

        """.write(toFile: path, atomically: false, encoding: .utf8)
        return path
    }

    /// `(column, row)` of every level-0 tile, shuffled with a fixed seed.
    static func shuffledTiles(_ setup: Setup) -> [(Int, Int)] {
        var generator = SplitMix(seed: 42)
        return (0..<setup.rows).flatMap { r in (0..<setup.columns).map { ($0, r) } }.shuffled(using: &generator)
    }

    static func warm(_ setup: Setup, runs: Int) throws -> [String] {
        guard setup.deepZoom != nil, Scenario.which("wrk") != nil else { return ["serve-warm: skipped (needs vips and wrk on PATH)"] }
        let workingSet = shuffledTiles(setup).prefix(400)
        let ours = try cyclingScript(workingSet.map { "/dzi/photo_files/\(setup.top)/\($0.0)_\($0.1).jpg" }, at: "\(setup.folder)/ours.lua")
        let theirs = try cyclingScript(workingSet.map { "/dzi/dz_files/\(setup.top)/\($0.0)_\($0.1).jpg" }, at: "\(setup.folder)/nginx.lua")
        let (server, base) = try startServer(setup)
        defer { server.stop() }
        let (counted, countedBase) = try startServer(setup, metrics: true)
        defer { counted.stop() }
        guard let (nginx, nginxBase) = try startNginx(setup, root: setup.folder) else { return ["serve-warm: skipped (no nginx)"] }
        defer { nginx.stop() }
        // Every tile of the working set asked for once (encoded, cached), and all three warmed up.
        _ = try WrkResult.run(url: base, connections: 64, seconds: 3, script: ours)
        _ = try WrkResult.run(url: countedBase, connections: 64, seconds: 3, script: ours)
        _ = try WrkResult.run(url: nginxBase, connections: 64, seconds: 3, script: theirs)
        // The HTTP stack's own floor: a route that answers at once, without a body (303 to info.json).
        let floorScript = try cyclingScript(["/iiif/3/photo"], at: "\(setup.folder)/floor.lua")
        var (mine, nginxRuns, floors, withMetrics): ([WrkResult], [WrkResult], [WrkResult], [WrkResult]) = ([], [], [], [])
        for _ in 0..<runs {
            nginxRuns.append(try WrkResult.run(url: nginxBase, connections: 64, seconds: 10, script: theirs))
            mine.append(try WrkResult.run(url: base, connections: 64, seconds: 10, script: ours))
            withMetrics.append(try WrkResult.run(url: countedBase, connections: 64, seconds: 10, script: ours))
            floors.append(try WrkResult.run(url: base, connections: 64, seconds: 10, script: floorScript))
        }
        func line(_ name: String, _ results: [WrkResult]) -> String {
            String(
                format: "%@ %8.0f req/s  p50 %.2f ms  p99 %.2f ms  max %.1f ms  errors %d  (rates %@)",
                name.padding(toLength: 19, withPad: " ", startingAt: 0),
                ScenarioResult.median(results.map(\.requestsPerSecond)), ScenarioResult.median(results.map(\.p50Milliseconds)),
                ScenarioResult.median(results.map(\.p99Milliseconds)), results.map(\.maxMilliseconds).max() ?? .nan,
                results.map(\.errors).reduce(0, +), results.map { String(format: "%.0f", $0.requestsPerSecond) }.joined(separator: ", "))
        }
        let ratio = ScenarioResult.median(mine.map(\.requestsPerSecond)) / ScenarioResult.median(nginxRuns.map(\.requestsPerSecond))
        let paired = WrkResult.pairedRatios(mine, to: nginxRuns)
        let floorRate = ScenarioResult.median(floors.map(\.requestsPerSecond))
        return [
            line("serve-303-floor", floors)
                + String(format: "  %.2fx nginx (our HTTP stack, no tile)", floorRate / ScenarioResult.median(nginxRuns.map(\.requestsPerSecond))),
            line("nginx-warm", nginxRuns),
            line("serve-warm", mine)
                + String(
                    format: "  %.2fx nginx (run by run %@), %.2fx the 303 floor  server peak RSS %.0f MiB", ratio, paired,
                    ScenarioResult.median(mine.map(\.requestsPerSecond)) / floorRate, server.statusMiB("VmHWM")),
            line("serve-warm-metrics", withMetrics)
                + String(
                    format: "  %.2fx metrics off, %.2fx nginx",
                    ScenarioResult.median(withMetrics.map(\.requestsPerSecond)) / ScenarioResult.median(mine.map(\.requestsPerSecond)),
                    ScenarioResult.median(withMetrics.map(\.requestsPerSecond)) / ScenarioResult.median(nginxRuns.map(\.requestsPerSecond)))
        ]
    }

    static func cold(_ setup: Setup, input: String, runs: Int) throws -> [String] {
        guard Scenario.which("h2load") != nil else { return ["serve-cold: skipped (needs h2load, Debian's nghttp2-client)"] }
        let tiles = shuffledTiles(setup)
        let paths = tiles.map { "/dzi/photo_files/\(setup.top)/\($0.0)_\($0.1).jpg" }
        let theirPaths = tiles.map { "/dzi/dz_files/\(setup.top)/\($0.0)_\($0.1).jpg" }
        if setup.deepZoom != nil {
            // nginx's tiles in the page cache, as the floor puts our level there.
            for path in theirPaths { _ = FileManager.default.contents(atPath: setup.folder + path.dropFirst(4)) }
        }
        var (rates, floors, nginxRates, maxima, failures, peaks): ([Double], [Double], [Double], [Double], Int, [Double]) = ([], [], [], [], 0, [])
        for _ in 0..<runs {
            // The floor: the same tiles read and encoded in this process's child, on both cores.
            let report = "\(setup.folder)/floor.txt"
            let child = try ChildProcess.run(ChildProcess.selfExecutable, ["--child", "encode-floor", "--input", setup.images, "--report", report])
            guard child.exitStatus == 0, let text = try? String(contentsOfFile: report, encoding: .utf8),
                let elapsed = Double(text.split(separator: " ").first ?? "")
            else { throw BenchmarkError("encode-floor failed") }
            floors.append(Double(tiles.count) / elapsed)
            let (server, base) = try startServer(setup)
            let result: OnceEachResult
            do {
                defer { server.stop() }
                result = try OnceEachResult.run(base: base, paths: paths, connections: 64, suspending: [server.pid])
                peaks.append(server.statusMiB("VmHWM"))
            }
            rates.append(result.requestsPerSecond)
            maxima.append(result.maxMilliseconds)
            failures += result.failures
            // The same clients against nginx serving vips's tiles of the same level: what the clients,
            // the loopback and a static file server cost per request, with nothing to encode.
            if setup.deepZoom != nil, let (nginx, nginxBase) = try startNginx(setup, root: setup.folder) {
                defer { nginx.stop() }
                let theirs = try OnceEachResult.run(
                    base: nginxBase, paths: theirPaths, connections: 64, suspending: [nginx.pid] + nginxWorkers(of: nginx.pid))
                if theirs.failures == 0 { nginxRates.append(theirs.requestsPerSecond) }
            }
        }
        let (rate, floor) = (ScenarioResult.median(rates), ScenarioResult.median(floors))
        var lines = [
            String(format: "encode-floor        %8.0f tiles/s (read + JPEG Q80, 2 threads, in-process)", floor)
        ]
        if !nginxRates.isEmpty {
            // Two cores' time per request adds up: a server that spent exactly the floor's time on each
            // tile, and otherwise cost what nginx and the clients cost, would reach this rate.
            let nginxRate = ScenarioResult.median(nginxRates)
            let ceiling = 1 / (1 / floor + 1 / nginxRate)
            lines.append(
                String(
                    format: "nginx-cold          %8.0f req/s  (vips's static tiles, the same clients; %.0f us of two cores per request)", nginxRate,
                    2e6 / nginxRate))
            lines.append(
                String(
                    format: "cold-ceiling        %8.0f req/s  %.2fx encode-floor (the floor's time per tile plus nginx-cold's per request)", ceiling,
                    ceiling / floor))
        }
        lines.append(
            String(
                format: "serve-cold          %8.0f req/s  %.2fx encode-floor  max %.0f ms  failures %d  server peak RSS %.0f MiB  (rates %@)", rate,
                rate / floor, maxima.max() ?? .nan, failures, ScenarioResult.median(peaks),
                rates.map { String(format: "%.0f", $0) }.joined(separator: ", ")))
        return lines
    }
}
