import Foundation
import Testing
import TestSupport
import TestTraits
import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// `deploy/`: Varnish (its shard director) in front of three `tiler serve` instances that share one
/// folder and one cache folder, and Prometheus scraping them, all on loopback, as the configuration
/// files in `deploy/` say (only their ports rewritten). Skipped, with a message, where `varnishd` or
/// `prometheus` is not installed (CI installs both).
@Suite("Varnish and Prometheus in front of three instances", .serialized, .ownThreads)
struct DeployTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    /// One HTTP/1.1 exchange with the given header fields (`Connection: close`).
    static func get(
        _ port: Int, _ path: String, host: String = "127.0.0.1", _ fields: [(String, String)] = [], method: String = "GET", body: Data? = nil
    ) throws -> (status: Int, headers: [String: String], body: Data) {
        let connection = try LoopbackConnection(port: UInt16(port))
        let extra = fields.map { "\($0.0): \($0.1)\r\n" }.joined() + (body.map { "Content-Length: \($0.count)\r\n" } ?? "")
        try connection.send(Data("\(method) \(path) HTTP/1.1\r\nHost: \(host)\r\n\(extra)Connection: close\r\n\r\n".utf8) + (body ?? Data()))
        let reply = connection.read(timeout: .seconds(60)).bytes
        guard let split = reply.range(of: Data("\r\n\r\n".utf8)) else { return (0, [:], Data()) }
        let lines = String(decoding: reply[..<split.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return (Int(lines[0].split(separator: " ")[1]) ?? 0, headers, Data(reply[split.upperBound...]))
    }

    /// Asks until the answer is not a 503 (a build in progress) or a minute passes.
    static func settled(_ port: Int, _ path: String, _ fields: [(String, String)] = []) throws -> (status: Int, headers: [String: String], body: Data)
    {
        var reply = try get(port, path, fields)
        for _ in 0..<600 where reply.status == 503 || reply.status == 0 {
            usleep(100_000)
            reply = try get(port, path, fields)
        }
        return reply
    }

    /// Replaces `path` with `data` as a deployment would: written beside it, renamed over it.
    static func replace(_ path: String, with data: Data) throws {
        try data.write(to: URL(fileURLWithPath: path + ".new"))
        guard rename(path + ".new", path) == 0 else { throw TileError(.io, "rename failed") }
    }

    static func metric(_ port: Int, _ name: String) throws -> Double {
        let samples = ServeCommandTests.samples(String(decoding: try get(port, "/metrics").body, as: UTF8.self))
        return samples[name] ?? 0
    }

    /// How many of Varnish's backends its probes find healthy now (`varnishadm backend.list`), and how many are sick.
    static func backendHealth(_ workFolder: String) -> (healthy: Int, sick: Int) {
        guard let list = try? Tools.run("varnishadm", ["-n", workFolder, "backend.list"]), list.status == 0 else { return (0, 0) }
        // Name, Admin ("probe" for a probed backend or director), Probe, Health, Last change.
        var (healthy, sick) = (0, 0)
        for line in list.text.split(separator: "\n").dropFirst() {
            let fields: [Substring] = line.split(separator: " ")
            // The three backends (boot.tiler1-3), not the director over them (boot.tilers).
            guard fields.count > 3, fields[1] == "probe", fields[0].last?.isNumber == true else { continue }
            if fields[3] == "healthy" { healthy += 1 } else if fields[3] == "sick" { sick += 1 }
        }
        return (healthy, sick)
    }

    /// Varnish as `deploy/varnish/tiler.vcl` configures it, its three backends' ports rewritten to
    /// `backends`, listening on `port`, its work folder in `folder`: returned once it answers and its
    /// probes find every backend healthy.
    static func varnish(port varnishPort: Int, backends ports: [Int], folder: String) throws -> Daemon {
        let varnishd = try #require(Tools.path("varnishd"))
        var vcl = try String(contentsOfFile: "\(Self.repository)/deploy/varnish/tiler.vcl", encoding: .utf8)
        for (i, port) in ports.enumerated() { vcl = vcl.replacingOccurrences(of: "\"\(8081 + i)\"", with: "\"\(port)\"") }
        try vcl.write(toFile: "\(folder)/tiler.vcl", atomically: true, encoding: .utf8)
        // A Daemon, not a Process: varnishd closes the descriptors it inherits, among them the socket by
        // which Foundation's Process learns that a child ended; Foundation then waits for varnishd on
        // the one thread that reaps every Process of this test run, and no other test's child is
        // seen to end until varnishd does.
        let varnish = try Daemon(
            varnishd,
            [
                "-F", "-j", "none", "-n", "\(folder)/varnish", "-f", "\(folder)/tiler.vcl", "-a", "127.0.0.1:\(varnishPort)",
                "-s", "malloc,64m", "-p", "ban_lurker_sleep=0.05"
            ])
        do {
            var up = false
            for _ in 0..<300 where !up {
                up = (try? Self.get(varnishPort, "/health").status) == 200
                if !up { usleep(100_000) }
            }
            try #require(up, "varnishd did not answer on port \(varnishPort)")
            // Every backend probed healthy (the probes' window fills in a few seconds).
            var health = Self.backendHealth("\(folder)/varnish")
            for _ in 0..<300 where health.healthy < 3 {
                usleep(50_000)
                health = Self.backendHealth("\(folder)/varnish")
            }
            try #require(health.healthy == 3, "backends healthy: \(health)")
        } catch {
            varnish.stop(SIGKILL)
            throw error
        }
        return varnish
    }

    /// Stops `instance` (SIGTERM, within 30 s) and waits until Varnish's probes find one backend sick.
    static func stop(_ instance: ServeCommandTests.Server, behind folder: String) {
        let ended = instance.terminate(within: 30)
        #expect(ended?.status == 0, "\(String(describing: ended)): \(instance.errorsSoFar().suffix(3000))")
        var afterStop = Self.backendHealth("\(folder)/varnish")
        for _ in 0..<300 where afterStop.sick < 1 {
            usleep(50_000)
            afterStop = Self.backendHealth("\(folder)/varnish")
        }
        #expect(afterStop.healthy == 2 && afterStop.sick == 1, "backends after one stopped: \(afterStop)")
    }

    @Test(
        "30 images through Varnish: each built once across the instances, cached, revalidated, purged; an instance stopped loses nothing; Prometheus scrapes all three",
        .enabled(if: Tools.have("varnishd", "varnishadm"), "varnishd is not installed (apt-get install varnish)"))
    func varnishAndPrometheus() throws {
        let folder = try TilerCommandTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var sources: [Data] = []
        for i in 0..<30 {
            let jpeg = try JPEGEncoder.encode(pixels: Synthetic.pixels(width: 300 + i, height: 200), width: 300 + i, height: 200)
            try jpeg.write(to: URL(fileURLWithPath: "\(folder)/img\(i).jpg"))
            sources.append(jpeg)
        }
        // Three instances over the same folder and cache; Varnish on 127.0.0.1 is their trusted proxy.
        let token = "admin-token-0123456789"
        let varnishPort = Int(Tools.freePort())
        var instances: [ServeCommandTests.Server] = []
        defer { for server in instances where server.process.isRunning { kill(server.process.processIdentifier, SIGKILL) } }
        for _ in 0..<3 {
            instances.append(
                try ServeCommandTests.Server([
                    folder, "--port", "0", "--cache", "\(folder)/.shared-cache", "--image-max-age", "3", "--document-max-age", "3",
                    "--trusted-proxy", "127.0.0.1", "--allowed-host", "127.0.0.1", "--allowed-host", "images.example.org",
                    "--admin-token", token, "--purge-url", "http://127.0.0.1:\(varnishPort)"
                ]))
        }
        let ports = instances.map(\.port)
        let varnish = try Self.varnish(port: varnishPort, backends: ports, folder: folder)
        defer { varnish.stop(SIGKILL) }

        // Every image's tile through Varnish, then the same again.
        let tile = { (i: Int) in "/dzi/img\(i)_files/8/0_0.jpg" }
        for i in 0..<30 { #expect(try Self.settled(varnishPort, tile(i)).status == 200, "img\(i)") }
        // Tiles of an image still being built are answered (not stored): wait for the builds to end.
        var completed = try ports.map { try Self.metric($0, "tiler_builds_total{outcome=\"completed\"}") }
        for _ in 0..<600 where completed.reduce(0, +) < 30 {
            usleep(100_000)
            completed = try ports.map { try Self.metric($0, "tiler_builds_total{outcome=\"completed\"}") }
        }
        #expect(completed.reduce(0, +) == 30, "builds per instance: \(completed)")
        #expect(completed.filter { $0 > 0 }.count >= 2, "the identifiers are spread: \(completed)")
        // Once every build has ended (the counter moves just before the image is ready: asked until an
        // answer is stored), a tile asked twice: the second a hit.
        var again = try Self.get(varnishPort, tile(0))
        for _ in 0..<100 {
            again = try Self.get(varnishPort, tile(0))
            if (again.headers["x-varnish"]?.split(separator: " ").count ?? 0) == 2 { break }
            usleep(50_000)
        }
        #expect(again.status == 200 && (again.headers["x-varnish"]?.split(separator: " ").count ?? 0) == 2, "a hit: \(again.headers)")
        #expect(again.headers["age"] != nil)

        // A client's forwarded headers are not the proxy's: Varnish sends its own, so no client names the
        // URL in an info.json cached for everyone (issue 37: one request made the next clean client's id
        // https://evil.example/...). The request that tries, then a clean one (a hit): both the real URL.
        let poison = [
            ("X-Forwarded-Host", "evil.example"), ("X-Forwarded-Proto", "https"), ("X-Forwarded-Prefix", "/evil"),
            ("X-Forwarded-Port", "444"), ("Forwarded", "host=evil.example;proto=https")
        ]
        for fields in [poison, [], poison] {
            let info = try Self.settled(varnishPort, "/iiif/3/img1/info.json", fields)
            let text = String(decoding: info.body, as: UTF8.self)
            #expect(info.status == 200 && text.contains("\"id\":\"http://127.0.0.1/iiif/3/img1\"") && !text.contains("evil"), "\(fields): \(text)")
        }

        // Expired: revalidated by Varnish with a 304 from the instance, nothing encoded again.
        let misses = try ports.map { try Self.metric($0, "tiler_cache_misses_total") }.reduce(0, +)
        let notModified = try ports.map { try Self.metric($0, "tiler_requests_total{route=\"dzi_tile\",status=\"304\"}") }.reduce(0, +)
        // Past the lifetime (3 s): asked until Varnish revalidates (it serves the stored copy until then).
        var revalidated = try Self.get(varnishPort, tile(0))
        for _ in 0..<200
        where try ports.map({ try Self.metric($0, "tiler_requests_total{route=\"dzi_tile\",status=\"304\"}") }).reduce(0, +) == notModified {
            usleep(50_000)
            revalidated = try Self.get(varnishPort, tile(0))
        }
        #expect(revalidated.status == 200 && revalidated.body == again.body)
        #expect(try ports.map { try Self.metric($0, "tiler_requests_total{route=\"dzi_tile\",status=\"304\"}") }.reduce(0, +) == notModified + 1)
        #expect(try ports.map { try Self.metric($0, "tiler_cache_misses_total") }.reduce(0, +) == misses)

        // A master replaced: fresh through Varnish once the lifetime passes; at once after an admin purge.
        let replacement = try JPEGEncoder.encode(pixels: Synthetic.smooth(width: 300, height: 200), width: 300, height: 200)
        let before = try Self.get(varnishPort, tile(0)).body
        try Self.replace("\(folder)/img0.jpg", with: replacement)
        // The instances at once (they trust a checked source for a second at most).
        var direct = try Self.settled(ports[0], tile(0))
        for _ in 0..<30 where direct.body == before { usleep(100_000); direct = try Self.settled(ports[0], tile(0)) }
        #expect(direct.body != before, "an instance still answers the old tile 3 s after the replacement")
        // Through Varnish once the lifetime (3 s) passes.
        var fresh = try Self.settled(varnishPort, tile(0))
        for _ in 0..<100 where fresh.body == before { usleep(100_000); fresh = try Self.settled(varnishPort, tile(0)) }
        #expect(fresh.body == direct.body, "Varnish still answers the old tile 10 s after the replacement")
        let cachedTile = try Self.get(varnishPort, tile(5)).body
        let other = try JPEGEncoder.encode(pixels: Synthetic.smooth(width: 305, height: 200), width: 305, height: 200)
        try Self.replace("\(folder)/img5.jpg", with: other)
        let purge = try Self.get(ports[0], "/admin/images/img5", [("Authorization", "Bearer \(token)")], method: "DELETE")
        #expect(purge.status == 200, "\(String(decoding: purge.body, as: UTF8.self))")
        let purged = try Self.settled(varnishPort, tile(5))
        #expect(purged.status == 200 && purged.body != cachedTile, "the purge banned the cached tile")

        // One instance stopped: after the probe window, every image is still answered (no 5xx).
        Self.stop(instances[1], behind: folder)
        var failures = 0
        for round in 0..<2 {
            for i in 0..<30 {
                let reply = try Self.get(varnishPort, "/dzi/img\(i)_files/7/0_0.jpg?round=\(round)")
                if reply.status >= 500 { failures += 1 }
            }
        }
        #expect(failures == 0, "\(failures) answers of 5xx after the probe window")

        // Prometheus scrapes the instances still running; a query through its API finds the counter.
        guard let prometheus = Tools.path("prometheus") else {
            print("DeployTests: Prometheus part skipped: prometheus not installed (apt-get install prometheus)")
            return
        }
        var config = try String(contentsOfFile: "\(Self.repository)/deploy/prometheus/prometheus.yml", encoding: .utf8)
        for (i, port) in ports.enumerated() { config = config.replacingOccurrences(of: "127.0.0.1:\(8081 + i)", with: "127.0.0.1:\(port)") }
        config = config.replacingOccurrences(of: "scrape_interval: 15s", with: "scrape_interval: 1s")
        try config.write(toFile: "\(folder)/prometheus.yml", atomically: true, encoding: .utf8)
        let prometheusPort = Int(Tools.freePort())
        let scraper = try Daemon(
            prometheus,
            [
                "--config.file=\(folder)/prometheus.yml", "--storage.tsdb.path=\(folder)/tsdb", "--web.listen-address=127.0.0.1:\(prometheusPort)"
            ])
        defer { scraper.stop(SIGKILL) }
        var found = ""
        for _ in 0..<600 where !(found.contains("\"instance\":\"127.0.0.1:\(ports[0])\"") && found.contains("\"instance\":\"127.0.0.1:\(ports[2])\""))
        {
            usleep(100_000)
            found = String(decoding: (try? Self.get(prometheusPort, "/api/v1/query?query=tiler_requests_total").body) ?? Data(), as: UTF8.self)
        }
        #expect(
            found.contains("\"status\":\"success\"") && found.contains("\"instance\":\"127.0.0.1:\(ports[0])\"")
                && found.contains("\"instance\":\"127.0.0.1:\(ports[2])\""), "\(found.prefix(500))")
    }
}
