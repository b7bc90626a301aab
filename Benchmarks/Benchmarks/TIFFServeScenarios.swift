import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// `serve-tiff` (issue 26): the server over a TIFF store of the input, side by side in one run with
/// nginx serving the same tiles as static files and with IIPImage (Debian's `iipimage-server`,
/// FastCGI behind nginx) serving the same TIFF.
///
/// - cold native tiles: every level-0 DeepZoom tile once, in random order, 64 clients, on a server
///   started for the run (nothing cached in it) while the TIFF is in the page cache. nginx serves the
///   bytes our server answered (fetched once from another server process and written as files);
///   IIPImage answers the same tiles as IIIF `x,y,256,256/256,` requests of its TIFF.
/// - 512-px regions: IIIF `x,y,512,512/max/0/default.jpg` at random places of level 0 (none asked
///   twice), one connection then eight, 5 s each: p50, p99.
/// - the servers' peak RSS after both (ours one process; IIPImage's processes summed).
enum TIFFServeScenarios {
    static let iipsrv = "/usr/lib/iipimage-server/iipsrv.fcgi"

    static func run(input: String, runs: Int) async throws -> [String] {
        guard Scenario.which("h2load") != nil, Scenario.which("wrk") != nil else {
            return ["serve-tiff: skipped (needs h2load and wrk)"]
        }
        let (image, setup) = try prepare(input: input, name: "servetiff")
        let folder = setup.folder
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let g = image.geometry
        let tiles = LoadScenarios.shuffledTiles(setup)
        let paths = tiles.map { "/dzi/photo_files/\(setup.top)/\($0.0)_\($0.1).jpg" }
        var lines: [String] = []

        // The static copy: what our server answers for each tile, as files (and the TIFF read once).
        let copied = try await copyTiles(setup, paths: paths, into: "\(folder)/static")
        lines.append(String(format: "serve-tiff: %d level-0 tiles, %.1f MB as our server sends them", paths.count, Double(copied) / 1e6))

        var (ours, nginxRates, oursMax, failures): ([Double], [Double], [Double], Int) = ([], [], [], 0)
        var peak = Double.nan
        var regions: [String] = []
        for run in 0..<runs {
            let (server, base) = try LoadScenarios.startServer(setup)
            defer { server.stop() }
            let result = try OnceEachResult.run(base: base, paths: paths, connections: 64, suspending: [server.pid])
            ours.append(result.requestsPerSecond)
            oursMax.append(result.maxMilliseconds)
            failures += result.failures
            if let nginx = try nginxCold(setup, root: "\(folder)/static", paths: paths) { nginxRates.append(nginx) }
            if run == runs - 1 {
                regions = try regionLatencies(base: base, prefix: "/iiif/3/photo", geometry: g, folder: folder)
                peak = server.statusMiB("VmHWM")
            }
        }
        let (rate, nginxRate) = (ScenarioResult.median(ours), ScenarioResult.median(nginxRates))
        lines.append(
            String(
                format: "serve-tiff-cold     %8.0f req/s  %.2fx nginx  max %.0f ms  failures %d  (rates %@)", rate, rate / nginxRate,
                oursMax.max() ?? .nan, failures, ours.map { String(format: "%.0f", $0) }.joined(separator: ", ")))
        lines.append(
            String(
                format: "nginx-tiff-cold     %8.0f req/s  (the same bytes as static files; rates %@)", nginxRate,
                nginxRates.map { String(format: "%.0f", $0) }.joined(separator: ", ")))
        lines += regions.map { "serve-tiff-" + $0 }
        lines.append(String(format: "serve-tiff peak RSS %6.1f MiB  (after the cold runs and the regions)", peak))
        lines += try warm(setup, root: "\(folder)/static", tiles: tiles, runs: runs)
        lines += try CLIServeScenario.run(setup, root: "\(folder)/static", tiles: tiles, paths: paths, runs: runs)
        lines += try iipImage(setup, tiff: "\(folder)/images/photo.tiles/pyramid.tif", geometry: g, tiles: tiles)
        return lines
    }

