import Foundation
import NIOConcurrencyHelpers
import Testing
import TestSupport
import TestTraits
import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// `tiler serve` as a user runs it: the built binary in a child process, asked over loopback with plain
/// HTTP/1.1, stopped with SIGTERM while an upload is still arriving.
@Suite("tiler serve on the command line", .serialized, .ownThreads)
struct ServeCommandTests {
    /// One HTTP/1.1 exchange on a connection of its own (`Connection: close`): status, headers, body.
    static func request(_ port: Int, _ method: String, _ path: String) throws -> (status: Int, headers: [String: String], body: Data) {
        let connection = try LoopbackConnection(port: UInt16(port))
        try connection.send(Data("\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n".utf8))
        let reply = connection.read(timeout: .seconds(60)).bytes
        guard let split = reply.range(of: Data("\r\n\r\n".utf8)) else { throw TileError(.io, "no HTTP reply to \(path)") }
        let lines = String(decoding: reply[..<split.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        let status = Int(lines[0].split(separator: " ")[1]) ?? 0
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return (status, headers, Data(reply[split.upperBound...]))
    }

    @Test("serves IIIF, DeepZoom and the pages; SIGTERM mid-upload exits 0 and leaves no unfinished files")
    func serveAndStop() throws {
        let folder = try TilerCommandTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let photo = try DemoImage.jpeg(width: 1200, height: 800)
        try photo.write(to: URL(fileURLWithPath: "\(folder)/photo.jpg"))
        // The idle timeout ends the stalled upload below once SIGTERM has come; long enough that a loaded
        // machine still sees the upload being built before it.
        let server = try Server([folder, "--port", "0", "--allow-uploads", "--upload-token", "t", "--idle-timeout", "10"])
        defer { if server.process.isRunning { kill(server.process.processIdentifier, SIGKILL) } }
        let port = server.port
        // The banner names the pages a person opens first, then the protocols' entry points.
        #expect(server.startup.contains("at http://127.0.0.1:\(port)/ (the list of images; /view/{id} a viewer, /iiif/3/{id}/info.json"))

        let info = try Self.request(port, "GET", "/iiif/3/photo/info.json")
        #expect(info.status == 200 && info.headers["content-type"] == "application/json")
        let json = try JSONSerialization.jsonObject(with: info.body) as? [String: Any]
        #expect(json?["width"] as? Int == 1200 && json?["height"] as? Int == 800)
        // A tile twice (rendered, then from the cache): libjpeg's decode of the source, within JPEG's error.
        let reference = try Reference.decode(photo).image
        var tileBytes = 0
        for _ in 0..<2 {
            let tile = try Self.request(port, "GET", "/dzi/photo_files/11/1_1.jpg")
            tileBytes = tile.body.count
            #expect(tile.status == 200 && tile.headers["content-type"] == "image/jpeg")
            let decoded = try Reference.decode(tile.body).image
            #expect(decoded.width == 256 && decoded.height == 256)
            #expect(Reference.psnr(decoded, Reference.crop(reference, x: 256, y: 256, width: 256, height: 256)) >= 30)
        }
        let listing = try Self.request(port, "GET", "/")
        #expect(listing.status == 200 && String(decoding: listing.body, as: UTF8.self).contains(">photo</a>"))
        #expect(try Self.request(port, "GET", "/view/photo").status == 200)
        #expect(try Self.request(port, "GET", "/iiif/3/..%2Fetc/info.json").status == 400)
        // The access log (standard error, Common Log Format), written by its own thread: the tile's two
        // answers (the second from the encoded-tile cache, the connection handler's) and the refusal.
        let tileLine = "\"GET /dzi/photo_files/11/1_1.jpg HTTP/1.1\" 200 \(tileBytes)"
        let refusalLine = "\"GET /iiif/3/..%2Fetc/info.json HTTP/1.1\" 400 "
        func logged() -> [Substring] {
            server.errorsSoFar().split(separator: "\n").filter { $0.hasPrefix("127.0.0.1 - - [") && $0.contains("/20") && $0.contains(" +0000] \"") }
        }
        let logDeadline = ContinuousClock.now + .seconds(30)
        while !logged().contains(where: { $0.contains(refusalLine) }), ContinuousClock.now < logDeadline { usleep(20_000) }
        #expect(logged().filter { $0.hasSuffix(tileLine) }.count == 2, "\(logged())")
        #expect(logged().contains { $0.contains(refusalLine) }, "\(logged())")

        // photo's build done first: the upload's build would wait for its turn behind it (one heavy job at
        // a time), and a loaded machine could take longer than the idle timeout to get there. (This test
        // waits holding its thread, on purpose: a wait for a thread of the cooperative pool, busy with
        // other tests, could outlast the idle timeout.)
        let built = ContinuousClock.now + .seconds(60)
        while !String(decoding: try Self.request(port, "GET", "/images/photo").body, as: UTF8.self).contains("\"ready\""), ContinuousClock.now < built
        {
            usleep(50_000)
        }
        // An upload that stops half-way: being built when SIGTERM arrives.
        let upload = try LoopbackConnection(port: UInt16(port))
        let head = "PUT /images/up HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer t\r\nContent-Length: \(photo.count)\r\n\r\n"
        try upload.send(Data(head.utf8) + photo.prefix(photo.count / 2))
        // Its state: building, every byte sent so far taken in, of the announced length.
        var state = ""
        let received = "\"bytesReceived\":\(photo.count / 2)"
        // (The bytes are taken in as the build keeps up: slowly on a loaded machine; the idle timeout
        // starts once the last of them is read.)
        let deadline = ContinuousClock.now + .seconds(60)
        while !(state.contains("\"building\"") && state.contains(received)), ContinuousClock.now < deadline {
            state = String(decoding: try Self.request(port, "GET", "/images/up").body, as: UTF8.self)
            usleep(20_000)
        }
        #expect(state.contains("\"building\"") && state.contains(received) && state.contains("\"rowsDecoded\":"), "\(state)")
        let ended = server.terminate(within: 30)
        #expect(ended?.status == 0 && ended?.signalled == false, "\(String(describing: ended))")
        // Left: the source, and the complete store of photo in the cache (with the record of which
        // version of photo.jpg it was built from); nothing of the upload.
        let left = try FileManager.default.contentsOfDirectory(atPath: folder).sorted()
        #expect(left == [".tiler-cache", "base.jpg", "p.jpg", "photo.jpg"], "\(left)")
        let cached = try FileManager.default.contentsOfDirectory(atPath: "\(folder)/.tiler-cache").sorted()
        #expect(cached == [".photo.lock", "photo.source", "photo.tiles"], "\(cached)")
        #expect(try TiledImage.open(store: "\(folder)/.tiler-cache/photo.tiles").isComplete)
    }

    @Test("serve builds TIFF stores by default and raw ones with --format raw; both serve the source's pixels")
    func storeFormats() throws {
        let photo = try DemoImage.jpeg(width: 700, height: 500)
        let reference = try Reference.decode(photo).image
        for (arguments, format, minimumPSNR) in [([String](), "tiff", 30.0), (["--format", "raw"], "raw", 35.0)] {
            let folder = try TilerCommandTests.folder()
            defer { try? FileManager.default.removeItem(atPath: folder) }
            try photo.write(to: URL(fileURLWithPath: "\(folder)/photo.jpg"))
            let server = try Server([folder, "--port", "0"] + arguments)
            defer { if server.process.isRunning { kill(server.process.processIdentifier, SIGKILL) } }
            // Level 0's tile (1, 1) of the DeepZoom pyramid (700x500: levels 0...10), against libjpeg's
            // decode of the source: a TIFF's level 0 holds the source's coefficients, a raw store its pixels.
            let tile = try Self.request(server.port, "GET", "/dzi/photo_files/10/1_1.jpg")
            #expect(tile.status == 200)
            let decoded = try Reference.decode(tile.body).image
            #expect(decoded.width == 256 && decoded.height == 244)
            let psnr = Reference.psnr(decoded, Reference.crop(reference, x: 256, y: 256, width: 256, height: 244))
            #expect(psnr >= minimumPSNR, "\(format): \(psnr) dB")
            #expect(server.terminate(within: 30)?.status == 0)
            // The store the server built, described from its manifest and files.
            #expect(try StoreDescription.read(at: "\(folder)/.tiler-cache/photo.tiles").format == format)
        }
    }

    /// The samples of a Prometheus text exposition: `name{labels}` (labels as written) to value.
    static func samples(_ text: String) -> [String: Double] {
        var samples: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            samples[String(line[..<space])] = value
        }
        return samples
    }

    @Test(
        "a cache folder that cannot be written is said at start; /ready and the image's answer say why",
        .enabled(if: Tmpfs.isAvailable, "\(Tmpfs.unavailableMessage) (a read-only tmpfs: root writes past modes)"))
    func unwritableCache() throws {
        let folder = try TilerCommandTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try DemoImage.jpeg(width: 300, height: 200).write(to: URL(fileURLWithPath: "\(folder)/photo.jpg"))
        let cache = try #require(Tmpfs.mount(bytes: 1 << 20, readOnly: true))
        defer { Tmpfs.unmount(cache) }
        let server = try Server([folder, "--port", "0", "--cache", cache])
        defer { if server.process.isRunning { kill(server.process.processIdentifier, SIGKILL) } }
        #expect(server.startup.contains("tiler: warning: the cache folder \(cache) cannot be written (Read-only file system)"), "\(server.startup)")
        let ready = try Self.request(server.port, "GET", "/ready")
        #expect(ready.status == 503 && String(decoding: ready.body, as: UTF8.self).contains("the cache folder cannot be written"))
        let info = try Self.request(server.port, "GET", "/iiif/3/photo/info.json")
        #expect(info.status == 500 && String(decoding: info.body, as: UTF8.self).contains("Read-only file system"), "\(info.status)")
    }

    @Test("the quick start's first command: demo --serve prints the viewer's URL, and the viewer and the image answer")
    func demoServe() throws {
        let server = try Server(["--serve", "--port", "0", "--width", "1024", "--height", "768"], command: "demo")
        defer { if server.process.isRunning { kill(server.process.processIdentifier, SIGKILL) } }
        #expect(try Self.request(server.port, "GET", "/view/demo").status == 200)
        let info = try Self.request(server.port, "GET", "/iiif/3/demo/info.json")
        let json = try JSONSerialization.jsonObject(with: info.body) as? [String: Any]
        #expect(info.status == 200 && json?["width"] as? Int == 1024 && json?["height"] as? Int == 768, "\(info.status)")
        kill(server.process.processIdentifier, SIGTERM)
        server.process.waitUntilExit()
        #expect(server.process.terminationStatus == 0)
    }

    @Test("a port in use is one line naming --port, not a stack of NIO's words")
    func portInUse() throws {
        let folder = try TilerCommandTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let first = try Server([folder, "--port", "0"])
        defer { if first.process.isRunning { kill(first.process.processIdentifier, SIGKILL) } }
        let second = try TilerCommandTests.run(["serve", folder, "--port", "\(first.port)"], in: folder)
        #expect(second.status == 1, "\(second)")
        #expect(
            second.stderr.hasPrefix("tiler: 127.0.0.1:\(first.port): the address is in use") && second.stderr.contains("--port"), "\(second.stderr)")
    }

