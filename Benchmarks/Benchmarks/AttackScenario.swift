import Foundation
import TestSupport
import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// `serve-attack` (only when named): issue 37's figures, measured as the attack measured them.
/// - Renders abandoned: the release `tiler serve` (its defaults) over the input, built first; 24
///   connections each ask a different `full/{w},/0/default.png` (a render of about 4000 px a side,
///   held by the render queue) and hang up at once. A victim on another address asks an uncached
///   200-px region and `/ready`, while the 24 are in and just after they closed; the server's CPU in
///   the 3 s after the hang-up (work nobody waits for). Twice: the 24 from one address (a second
///   machine), and from 24 addresses (127.0.0.2 to .25, the per-client caps out of the way).
/// - Reads flooded: 3000 connections from one address each ask a 512-px region never asked before
///   (cheap renders, run at once rather than queued); the victim's region and `/ready` meanwhile,
///   and how many of the 3000 were answered 200 and 503.
/// - Builds purged: the input (and its progressive twin, when there is one) built by the server, and
///   `DELETE /admin/images/{id}` once a quarter of its rows are decoded: how long the answer takes.
/// - Status during builds: the input (and a PNG of it, made by vips: a raw store) built by the
///   server, its status and first tile asked for every 20 ms until it is ready: the slowest answers.
/// - Bombs, each built in a child process (`TileBuilder.build(contentsOfFile:)`): the empty-packet
///   JPEG 2000 codestreams declaring 16384 and 32768 a side in 4 x 4 code-blocks, and a valid
///   100-scan progressive JPEG of 8192 x 8192 zeros (cjpeg's most scans): outcome, CPU seconds
///   (`getrusage`), peak RSS (`VmHWM`). The bar: refused or built under 256 MiB and 5 s of CPU.
/// - The 1-bit PNG with tRNS of 32768 x 32768 (about 130 KB, a raw store of 5.7 GB) asked for from a
///   `tiler serve --cache-budget 3000000000`: the answer, and the most the cache folder held on disk
///   (sampled every 50 ms for 5 s).
enum AttackScenario {
    static let name = "serve-attack"