    /// Warm native tiles: 400 level-0 tiles of the cold order asked for again and again (`wrk -t2 -c64`,
    /// 10 s, ours and nginx alternately, after 3 s of each untimed), ours from the TIFF store (whole
    /// tiles kept in the encoded-image cache from their second request) against nginx serving the same
    /// bytes as files: requests per second, p99, each run's ratio to the nginx run before it.
    /// The input built into a TIFF store, `photo.tiles`, in a new folder of `$TMPDIR` (the caller removes
    /// it), and the load scenarios' description of it.
    static func prepare(input: String, name: String) throws -> (TiledImage, LoadScenarios.Setup) {
        let folder = NSTemporaryDirectory() + "/tiledimagekit-\(name)-\(getpid())"
        try? FileManager.default.removeItem(atPath: folder)
        try FileManager.default.createDirectory(atPath: "\(folder)/images", withIntermediateDirectories: true)
        var options = BuildOptions()
        options.format = .tiff()
        options.storage = .persistent(path: "\(folder)/images/photo.tiles")
        let image = try TileBuilder.build(contentsOfFile: input, options: options)
        let g = image.geometry
        let setup = LoadScenarios.Setup(
            folder: folder, images: "\(folder)/images", deepZoom: nil, top: g.deepZoomTopLevel, columns: g.levels[0].columns,
            rows: g.levels[0].rows)
        return (image, setup)
    }

    static func warm(_ setup: LoadScenarios.Setup, root: String, tiles: [(Int, Int)], runs: Int) throws -> [String] {
        let script = try LoadScenarios.cyclingScript(
            tiles.prefix(400).map { "/dzi/photo_files/\(setup.top)/\($0.0)_\($0.1).jpg" }, at: "\(setup.folder)/tiff-warm.lua")
        let (server, base) = try LoadScenarios.startServer(setup)
        defer { server.stop() }
        guard let (nginx, nginxBase) = try LoadScenarios.startNginx(setup, root: root) else { return ["serve-tiff-warm: skipped (no nginx)"] }
        defer { nginx.stop() }
        let (ours, theirs) = try WrkResult.alternating(ours: base, nginx: nginxBase, script: script, runs: runs)
        let (rate, nginxRate) = (ScenarioResult.median(ours.map(\.requestsPerSecond)), ScenarioResult.median(theirs.map(\.requestsPerSecond)))
        let paired = WrkResult.pairedRatios(ours, to: theirs)
        return [
            String(
                format: "serve-tiff-warm     %8.0f req/s  p99 %.2f ms  %.2fx nginx (run by run %@)  errors %d  server peak RSS %.0f MiB", rate,
                ScenarioResult.median(ours.map(\.p99Milliseconds)), rate / nginxRate, paired, ours.map(\.errors).reduce(0, +),
                server.statusMiB("VmHWM")),
            String(
                format: "nginx-tiff-warm     %8.0f req/s  p99 %.2f ms  (the same bytes as files; rates %@)", nginxRate,
                ScenarioResult.median(theirs.map(\.p99Milliseconds)),
                theirs.map { String(format: "%.0f", $0.requestsPerSecond) }.joined(separator: ", "))
        ]
    }

    /// Fetches every path from a server started for the purpose and writes each answer under `root`
    /// (the same path); the bytes written.
    static func copyTiles(_ setup: LoadScenarios.Setup, paths: [String], into root: String) async throws -> Int {
        let (server, base) = try LoadScenarios.startServer(setup)
        defer { server.stop() }
        try FileManager.default.createDirectory(atPath: "\(root)/photo_files/\(setup.top)", withIntermediateDirectories: true)
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        do {
            let total = try await withThrowingTaskGroup(of: Int.self) { group in
                var next = 0
                var total = 0
                func add() {
                    let path = paths[next]
                    next += 1
                    group.addTask {
                        let response = try await client.execute(HTTPClientRequest(url: base + path), timeout: .seconds(60))
                        guard response.status == .ok else { throw BenchmarkError("\(path): \(response.status)") }
                        let body = try await response.body.collect(upTo: 1 << 24)
                        let data = Data(body.readableBytesView)
                        try data.write(to: URL(fileURLWithPath: root + path.dropFirst("/dzi".count)))
                        return data.count
                    }
                }
                for _ in 0..<min(8, paths.count) { add() }
                while let bytes = try await group.next() {
                    total += bytes
                    if next < paths.count { add() }
                }
                return total
            }
            try await client.shutdown()
            return total
        } catch {
            try? await client.shutdown()
            throw error
        }
    }

