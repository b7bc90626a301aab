import Foundation
import Testing
import TestSupport
import TestTraits
import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// `deploy/nginx/tiler.conf` and `deploy/systemd/tiler.service` as shipped (only their addresses and
/// paths rewritten): nginx in front of `tiler serve` started as the site's comment says, and the unit
/// checked by systemd's own verifier.
@Suite("deploy/nginx and deploy/systemd, as shipped", .ownThreads)
struct ShippedDeployTests {
    /// `text` with each pair's first string replaced by the second; each must be there.
    static func rewritten(_ text: String, _ pairs: [(String, String)]) throws -> String {
        var text = text
        for (old, new) in pairs {
            try #require(text.contains(old), "the shipped file no longer has \(old)")
            text = text.replacingOccurrences(of: old, with: new)
        }
        return text
    }

    @Test(
        "nginx's site in front of tiler serve: info.json names the public URL and prefix, complete tiles are kept, /images/health answers",
        .enabled(if: Tools.have("nginx"), Comment(rawValue: Tools.missing("nginx"))))
    func nginxSite() throws {
        let folder = try TilerCommandTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try DemoImage.jpeg(width: 700, height: 500).write(to: URL(fileURLWithPath: "\(folder)/photo.jpg"))
        // As the site's comment says to start it.
        let server = try ServeCommandTests.Server([folder, "--port", "0", "--trusted-proxy", "127.0.0.1", "--allowed-host", "images.example.org"])
        defer { if server.process.isRunning { kill(server.process.processIdentifier, SIGKILL) } }
        let web = Tools.freePort()
        let site = try Self.rewritten(
            try String(contentsOfFile: "\(DeployTests.repository)/deploy/nginx/tiler.conf", encoding: .utf8),
            [
                ("server 127.0.0.1:8080", "server 127.0.0.1:\(server.port)"), ("listen 80;", "listen 127.0.0.1:\(web);"),
                ("/var/cache/nginx/tiler", "\(folder)/nginx-cache")
            ])
        try site.write(toFile: "\(folder)/tiler.conf", atomically: true, encoding: .utf8)
        let conf = """
            daemon off; pid \(folder)/nginx.pid; error_log \(folder)/nginx.log; worker_processes 1;
            events { worker_connections 64; }
            http { access_log off; client_body_temp_path \(folder)/b; proxy_temp_path \(folder)/p; fastcgi_temp_path \(folder)/f;
              uwsgi_temp_path \(folder)/u; scgi_temp_path \(folder)/s; include \(folder)/tiler.conf; }
            """
        try conf.write(toFile: "\(folder)/nginx.conf", atomically: true, encoding: .utf8)
        let nginx = try Daemon(Tools.path("nginx")!, ["-c", "\(folder)/nginx.conf"])
        defer { nginx.stop() }
        let host = "images.example.org:\(web)"
        func get(_ path: String) throws -> (status: Int, headers: [String: String], body: Data) {
            (try? DeployTests.get(Int(web), path, host: host)) ?? (0, [:], Data())
        }
        // nginx answers once it listens; the image is built on its first request (503 meanwhile).
        var health = try get("/images/health")
        let deadline = ContinuousClock.now + .seconds(30)
        while health.status != 200, ContinuousClock.now < deadline {
            usleep(50_000)
            health = try get("/images/health")
        }
        #expect(health.status == 200 && String(decoding: health.body, as: UTF8.self) == "ok\n", "\(health.status)")
        var info = try get("/images/iiif/3/photo/info.json")
        var state = ""
        for _ in 0..<600 where !state.contains("\"state\":\"ready\"") {
            state = String(decoding: try get("/images/images/photo").body, as: UTF8.self)
            usleep(50_000)
        }
        info = try get("/images/iiif/3/photo/info.json")
        #expect(info.status == 200, "\(info.status)")
        let json = try JSONSerialization.jsonObject(with: info.body) as? [String: Any]
        #expect(json?["id"] as? String == "http://images.example.org:\(web)/images/iiif/3/photo", "\(String(describing: json?["id"]))")
        // A complete tile: passed on once, then answered by nginx's cache.
        let first = try get("/images/dzi/photo_files/10/1_1.jpg")
        let second = try get("/images/dzi/photo_files/10/1_1.jpg")
        #expect(first.status == 200 && first.headers["x-cache-status"] == "MISS", "\(first.headers)")
        #expect(second.status == 200 && second.headers["x-cache-status"] == "HIT" && second.body == first.body, "\(second.headers)")
        let tile = try Reference.decode(second.body).image
        #expect(tile.width == 256 && tile.height == 244, "the edge tile of level 10 (700x500 at 1/1): \(tile.width)x\(tile.height)")
    }

    @Test(
        "the systemd unit passes systemd-analyze verify without a word",
        .enabled(if: Tools.have("systemd-analyze"), Comment(rawValue: Tools.missing("systemd-analyze"))))
    func systemdUnit() throws {
        let folder = try TilerCommandTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // The verifier checks that the program exists: the tiler under test stands in for /usr/local/bin's.
        let unit = try Self.rewritten(
            try String(contentsOfFile: "\(DeployTests.repository)/deploy/systemd/tiler.service", encoding: .utf8),
            [("ExecStart=/usr/local/bin/tiler", "ExecStart=\(TilerCommandTests.binary)")])
        try unit.write(toFile: "\(folder)/tiler.service", atomically: true, encoding: .utf8)
        let run = try Tools.run("systemd-analyze", ["verify", "\(folder)/tiler.service"])
        #expect(run.status == 0 && run.stderr.isEmpty && run.stdout.isEmpty, "\(run.stderr)\(run.text)")
    }
}
