import Foundation
import Testing
import TestSupport
import TestTraits
import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// Restricted images (issue 41) behind `deploy/varnish/tiler.vcl`: three `tiler serve` instances
/// given the same `access` in their config file (one session key), Varnish in front as deployed.
/// A logged-in client's answers are never stored, and an anonymous client never receives one; the
/// login on one instance is taken by the others. Skipped where `varnishd` is not installed.
@Suite("Restricted images behind Varnish", .serialized, .ownThreads)
struct DeployAccessTests {
    @Test(
        "an anonymous client never receives what a logged-in client fetched first; the session taken by every instance",
        .enabled(if: Tools.have("varnishd", "varnishadm"), "varnishd is not installed (apt-get install varnish)"))
    func anonymousAfterLoggedIn() throws {
        let folder = try TilerCommandTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let jpeg = try JPEGEncoder.encode(pixels: Synthetic.pixels(width: 1200, height: 800), width: 1200, height: 800)
        for id in ["restricted-a", "restricted-b"] { try jpeg.write(to: URL(fileURLWithPath: "\(folder)/\(id).jpg")) }
        // alice's hash: `htpasswd -nbB alice wonderland-7` (Apache's tool, bcrypt).
        try Data("alice:$2y$05$ao1VyiSy1LpsK540fQfVdOyx3CoHGnKcFen6xpF6NGaorYwNHptJK\n".utf8).write(
            to: URL(fileURLWithPath: "\(folder)/users"))
        let config = """
            {"access": {"users": "users", "sessionKey": "the key the three instances share, 32 bytes or more", "userHeader": "X-Remote-User",
              "rules": [{"match": "restricted-a", "allow": ["alice"], "degraded": {"maxWidth": 300}},
                        {"match": "restricted-b", "allow": ["*"]}]}}
            """
        try Data(config.utf8).write(to: URL(fileURLWithPath: "\(folder)/serve.json"))
        var instances: [ServeCommandTests.Server] = []
        defer { for server in instances where server.process.isRunning { kill(server.process.processIdentifier, SIGKILL) } }
        for _ in 0..<3 {
            instances.append(
                try ServeCommandTests.Server([
                    folder, "--config", "\(folder)/serve.json", "--port", "0", "--cache", "\(folder)/.shared-cache",
                    "--trusted-proxy", "127.0.0.1", "--allowed-host", "127.0.0.1"
                ]))
        }
        let varnishPort = Int(Tools.freePort())
        let varnish = try DeployTests.varnish(port: varnishPort, backends: instances.map(\.port), folder: folder)
        defer { varnish.stop(SIGKILL) }
        let get = { (path: String, fields: [(String, String)]) in try DeployTests.settled(varnishPort, path, fields) }

        // The login, through Varnish (the form's CSRF cookie and field, then the post).
        let form = try get("/auth/login", [])
        let field = try #require(String(decoding: form.body, as: UTF8.self).firstMatch(of: /name="form" value="([^"]+)"/)?.1)
        let formCookie = try #require(form.headers["set-cookie"]?.split(separator: ";").first)
        let body = "form=\(field)&username=alice&password=wonderland-7"
        let login = try DeployTests.get(
            varnishPort, "/auth/login",
            [("Cookie", String(formCookie)), ("Content-Type", "application/x-www-form-urlencoded")], method: "POST", body: Data(body.utf8))
        let session = try #require(login.headers["set-cookie"]?.split(separator: ";").first.map(String.init), "\(login.status) \(login.headers)")
        #expect(session.hasPrefix("tiler_session=v1."))

        // Full-size tiles, twice each for the logged-in client (never a hit), then the anonymous client's
        // answer for the same URL: 401, every time.
        for path in [
            "/iiif/3/restricted-a/0,0,256,256/256,/0/default.jpg", "/iiif/3/restricted-b/full/200,/0/default.jpg",
            "/dzi/restricted-b_files/11/0_0.jpg"
        ] {
            for _ in 0..<2 {
                let seen = try get(path, [("Cookie", session)])
                #expect(seen.status == 200 && seen.headers["cache-control"]?.hasPrefix("private") == true, "\(path): \(seen.status) \(seen.headers)")
                #expect((seen.headers["x-varnish"]?.split(separator: " ").count ?? 0) == 1, "not a hit: \(seen.headers)")
            }
            for _ in 0..<2 {
                let anonymous = try get(path, [])
                #expect(anonymous.status == 401 && anonymous.headers["cache-control"]?.hasPrefix("private") == true, "\(path): \(anonymous.status)")
                // A session of no one (forged): the same.
                #expect(try get(path, [("Cookie", "tiler_session=v1.e30.AAAA")]).status == 401)
            }
        }
        // The tiered image's degraded size: anonymous 200 (private, never a hit), and the logged-in
        // client's full-size answer was never given to it.
        for _ in 0..<2 {
            let degraded = try get("/iiif/3/restricted-a/full/300,/0/default.jpg", [])
            #expect(degraded.status == 200 && (degraded.headers["x-varnish"]?.split(separator: " ").count ?? 0) == 1)
        }
        // A front proxy's user header from a client: removed by Varnish (none of its authenticators), while
        // an instance takes it from its trusted peer directly.
        let claimed = [("X-Remote-User", "alice")]
        #expect(try get("/iiif/3/restricted-b/full/8,/0/default.jpg", claimed).status == 401)
        #expect(try DeployTests.settled(instances[0].port, "/iiif/3/restricted-b/full/8,/0/default.jpg", claimed).status == 200)
        // The session was made by one instance; every instance served the tiles above (the shard key
        // spreads the identifiers): each instance takes it when asked directly.
        for instance in instances {
            #expect(try DeployTests.settled(instance.port, "/iiif/3/restricted-b/full/8,/0/default.jpg", [("Cookie", session)]).status == 200)
        }
    }
}