    @Test("/metrics counts requests by route and status, cache hits and misses, the build; /ready says ready, or why not; --no-metrics turns it off")
    func metricsAndReadiness() throws {
        let folder = try TilerCommandTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try DemoImage.jpeg(width: 700, height: 500).write(to: URL(fileURLWithPath: "\(folder)/photo.jpg"))
        let server = try Server([folder, "--port", "0"], environment: ["TILER_RENDER_MEMORY": "64"])
        defer { if server.process.isRunning { kill(server.process.processIdentifier, SIGKILL) } }
        let port = server.port
        #expect(try Self.request(port, "GET", "/ready").status == 200)
        // The build started by info.json, and waited for.
        try Self.buildPhoto(port)
        // Six distinct tiles, each asked twice, and one unknown image: the four edge tiles cropped from their
        // stored tiles once (sent as stored, nothing encoded: no cache miss) and then answered from the cache;
        // the two whole tiles of the TIFF store sent as stored, each time (by the routes: a request with
        // `Connection: close` is not the connection handler's, which keeps a whole tile asked for again).
        for _ in 0..<2 {
            for (column, row) in [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1)] {
                #expect(try Self.request(port, "GET", "/dzi/photo_files/10/\(column)_\(row).jpg").status == 200)
            }
        }
        #expect(try Self.request(port, "GET", "/dzi/nothing_files/0/0_0.jpg").status == 404)
        let scrape = try Self.request(port, "GET", "/metrics")
        #expect(scrape.status == 200 && scrape.headers["content-type"]?.hasPrefix("text/plain; version=0.0.4") == true)
        let samples = Self.samples(String(decoding: scrape.body, as: UTF8.self))
        #expect(samples["tiler_requests_total{route=\"dzi_tile\",status=\"200\"}"] == 12, "\(samples.keys.sorted())")
        #expect(samples["tiler_requests_total{route=\"dzi_tile\",status=\"404\"}"] == 1)
        #expect(samples["tiler_requests_total{route=\"ready\",status=\"200\"}"] == 1)
        #expect(samples["tiler_requests_total{route=\"iiif_info\",status=\"200\"}"] == 1)
        #expect((samples["tiler_cache_misses_total"] ?? 0) == 0 && samples["tiler_cache_hits_total"] == 4, "\(samples)")
        #expect(samples["tiler_stored_tiles_total"] == 8)
        #expect(samples["tiler_builds_total{outcome=\"completed\"}"] == 1)
        #expect(samples["tiler_build_duration_seconds_count"] == 1)
        #expect((samples["tiler_request_duration_seconds_count{route=\"dzi_tile\"}"] ?? 0) >= 12)
        #expect((samples["tiler_response_bytes_total{route=\"dzi_tile\"}"] ?? 0) > 12 * 1000)
        #expect(samples["tiler_builds_running"] == 0 && samples["tiler_images_failed"] == 0)
        #expect((samples["tiler_disk_bytes_used"] ?? 0) > 0 && (samples["tiler_disk_bytes_limit"] ?? 0) >= Double(1 << 30))
        // The renders' memory as set (64 MiB, from the environment), and none running or waiting now.
        #expect(samples["tiler_render_memory_limit_bytes"] == Double(64 * 1024 * 1024))
        #expect(samples["tiler_renders_running"] == 0 && samples["tiler_renders_waiting"] == 0 && samples["tiler_render_memory_bytes"] == 0)
        // This scrape's own connection, and the last request's while its close is still on its way. A
        // slower server (under AddressSanitizer, CI once counted 3) may count earlier closes yet: scraped
        // again until they are through (each scrape's own close may then be pending: at most 2).
        var open = samples["tiler_connections_open"] ?? 0
        let settled = ContinuousClock.now + .seconds(10)
        while open > 2, ContinuousClock.now < settled {
            usleep(100_000)
            open = Self.samples(String(decoding: try Self.request(port, "GET", "/metrics").body, as: UTF8.self))["tiler_connections_open"] ?? 0
        }
        #expect((1...2).contains(open), "this scrape's own connection")
        #expect((samples["tiler_descriptors_open"] ?? 0) > 3)
        #expect(server.terminate(within: 30)?.status == 0)