    /// nginx serving `root`'s copies, every path once from 64 clients (its workers stopped until the
    /// clients wait, as ours is): requests per second, or nil without nginx or on a failure.
    static func nginxCold(_ setup: LoadScenarios.Setup, root: String, paths: [String], accessLog: String? = nil) throws -> Double? {
        guard let (nginx, base) = try LoadScenarios.startNginx(setup, root: root, accessLog: accessLog) else { return nil }
        defer { nginx.stop() }
        let workers = LoadScenarios.nginxWorkers(of: nginx.pid)
        let result = try OnceEachResult.run(base: base, paths: paths, connections: 64, suspending: [nginx.pid] + workers)
        return result.failures == 0 ? result.requestsPerSecond : nil
    }

    /// `count` distinct 512x512 regions of level 0 at random places (a fixed seed), as IIIF paths under
    /// `prefix` (ours: `/iiif/3/photo`; IIPImage's: `/iipsrv?IIIF=FILE`).
    static func regionPaths(prefix: String, geometry g: TileGeometry, count: Int, seed: UInt64) -> [String] {
        var generator = SplitMix(seed: seed)
        let (width, height) = (g.levels[0].width, g.levels[0].height)
        return (0..<count).map { _ in
            let x = Int.random(in: 0...(width - 512), using: &generator)
            let y = Int.random(in: 0...(height - 512), using: &generator)
            return "\(prefix)/\(x),\(y),512,512/512,/0/default.jpg"
        }
    }

    /// wrk over distinct regions at one connection, then at eight (other regions): a line for each.
    static func regionLatencies(base: String, prefix: String, geometry: TileGeometry, folder: String) throws -> [String] {
        var lines: [String] = []
        for (connections, seed) in [(1, UInt64(7)), (8, UInt64(8))] {
            let script = try LoadScenarios.cyclingScript(
                regionPaths(prefix: prefix, geometry: geometry, count: 8000, seed: seed), at: "\(folder)/regions-\(connections).lua")
            let r = try WrkResult.run(url: base, connections: connections, seconds: 5, script: script, timeoutSeconds: 10, threads: 1)
            lines.append(
                String(
                    format: "regions-c%d  %8.0f req/s  p50 %.2f ms  p99 %.2f ms  max %.1f ms  errors %d  (%d requests of 8,000 distinct)",
                    connections, r.requestsPerSecond, r.p50Milliseconds, r.p99Milliseconds, r.maxMilliseconds, r.errors, r.requests))
        }
        return lines
    }

