import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The server as users run it: the release `tiler serve` from the command line with its defaults
/// (access log on, to a file as a service manager would take it; metrics on), against nginx with its
/// access log on (to a file, one `write` per request, its default), serving the same bytes:
/// - `serve-cli-warm`: 400 level-0 tiles of the TIFF store asked for again and again (`wrk -t2 -c64`,
///   10 s, nginx and ours alternately after 3 s of each untimed): requests per second, p99;
/// - `serve-nio-floor`: the same tiles from ``NIOFloorServer`` (NIO's decoder and pipeline answering
///   from memory, nothing else), against the same nginx: how near any NIO server comes;
/// - `serve-cli-access`: `serve-cli-warm` again with access rules configured (issue 41), none matching
///   the image: what a policy costs the images it does not restrict;
/// - `serve-cli-cold`: every level-0 tile once, a new `tiler serve` each run (nothing encoded, the
///   TIFF in the page cache), 64 clients, against nginx's run over the same files.
/// Needs the release `tiler` beside the Benchmarks executable (`swift build -c release`).
enum CLIServeScenario {
    static func run(_ setup: LoadScenarios.Setup, root: String, tiles: [(Int, Int)], paths: [String], runs: Int) throws -> [String] {
        let tiler = (ChildProcess.selfExecutable as NSString).deletingLastPathComponent + "/tiler"
        guard access(tiler, X_OK) == 0 else {
            return ["serve-cli: skipped (no release tiler beside the Benchmarks executable: swift build -c release)"]
        }
        let script = try LoadScenarios.cyclingScript(
            tiles.prefix(400).map { "/dzi/photo_files/\(setup.top)/\($0.0)_\($0.1).jpg" }, at: "\(setup.folder)/cli-warm.lua")
        let nginxLog = "\(setup.folder)/nginx-access.log"
        guard let (nginx, nginxBase) = try LoadScenarios.startNginx(setup, root: root, accessLog: nginxLog) else {
            return ["serve-cli: skipped (no nginx)"]
        }
        var lines: [String] = []
        do {
            defer { nginx.stop() }
            let (server, base) = try start(tiler, setup)
            defer { server.stop() }
            let (ours, theirs) = try WrkResult.alternating(ours: base, nginx: nginxBase, script: script, runs: runs)
            let (rate, nginxRate) = (ScenarioResult.median(ours.map(\.requestsPerSecond)), ScenarioResult.median(theirs.map(\.requestsPerSecond)))
            lines.append(
                String(
                    format:
                        "serve-cli-warm      %8.0f req/s  p99 %.2f ms  %.2fx nginx (run by run %@)  errors %d  (tiler serve's defaults: access log, metrics)",
                    rate, ScenarioResult.median(ours.map(\.p99Milliseconds)), rate / nginxRate, WrkResult.pairedRatios(ours, to: theirs),
                    ours.map(\.errors).reduce(0, +)))
            lines.append(
                String(
                    format: "nginx-cli-warm      %8.0f req/s  p99 %.2f ms  (its access log on; rates %@)", nginxRate,
                    ScenarioResult.median(theirs.map(\.p99Milliseconds)),
                    theirs.map { String(format: "%.0f", $0.requestsPerSecond) }.joined(separator: ", ")))
            // NIO's floor: the least a SwiftNIO server does for these tiles (``NIOFloorServer``), against
            // the same nginx, alternately.
            let (floor, floorBase) = try startFloor(setup, root: root)
            defer { floor.stop() }
            let (floorRuns, nginxRuns) = try WrkResult.alternating(ours: floorBase, nginx: nginxBase, script: script, runs: runs)
            let floorRate = ScenarioResult.median(floorRuns.map(\.requestsPerSecond))
            lines.append(
                String(
                    format:
                        "serve-nio-floor     %8.0f req/s  p99 %.2f ms  %.2fx nginx (run by run %@; nginx %.0f req/s)  tiler serve %.2fx the floor  errors %d  (NIO's decoder and pipeline, answers from memory, no log)",
                    floorRate, ScenarioResult.median(floorRuns.map(\.p99Milliseconds)),
                    floorRate / ScenarioResult.median(nginxRuns.map(\.requestsPerSecond)), WrkResult.pairedRatios(floorRuns, to: nginxRuns),
                    ScenarioResult.median(nginxRuns.map(\.requestsPerSecond)), rate / floorRate, floorRuns.map(\.errors).reduce(0, +)))
            // The same with restricted images configured (issue 41), none of them this one: what the
            // access rules cost an image they do not match.
            let config = "\(setup.folder)/access.json"
            try Data(
                #"{"access": {"sessionKey": "a benchmark's session key, 32 bytes or more", "rules": [{"match": "restricted*", "allow": ["*"]}]}}"#
                    .utf8
            ).write(to: URL(fileURLWithPath: config))
            let (restricting, restrictingBase) = try start(
                tiler, images: setup.images, cache: "\(setup.folder)/cli-cache", log: "\(setup.folder)/tiler-access.log",
                options: ["--config", config])
            defer { restricting.stop() }
            // Alternately with the server without rules (both idle but for the one asked).
            let (guarded, plain) = try WrkResult.alternating(ours: restrictingBase, nginx: base, script: script, runs: runs)
            let (guardedRate, plainRate) = (
                ScenarioResult.median(guarded.map(\.requestsPerSecond)), ScenarioResult.median(plain.map(\.requestsPerSecond))
            )
            lines.append(
                String(
                    format:
                        "serve-cli-access    %8.0f req/s  p99 %.2f ms  %.2fx the same without rules (run by run %@; %.0f req/s), %.2fx nginx's above  errors %d  (access rules, none matching)",
                    guardedRate, ScenarioResult.median(guarded.map(\.p99Milliseconds)), guardedRate / plainRate,
                    WrkResult.pairedRatios(guarded, to: plain), plainRate, guardedRate / nginxRate, guarded.map(\.errors).reduce(0, +)))
        }
        var (ours, nginxRates, failures): ([Double], [Double], Int) = ([], [], 0)
        for _ in 0..<runs {
            let (server, base) = try start(tiler, setup)
            let result = try OnceEachResult.run(base: base, paths: paths, connections: 64, suspending: [server.pid])
            server.stop()
            ours.append(result.requestsPerSecond)
            failures += result.failures
            if let nginx = try TIFFServeScenarios.nginxCold(setup, root: root, paths: paths, accessLog: nginxLog) { nginxRates.append(nginx) }
        }
        let (rate, nginxRate) = (ScenarioResult.median(ours), ScenarioResult.median(nginxRates))
        lines.append(
            String(
                format: "serve-cli-cold      %8.0f req/s  %.2fx nginx  failures %d  (rates %@; nginx %@)", rate, rate / nginxRate, failures,
                ours.map { String(format: "%.0f", $0) }.joined(separator: ", "), nginxRates.map { String(format: "%.0f", $0) }.joined(separator: ", ")
            ))
        return lines
    }