    static func run(input: String, runs: Int) throws -> [String] {
        let folder = NSTemporaryDirectory() + "/tiledimagekit-attack-\(getpid())"
        try? FileManager.default.removeItem(atPath: folder)
        try FileManager.default.createDirectory(atPath: "\(folder)/images", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var lines = try bombs(folder: folder)
        let tiler = (ChildProcess.selfExecutable as NSString).deletingLastPathComponent + "/tiler"
        guard access(tiler, X_OK) == 0 else {
            return lines + ["serve-attack: renders skipped (no release tiler beside the Benchmarks executable: swift build -c release)"]
        }
        lines += try abandonedRenders(tiler, input: input, folder: folder, runs: runs)
        lines += try pngOverBudget(tiler, folder: folder)
        return lines
    }

    // MARK: Renders abandoned

    static func abandonedRenders(_ tiler: String, input: String, folder: String, runs: Int) throws -> [String] {
        if link(input, "\(folder)/images/huge.jpg") != 0 { try FileManager.default.copyItem(atPath: input, toPath: "\(folder)/images/huge.jpg") }
        let info = try ImageInfo.read(contentsOfFile: input)
        let (server, base) = try CLIServeScenario.start(
            tiler, images: "\(folder)/images", cache: "\(folder)/cache", log: "\(folder)/tiler.log", options: ["--admin-token", adminToken])
        defer { server.stop() }
        let port = UInt16(base.split(separator: ":").last!)!
        // The store built before the clock starts.
        _ = try get(port, "/iiif/3/huge/info.json")
        let built = ContinuousClock.now + .seconds(600)
        while !String(decoding: try get(port, "/images/huge").body, as: UTF8.self).contains("\"ready\""), ContinuousClock.now < built {
            usleep(200_000)
        }
        var lines: [String] = []
        var victimIndex = 0
        for spread in [false, true] {
            var (during, after, readyDuring, readyAfter, cpu, refused) = ([Double](), [Double](), [Double](), [Double](), [Double](), 0)
            for run in 0..<runs {
                // 24 renders never asked before: widths differ by run and by address kind.
                let attackers = try (0..<24).map { index -> LoopbackConnection in
                    let connection = try LoopbackConnection(port: port, from: spread ? "127.0.0.\(2 + index)" : "127.0.0.2")
                    let width = 4000 + (spread ? 1000 : 0) + run * 24 + index
                    try connection.send(request(port, "/iiif/3/huge/full/\(width),/0/default.png"))
                    return connection
                }
                usleep(300_000)  // in the render queue, or running
                during.append(try victim(port, info, &victimIndex))
                readyDuring.append(try get(port, "/ready", from: "127.0.0.1").seconds)
                // Answers already there (503s past a cap) read, then every attacker hangs up at once.
                for attacker in attackers
                where attacker.read(timeout: .milliseconds(1), until: { $0.count >= 12 }).bytes.starts(with: Data("HTTP/1.1 503".utf8)) {
                    refused += 1
                }
                let before = cpuSeconds(server.pid)
                attackers.forEach { $0.shutDown() }
                let closedAt = ContinuousClock.now
                after.append(try victim(port, info, &victimIndex))
                readyAfter.append(try get(port, "/ready", from: "127.0.0.1").seconds)
                usleep(UInt32(max(0, 3.0 - seconds(ContinuousClock.now - closedAt)) * 1e6))
                cpu.append(cpuSeconds(server.pid) - before)
            }
            let ms = { (values: [Double]) in String(format: "%.0f ms (max %.0f)", ScenarioResult.median(values) * 1000, (values.max() ?? .nan) * 1000)
            }
            lines.append(
                String(
                    format:
                        "serve-attack-renders  24 fire-and-forget %@ from %@: victim's uncached 200-px region %@ while they wait, %@ after the hang-up; /ready %@, %@; server CPU in the 3 s after the hang-up %.2f s; answered 503 at once %d of %d",
                    "full/{w},/0/default.png (about 4000 px)", spread ? "24 addresses" : "one address", ms(during), ms(after), ms(readyDuring),
                    ms(readyAfter), ScenarioResult.median(cpu), refused, 24 * runs))
        }
        lines.append(try readFlood(port, info, runs: runs, victimIndex: &victimIndex))
        lines += try deletesDuringBuilds(port, input: input, folder: folder, runs: runs)
        lines += try statusDuringBuilds(port, input: input, folder: folder)
        return lines
    }

    /// The input built by the server (and, when vips is here, a PNG of it (compression 1): a master
    /// whose store is finished in a last phase of its own), its status (`/images/{id}`) and its top-left
    /// level-0 tile asked for every 20 ms from the first request until it is ready: the slowest
    /// answers (issue 37: 2.7 s in the last phase of a 268 MP build).
    static func statusDuringBuilds(_ port: UInt16, input: String, folder: String) throws -> [String] {
        let jpeg = "\(folder)/images/status-jpeg.jpg"
        if link(input, jpeg) != 0 { try FileManager.default.copyItem(atPath: input, toPath: jpeg) }
        var sources = [("JPEG", jpeg)]
        // Written before it is first asked for: the server builds on request.
        if let vips = Scenario.which("vips"),
            try BackgroundProcess(vips, ["copy", input, "\(folder)/images/status-png.png[compression=1]"], outputPath: "/dev/null").wait() == 0
        {
            sources.append(("PNG (made by vips)", "\(folder)/images/status-png.png"))
        }
        var lines: [String] = []
        for (kind, path) in sources {
            let id = ((path as NSString).lastPathComponent as NSString).deletingPathExtension
            let info = try ImageInfo.read(contentsOfFile: path)
            let top = try TileGeometry(storedWidth: info.width, storedHeight: info.height).deepZoomTopLevel
            let start = ContinuousClock.now
            _ = try get(port, "/iiif/3/\(id)/info.json")
            var (status, tile): ([Double], [Double]) = ([], [])
            let deadline = ContinuousClock.now + .seconds(900)
            while ContinuousClock.now < deadline {
                let answer = try get(port, "/images/\(id)")
                status.append(answer.seconds)
                let state = String(decoding: answer.body, as: UTF8.self)
                if state.contains("\"ready\"") { break }
                // The first tile once its rows are written (before, a request for it waits for them).
                if let range = state.range(of: "\"rowsDecoded\":"), let rows = Int(state[range.upperBound...].prefix { $0.isNumber }), rows >= 512 {
                    tile.append(try get(port, "/dzi/\(id)_files/\(top)/0_0.jpg").seconds)
                }
                usleep(20_000)
            }
            lines.append(
                String(
                    format:
                        "serve-attack-status   %@ of %d x %d built (%.0f s): its status asked %d times, slowest %.0f ms (p50 %.0f); its first tile once written, %d times, slowest %.0f ms (p50 %.0f)",
                    kind, info.width, info.height, seconds(ContinuousClock.now - start), status.count, (status.max() ?? .nan) * 1000,
                    ScenarioResult.median(status) * 1000, tile.count, (tile.max() ?? .nan) * 1000, ScenarioResult.median(tile) * 1000))
        }
        return lines
    }

    static let adminToken = "attack-scenario-admin-token"

    /// The input, and its progressive twin when there is one (`huge-progressive.jpg` beside
    /// `huge.jpg`), built by the server; a quarter of its rows decoded (a progressive JPEG's rows come
    /// in its last phase, after every scan), `DELETE /admin/images/{id}`: seconds until it is answered
    /// (the build stopped, its files removed).
    static func deletesDuringBuilds(_ port: UInt16, input: String, folder: String, runs: Int) throws -> [String] {
        var sources = [("baseline", input)]
        let twin = (input as NSString).deletingPathExtension + "-progressive.jpg"
        if FileManager.default.fileExists(atPath: twin) { sources.append(("progressive", twin)) }
        var lines: [String] = []
        for (kind, source) in sources {
            let height = try ImageInfo.read(contentsOfFile: source).height
            var seconds: [Double] = []
            for run in 0..<runs {
                let id = "deleted-\(kind)-\(run)"
                if link(source, "\(folder)/images/\(id).jpg") != 0 {
                    try FileManager.default.copyItem(atPath: source, toPath: "\(folder)/images/\(id).jpg")
                }
                _ = try get(port, "/iiif/3/\(id)/info.json")
                let deadline = ContinuousClock.now + .seconds(600)
                while ContinuousClock.now < deadline {
                    let state = String(decoding: try get(port, "/images/\(id)").body, as: UTF8.self)
                    guard let range = state.range(of: "\"rowsDecoded\":") else { break }  // not building any more
                    if let rows = Int(state[range.upperBound...].prefix { $0.isNumber }), rows >= height / 4 { break }
                    usleep(20_000)
                }
                let start = ContinuousClock.now
                let connection = try LoopbackConnection(port: port)
                try connection.send(
                    Data(
                        "DELETE /admin/images/\(id) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nAuthorization: Bearer \(adminToken)\r\nConnection: close\r\n\r\n"
                            .utf8))
                let answer = connection.read(timeout: .seconds(300)) { $0.count >= 12 }.bytes
                guard answer.starts(with: Data("HTTP/1.1 2".utf8)) else {
                    throw BenchmarkError("DELETE of \(id): \(String(decoding: answer.prefix(40), as: UTF8.self))")
                }
                seconds.append(Self.seconds(ContinuousClock.now - start))
                unlink("\(folder)/images/\(id).jpg")
            }
            lines.append(
                String(
                    format:
                        "serve-attack-delete   DELETE /admin/images/{id} of a %@ build with a quarter of its rows decoded: answered in %.0f ms (max %.0f)",
                    kind, ScenarioResult.median(seconds) * 1000, (seconds.max() ?? .nan) * 1000))
        }
        return lines
    }

    /// A victim's uncached 200-px region (a new place on the image each time, from 127.0.0.1): its seconds.
    static func victim(_ port: UInt16, _ info: ImageInfo, _ index: inout Int) throws -> Double {
        index += 1
        let (x, y) = ((index * 1913) % max(1, info.width - 1024), (index * 1409) % max(1, info.height - 1024))
        let answer = try get(port, "/iiif/3/huge/\(x),\(y),1024,1024/200,/0/default.jpg", from: "127.0.0.1")
        guard answer.status == 200 else { throw BenchmarkError("the victim's region: \(answer.status)") }
        return answer.seconds
    }

    /// 3000 connections from one address, each asking a 512-px region never asked before (a cheap
    /// render: a few milliseconds, run at once, not queued as large renders are), and a victim's
    /// region and `/ready` while they are answered.
    static func readFlood(_ port: UInt16, _ info: ImageInfo, runs: Int, victimIndex: inout Int) throws -> String {
        var (victims, ready, answered, refused) = ([Double](), [Double](), 0, 0)
        for run in 0..<runs {
            let attackers = try (0..<3000).map { index -> LoopbackConnection in
                let connection = try LoopbackConnection(port: port, from: "127.0.0.2")
                let k = run * 3000 + index
                let (x, y) = ((k * 7919) % (info.width - 512), (k * 104_729) % (info.height - 512))
                try connection.send(request(port, "/iiif/3/huge/\(x),\(y),512,512/512,/0/default.jpg"))
                return connection
            }
            usleep(100_000)
            victims.append(try victim(port, info, &victimIndex))
            ready.append(try get(port, "/ready", from: "127.0.0.1").seconds)
            for attacker in attackers {
                let head = attacker.read(timeout: .seconds(60)) { $0.count >= 12 }.bytes
                if head.starts(with: Data("HTTP/1.1 200".utf8)) { answered += 1 }
                if head.starts(with: Data("HTTP/1.1 503".utf8)) { refused += 1 }
                attacker.shutDown()
            }
        }
        return String(
            format:
                "serve-attack-reads    3000 connections from one address asking 512-px regions never asked before: victim's uncached 200-px region %.0f ms (max %.0f); /ready %.0f ms (max %.0f); the 3000 answered 200 %d, 503 %d of %d",
            ScenarioResult.median(victims) * 1000, (victims.max() ?? .nan) * 1000, ScenarioResult.median(ready) * 1000, (ready.max() ?? .nan) * 1000,
            answered, refused, 3000 * runs)
    }

    /// A GET with `Connection: close`, answered in full: its status, body and seconds.
    static func get(_ port: UInt16, _ path: String, from source: String? = nil) throws -> (status: Int, body: Data, seconds: Double) {
        let start = ContinuousClock.now
        let connection = try LoopbackConnection(port: port, from: source)
        try connection.send(request(port, path, close: true))
        let (reply, closed) = connection.read(timeout: .seconds(120))
        guard closed, let split = reply.range(of: Data("\r\n\r\n".utf8)) else { throw BenchmarkError("no answer to \(path) in 120 s") }
        let status = Int(String(decoding: reply.prefix(12).dropFirst(9), as: UTF8.self)) ?? 0
        return (status, Data(reply[split.upperBound...]), seconds(ContinuousClock.now - start))
    }

    static func request(_ port: UInt16, _ path: String, close: Bool = false) -> Data {
        Data("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\(close ? "Connection: close\r\n" : "")\r\n".utf8)
    }

    /// A process's user and system CPU so far (`/proc/PID/stat`), in seconds.
    static func cpuSeconds(_ pid: pid_t) -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = stat.lastIndex(of: ")") else { return .nan }
        // After the command's closing parenthesis: state is field 3; utime and stime are 14 and 15.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return .nan }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    // MARK: Bombs

    static func bombs(folder: String) throws -> [String] {
        var bombs: [(name: String, path: String)] = []
        for side: UInt32 in [16384, 32768] {
            let path = "\(folder)/empty-\(side).j2c"
            try Data(Bombs.emptyJPEG2000(width: side, height: side)).write(to: URL(fileURLWithPath: path))
            bombs.append(("JPEG 2000 of empty packets, \(side) x \(side) in 4 x 4 code-blocks", path))
        }
        var lines: [String] = []
        if let cjpeg = Scenario.which("cjpeg") {
            try Bombs.hundredScans.write(toFile: "\(folder)/scans.txt", atomically: true, encoding: .utf8)
            try Bombs.blackPGM(side: 8192).write(to: URL(fileURLWithPath: "\(folder)/zeros.pgm"))
            let path = "\(folder)/scans.jpg"
            let made = try BackgroundProcess(
                cjpeg, ["-grayscale", "-scans", "\(folder)/scans.txt", "-outfile", path, "\(folder)/zeros.pgm"], outputPath: "/dev/null"
            ).wait()
            unlink("\(folder)/zeros.pgm")
            if made == 0 { bombs.append(("progressive JPEG of 100 scans, 8192 x 8192 zeros", path)) }
        } else {
            lines.append("serve-attack-bombs: the scan bomb skipped (no cjpeg: apt-get install libjpeg-turbo-progs)")
        }
        for bomb in bombs {
            let report = "\(folder)/bomb-report.txt"
            let child = try ChildProcess.run(ChildProcess.selfExecutable, ["--child", "bomb", "--input", bomb.path, "--report", report])
            let words = ((try? String(contentsOfFile: report, encoding: .utf8)) ?? "").split(separator: " ", maxSplits: 2)
            guard child.exitStatus == 0, words.count == 3 else { throw BenchmarkError("the bomb child failed (\(child.exitStatus))") }
            lines.append(
                String(
                    format: "serve-attack-bomb     %@ (%d bytes): %@; CPU %@ s, peak RSS %@ MiB (bar: 5 s, 256 MiB)", bomb.name,
                    try fileSize(bomb.path),
                    String(words[2]).trimmingCharacters(in: .whitespacesAndNewlines), String(words[0]), String(words[1])))
        }
        return lines
    }

    /// In the child: builds `input`; writes its CPU seconds, peak RSS in MiB, and what came of it.
    static func bombChild(input: String, report: String) throws {
        var outcome: String
        do {
            let image = try TileBuilder.build(contentsOfFile: input)
            outcome = "built (\(image.geometry.levels[0].width) x \(image.geometry.levels[0].height))"
        } catch {
            outcome = "refused: \(error.code) \(error.message)"
        }
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        let cpu = Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
        try String(format: "%.2f %.0f %@\n", cpu, ownPeakMiB(), outcome).write(toFile: report, atomically: false, encoding: .utf8)
    }

    // MARK: The PNG over budget

    static func pngOverBudget(_ tiler: String, folder: String) throws -> [String] {
        guard let pnmtopng = Scenario.which("pnmtopng") else { return ["serve-attack-png: skipped (no pnmtopng: apt-get install netpbm)"] }
        let side = 32768
        let images = "\(folder)/png-images"
        try FileManager.default.createDirectory(atPath: images, withIntermediateDirectories: true)
        try (Data("P4\n\(side) \(side)\n".utf8) + Data(count: side / 8 * side)).write(to: URL(fileURLWithPath: "\(folder)/big.pbm"))
        let made = try BackgroundProcess(
            "/bin/sh", ["-c", "\"$0\" -transparent white \"$1\" > \"$2\"", pnmtopng, "\(folder)/big.pbm", "\(images)/big.png"],
            outputPath: "/dev/null"
        ).wait()
        unlink("\(folder)/big.pbm")
        guard made == 0 else { throw BenchmarkError("pnmtopng failed") }
        let budget = 3_000_000_000
        let cache = "\(folder)/png-cache"
        let (server, base) = try CLIServeScenario.start(
            tiler, images: images, cache: cache, log: "\(folder)/tiler-png.log", options: ["--cache-budget", "\(budget)"])
        defer { server.stop() }
        let port = UInt16(base.split(separator: ":").last!)!
        let answer = try get(port, "/iiif/3/big/full/256,/0/default.png")
        var most = 0
        for _ in 0..<100 {
            most = max(most, FileFacts.diskBytes(below: cache))
            usleep(50_000)
        }
        let geometry = try TileGeometry(storedWidth: side, storedHeight: side)
        let store = try geometry.levels.indices.reduce(0) { $0 + (try geometry.fileByteCount(level: $1)) }
        return [
            String(
                format:
                    "serve-attack-png      1-bit PNG with tRNS, %d x %d in %d bytes (a raw store of %.1f GB), budget %.1f GB: answered %d; the cache held at most %.1f MB",
                side, side, try fileSize("\(images)/big.png"), Double(store) / 1e9, Double(budget) / 1e9, answer.status, Double(most) / 1e6)
        ]
    }
}