    /// IIPImage over the same TIFF: cold tiles (IIIF, every level-0 tile once, 64 clients), the same
    /// region load, and the peak RSS of its processes (two, one a core, as spawn-fcgi -F 2 starts them).
    static func iipImage(_ setup: LoadScenarios.Setup, tiff: String, geometry g: TileGeometry, tiles: [(Int, Int)]) throws -> [String] {
        guard let spawn = Scenario.which("spawn-fcgi"), access(iipsrv, X_OK) == 0,
            let nginx = Scenario.which("nginx") ?? ["/usr/sbin/nginx"].first(where: { access($0, X_OK) == 0 })
        else { return ["iipimage: skipped (needs spawn-fcgi, nginx and Debian's iipimage-server)"] }
        let folder = setup.folder
        let (web, fcgi) = (21000 + Int(getpid() % 20000), 41000 + Int(getpid() % 20000))
        try """
        daemon off; pid \(folder)/iip-nginx.pid; error_log \(folder)/iip-nginx.log; worker_processes auto;
        events { worker_connections 4096; }
        http { access_log off; client_body_temp_path \(folder)/b; fastcgi_temp_path \(folder)/f;
          proxy_temp_path \(folder)/p; uwsgi_temp_path \(folder)/u; scgi_temp_path \(folder)/s;
          server { listen 127.0.0.1:\(web); keepalive_requests 1000000;
            location /iipsrv { fastcgi_pass 127.0.0.1:\(fcgi); fastcgi_param QUERY_STRING $query_string;
              fastcgi_param REQUEST_METHOD $request_method; fastcgi_param REQUEST_URI $request_uri;
              fastcgi_param SERVER_NAME $server_name; fastcgi_param SERVER_PORT $server_port;
              fastcgi_param SERVER_PROTOCOL $server_protocol; fastcgi_param HTTP_HOST $host; } } }
        """.write(toFile: "\(folder)/iip-nginx.conf", atomically: false, encoding: .utf8)
        setenv("LOGFILE", "\(folder)/iipsrv.log", 1)
        setenv("VERBOSITY", "0", 1)
        let spawner = try BackgroundProcess(
            spawn, ["-F", "2", "-a", "127.0.0.1", "-p", "\(fcgi)", "-P", "\(folder)/iip.pid", "--", iipsrv],
            outputPath: "\(folder)/spawn.log")
        spawner.wait()  // spawn-fcgi forks the two children, writes their pids, and exits
        let servers = ((try? String(contentsOfFile: "\(folder)/iip.pid", encoding: .utf8)) ?? "").split(separator: "\n").compactMap { pid_t($0) }
        defer { for pid in servers { kill(pid, SIGKILL) } }
        let front = try BackgroundProcess(nginx, ["-c", "\(folder)/iip-nginx.conf"], outputPath: "\(folder)/iip-nginx.out")
        defer { front.stop() }
        let base = "http://127.0.0.1:\(web)"
        let prefix = "/iipsrv?IIIF=\(tiff)"
        // Ready when it answers a tile (bounded).
        var ready = false
        for _ in 0..<200 where !ready {
            usleep(50_000)
            ready =
                (try? WrkResult.run(url: base + prefix + "/0,0,256,256/256,/0/default.jpg", connections: 1, seconds: 1, script: nil, threads: 1))
                .map { $0.requests > 0 && $0.errors == 0 } ?? false
        }
        guard ready, !servers.isEmpty else { return ["iipimage: skipped (it did not answer: \(folder)/iipsrv.log)"] }
        let (width, height) = (g.levels[0].width, g.levels[0].height)
        let paths = tiles.map { (c, r) in
            let (x, y) = (c * 256, r * 256)
            let (w, h) = (min(256, width - x), min(256, height - y))
            return "\(prefix)/\(x),\(y),\(w),\(h)/\(w),/0/default.jpg"
        }
        let workers = LoadScenarios.nginxWorkers(of: front.pid)
        let cold = try OnceEachResult.run(base: base, paths: paths, connections: 64, suspending: servers + [front.pid] + workers)
        var lines = [
            String(
                format: "iipimage-cold       %8.0f req/s  max %.0f ms  failures %d  (IIIF tiles of the same TIFF, 2 iipsrv processes behind nginx)",
                cold.requestsPerSecond, cold.maxMilliseconds, cold.failures)
        ]
        lines += try regionLatencies(base: base, prefix: prefix, geometry: g, folder: folder).map { "iipimage-" + $0 }
        let peaks = servers.map { BackgroundProcess.statusMiB(of: $0, "VmHWM") }
        lines.append(
            String(
                format: "iipimage peak RSS   %6.1f MiB  (its processes: %@)", peaks.reduce(0, +),
                peaks.map { String(format: "%.1f", $0) }.joined(separator: " + ")))
        return lines
    }
}