    /// ``NIOFloorServer`` in a child process over `root`'s files, once it listens; its base URL.
    static func startFloor(_ setup: LoadScenarios.Setup, root: String) throws -> (BackgroundProcess, String) {
        try LoadScenarios.startChild("nio-floor", input: root, folder: setup.folder, name: "floor")
    }

    /// `tiler serve FOLDER --port 0` with a cache of its own, once it says its port; its base URL.
    static func start(_ tiler: String, _ setup: LoadScenarios.Setup) throws -> (BackgroundProcess, String) {
        try start(tiler, images: setup.images, cache: "\(setup.folder)/cli-cache", log: "\(setup.folder)/tiler-\(UUID().uuidString).log")
    }

    /// `tiler serve IMAGES --port 0 --cache CACHE` and `options` (its output to `log`), once it says its
    /// port; its base URL.
    static func start(_ tiler: String, images: String, cache: String, log: String, options: [String] = []) throws -> (BackgroundProcess, String) {
        try start(tiler, arguments: ["serve", images, "--port", "0", "--cache", cache] + options, log: log)
    }

    /// `tiler` with `arguments` (a `serve` with `--port 0`; its output to `log`), once it says its port;
    /// its base URL.
    static func start(_ tiler: String, arguments: [String], log: String) throws -> (BackgroundProcess, String) {
        let process = try BackgroundProcess(tiler, arguments, outputPath: log)
        for _ in 0..<600 {
            if let range = process.output.range(of: "at http://127.0.0.1:"),
                let port = Int(process.output[range.upperBound...].prefix { $0.isNumber })
            {
                return (process, "http://127.0.0.1:\(port)")
            }
            usleep(50_000)
        }
        process.stop()
        throw BenchmarkError("tiler serve did not start: \(process.output.suffix(2000))")
    }
}