        // A cache past its budget: not ready, and why. Metrics off: no /metrics.
        let small = try Server([folder, "--port", "0", "--cache-budget", "1000", "--no-metrics"])
        defer { if small.process.isRunning { kill(small.process.processIdentifier, SIGKILL) } }
        #expect(try Self.request(small.port, "GET", "/metrics").status == 404)
        var tile = try Self.request(small.port, "GET", "/dzi/photo_files/10/0_0.jpg")
        for _ in 0..<600 where tile.status == 503 { tile = try Self.request(small.port, "GET", "/dzi/photo_files/10/0_0.jpg") }
        let ready = try Self.request(small.port, "GET", "/ready")
        #expect(ready.status == 503 && String(decoding: ready.body, as: UTF8.self).contains("past its budget of 1000"), "\(ready)")
        #expect(small.terminate(within: 30)?.status == 0)
    }

    @Test("settings from a JSON file, the environment and the command line, in that order of precedence; bad ones refused naming the key")
    func configuration() throws {
        let folder = try TilerCommandTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try DemoImage.jpeg(width: 300, height: 200).write(to: URL(fileURLWithPath: "\(folder)/photo.jpg"))
        let config = "\(folder)/tiler.json"
        func write(_ json: String) throws { try json.write(toFile: config, atomically: true, encoding: .utf8) }
        // The file names the folder, the port, both lifetimes and a proxy; the environment overrides one
        // lifetime, the command line the other.
        try write(#"{"folder": "\#(folder)", "port": 0, "imageMaxAge": 11, "documentMaxAge": 12, "trustedProxies": ["127.0.0.1"], "format": "raw"}"#)
        let server = try Server(["--config", config, "--image-max-age", "31"], environment: ["TILER_DOCUMENT_MAX_AGE": "22"])
        defer { if server.process.isRunning { kill(server.process.processIdentifier, SIGKILL) } }
        #expect(server.port > 0, "the file's port 0: any free port")
        let connection = try LoopbackConnection(port: UInt16(server.port))
        let head =
            "GET /iiif/3/photo/info.json HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-Host: public.example\r\nX-Forwarded-Proto: https\r\nConnection: close\r\n\r\n"
        try connection.send(Data(head.utf8))
        let info = String(decoding: connection.read(timeout: .seconds(60)).bytes, as: UTF8.self)
        #expect(info.contains("Cache-Control: public, max-age=22"), "the environment over the file: \(info)")
        #expect(info.contains("\"id\":\"https://public.example/iiif/3/photo\""), "the file's trusted proxy")
        var tile = try Self.request(server.port, "GET", "/iiif/3/photo/full/max/0/default.jpg")
        for _ in 0..<600 where tile.headers["etag"] == nil { tile = try Self.request(server.port, "GET", "/iiif/3/photo/full/max/0/default.jpg") }
        #expect(tile.headers["cache-control"] == "public, max-age=31", "the command line over the file")
        #expect(server.terminate(within: 30)?.status == 0)
        #expect(try StoreDescription.read(at: "\(folder)/.tiler-cache/photo.tiles").format == "raw", "the file's format")

        // Refused at start (exit 64), naming the key.
        let key = "a session key of at least thirty-two bytes"
        let cases: [(String, [String: String], [String], String)] = [
            (#"{"port": "eighty"}"#, [:], [], "port"),
            (#"{"quality": 500}"#, [:], [], "quality"),
            (#"{"imageMaxAge": 1, "imgeMaxAge": 2}"#, [:], [], "imgeMaxAge"),
            ("{not json", [:], [], "cannot be read as JSON"),
            ("{}", ["TILER_MAX_UPLOADS": "many"], [], "TILER_MAX_UPLOADS"),
            ("{}", ["TILER_TRUSTED_PROXIES": "10.0.0.0/8,example.org"], [], "example.org"),
            (#"{"format": "webp"}"#, [:], [], "format"),
            (#"{"avifQuality": 0}"#, [:], [], "avifQuality"),
            ("{}", [:], ["--webp-quality", "101"], "webpQuality"),
            (#"{"webpMethod": 7}"#, [:], [], "webpMethod"),
            ("{}", [:], ["--avif-speed", "11"], "avifSpeed"),
            ("{}", ["TILER_AVIF_CHROMA": "422"], [], "avifChroma"),
            ("{}", [:], ["--render-memory", "0"], "renderMemory"),
            ("{}", [:], ["--idle-timeout", "0"], "idleTimeout"),
            (#"{"bucketTimeout": -1}"#, [:], [], "bucketTimeout"),
            // Past what the clocks' nanoseconds hold: it trapped (arithmetic overflow) before it was refused.
            ("{}", [:], ["--idle-timeout", "99999999999999"], "idleTimeout"),
            (#"{"bucketTimeout": 9223372036854775807}"#, [:], [], "bucketTimeout"),
            // URLs that end up in answers (issue 37): not a web URL, not an origin.
            ("{}", [:], ["--public-url", "javascript:alert(1)"], "publicURL"),
            ("{}", [:], ["--public-url", "https://user@images.example/x"], "publicURL"),
            (#"{"publicURL": "images.example"}"#, [:], [], "publicURL"),
            ("{}", [:], ["--upload-origin", "null"], "uploadOrigins"),
            ("{}", [:], ["--upload-origin", "*"], "uploadOrigins"),
            ("{}", [:], ["--upload-origin", "https://app.example/page"], "uploadOrigins"),
            ("{}", [:], ["--purge-url", "ftp://varnish"], "purgeURLs"),
            // A manifest's rights are a Creative Commons or RightsStatements.org URI (Presentation 3.0, 3.3.4).
            ("{}", [:], ["--rights", "https://example.org/our-terms"], "rights"),
            (#"{"requiredStatement": ""}"#, [:], [], "requiredStatement"),
            // Restricted images (issue 41): the access key's own mistakes, each named.
            (#"{"access": {"sessionKey": "short", "rules": []}}"#, [:], [], "access.sessionKey"),
            (#"{"access": {"sessionKey": "\#(key)", "rules": [], "user": "users"}}"#, [:], [], "access: a key tiler serve does not know: user"),
            (#"{"access": {"sessionKey": "\#(key)", "rules": [{"match": "a*", "allow": []}]}}"#, [:], [], "access.rules"),
            (#"{"access": {"sessionKey": "\#(key)", "rules": [], "users": "no-such-file"}}"#, [:], [], "access.users: cannot read"),
            (#"{"access": {"sessionKey": "\#(key)", "rules": [], "users": "plain"}}"#, [:], [], "access.users: every hash must be bcrypt"),
            (#"{"access": {"sessionKey": "\#(key)", "rules": [], "userHeader": "X-Remote-User"}}"#, [:], [], "access.userHeader"),
            (#"{"access": {"sessionKey": "\#(key)", "rules": [{"match": "a*"}]}}"#, [:], [], "access:"),
            (#"{"access": []}"#, [:], [], "access: must be an object"),
            (
                #"{"access": {"sessionKey": "\#(key)", "rules": [{"match": "a*", "allow": ["*"], "degraded": {"maxwidth": 400}}]}}"#, [:], [],
                "maxwidth"
            ),
            (#"{"access": {"sessionKey": "\#(key)", "rules": [{"match": "a*", "allow": ["*"], "degraded": {}}]}}"#, [:], [], "degraded needs"),
            (#"{"access": {"sessionKey": "\#(key)", "rules": [{"match": "a*", "alow": ["*"]}]}}"#, [:], [], "alow"),
            (#"{"access": {"sessionKey": "\#(key)", "rules": [], "origins": ["https://viewer.example/page"]}}"#, [:], [], "access.origins")
        ]
        // An htpasswd file of plain (not bcrypt) passwords (`htpasswd -p`'s), beside the config.
        try Data("alice:wonderland\n".utf8).write(to: URL(fileURLWithPath: "\(folder)/plain"))
        for (json, environment, arguments, named) in cases {
            try write(json)
            // An address that cannot be bound: were the value taken, the server would fail, not hang.
            let run = try TilerCommandTests.run(
                ["serve", folder, "--config", config, "--host", "256.1.1.1"] + arguments, in: folder, environment: environment)
            #expect(run.status == 64 && run.stderr.contains(named), "\(json) \(environment) \(arguments): \(run.status) \(run.stderr)")
        }
        // A cache folder that is the folder served (an admin purge would then delete the folder's own stores).
        try write("{}")
        let same = try TilerCommandTests.run(["serve", folder, "--config", config, "--cache", folder, "--host", "256.1.1.1"], in: folder)
        #expect(same.status == 1 && same.stderr.contains("is the folder served"), "\(same.status) \(same.stderr)")
    }

    /// `VmRSS` or `VmHWM` of a process, in MiB.
    static func memory(_ pid: Int32, _ field: String) -> Double {
        let status = FileFacts.procText("/proc/\(pid)/status") ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix(field + ":") } ?? ""
        return (Double(line.split(separator: " ").dropFirst().first ?? "") ?? .nan) / 1024
    }
}
