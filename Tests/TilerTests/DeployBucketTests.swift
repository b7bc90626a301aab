import Foundation
import Testing
import TestSupport
import TestTraits
import NIOCore
import TileCore
import TileNetwork

#if canImport(Glibc)
import Glibc
#endif

/// Issue 43, point 4: three `tiler serve` instances without local state (no folder of masters, each its
/// own empty cache), the masters and the stores in a bucket of the real object store
/// (``TestSupport/S3TestServer``), behind Varnish as `deploy/varnish/tiler.vcl` configures it.
@Suite(
    "Three instances sharing stores through a bucket, behind Varnish", .serialized, .ownThreads,
    .enabled(if: S3TestServer.isAvailable, S3TestServer.skip))
struct DeployBucketTests {
    static let published = "tiler_shelf_operations_total{operation=\"publish\",outcome=\"published\"}"
    static let copied = "tiler_shelf_operations_total{operation=\"copy\",outcome=\"copied\"}"
    static let completed = "tiler_builds_total{outcome=\"completed\"}"

    /// A client of `store`, with the bucket `name` made.
    static func bucket(_ name: String, in store: S3TestServer) async throws -> S3Client {
        let client = S3Client(
            configuration: S3Configuration(
                endpoint: store.endpoint, region: store.region,
                credentials: S3Credentials(accessKeyID: store.accessKey, secretAccessKey: store.secretKey)))
        try await client.createBucket(name)
        // The store may answer NoSuchBucket just after the bucket's creation (seen once): its listing
        // answered is the state waited for, not a time.
        let deadline = ContinuousClock.now + .seconds(60)
        while (try? await client.list(bucket: name, maximum: 1)) == nil, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        return client
    }

    @Test(
        "30 images through Varnish: 30 builds in all, each store published once; an instance stopped: its images copied by the others from the bucket, never built again, the same bytes, no 5xx",
        .enabled(if: Tools.have("varnishd", "varnishadm"), "varnishd is not installed (apt-get install varnish)"))
    func bucketBehindVarnish() async throws {
        let store = try S3TestServer()
        defer { store.stop() }
        let client = try await Self.bucket("tiles", in: store)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tiler-bucket-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // deploy/bucket's files as shipped: the config file as it is, the environment file's values the test store's.
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let shipped = "\(DeployTests.repository)/deploy/bucket"
        let config = try String(contentsOfFile: "\(shipped)/serve.json", encoding: .utf8)
        try #require(config.contains("\"store\": \"s3://tiles/stores/\"") && config.contains("\"source\": \"s3://tiles/masters/\""))
        try config.write(toFile: "\(folder)/serve.json", atomically: true, encoding: .utf8)
        var environment: [String: String] = [:]
        for line in try String(contentsOfFile: "\(shipped)/tiler.env", encoding: .utf8).split(separator: "\n") where !line.hasPrefix("#") {
            let pair = line.split(separator: "=", maxSplits: 1).map(String.init)
            if pair.count == 2 { environment[pair[0]] = store.environment[pair[0]] ?? pair[1] }
        }
        #expect(environment.keys.sorted() == store.environment.keys.sorted(), "\(environment.keys.sorted())")
        let varnishPort = Int(Tools.freePort())
        // The masters in the bucket only.
        for i in 0..<30 {
            let jpeg = try JPEGEncoder.encode(pixels: Synthetic.pixels(width: 300 + i, height: 200), width: 300 + i, height: 200)
            try await client.put(bucket: "tiles", key: "masters/img\(i).jpg", body: ByteBuffer(bytes: jpeg))
        }
        var instances: [ServeCommandTests.Server] = []
        defer { for server in instances where server.process.isRunning { kill(server.process.processIdentifier, SIGKILL) } }
        for n in 0..<3 {
            // No folder, each its own cache: nothing shared but the bucket.
            instances.append(
                try ServeCommandTests.Server(
                    [
                        "--port", "0", "--cache", "\(folder)/instance\(n)/cache", "--config", "\(folder)/serve.json",
                        // The bucket's answers wait as long as the test's own waits: under the other suites' load, a
                        // look past the default 10 s would build an image the test expects copied.
                        "--bucket-timeout", "90"
                    ], environment: environment))
        }
        let ports = instances.map(\.port)
        let varnish = try DeployTests.varnish(port: varnishPort, backends: ports, folder: folder)
        defer { varnish.stop(SIGKILL) }

        let tile = { (i: Int) in "/dzi/img\(i)_files/8/0_0.jpg" }
        var first: [Data] = []
        for i in 0..<30 {
            let reply = try DeployTests.settled(varnishPort, tile(i))
            #expect(reply.status == 200, "img\(i)")
            first.append(reply.body)
        }
        // Every build ended and every store published (after its build, in the background).
        var (built, published) = ([Double](), [Double]())
        for _ in 0..<600 {
            built = try ports.map { try DeployTests.metric($0, Self.completed) }
            published = try ports.map { try DeployTests.metric($0, Self.published) }
            if built.reduce(0, +) >= 30 && published.reduce(0, +) >= 30 { break }
            usleep(100_000)
        }
        #expect(built.reduce(0, +) == 30 && published == built, "builds \(built), published \(published)")
        #expect(built.filter { $0 > 0 }.count >= 2, "the identifiers are spread: \(built)")
        let keys = try await client.listAll(bucket: "tiles", prefix: "stores/").map(\.key).filter { $0.hasSuffix("/manifest.json") }
        #expect(keys.count == 30, "\(keys.count) stores in the bucket")

        // The instance that built the most stopped: its images now go to the others, which copy their
        // stores from the bucket (no build), and answer the same bytes.
        let owner = built.indices.max { built[$0] < built[$1] } ?? 0
        DeployTests.stop(instances[owner], behind: folder)
        var failures = 0
        for i in 0..<30 {
            let reply = try DeployTests.get(varnishPort, tile(i) + "?after=stop")
            if reply.status >= 500 { failures += 1 }
            #expect(reply.status != 200 || reply.body == first[i], "img\(i): other bytes after the stop")
        }
        #expect(failures == 0, "\(failures) answers of 5xx after the probe window")
        let others = ports.indices.filter { $0 != owner }
        let builtAfter = try others.map { try DeployTests.metric(ports[$0], Self.completed) }
        let copiedAfter = try others.map { try DeployTests.metric(ports[$0], Self.copied) }
        #expect(builtAfter == others.map { built[$0] }, "builds after the stop: \(builtAfter), before: \(built)")
        #expect(copiedAfter.reduce(0, +) == built[owner], "copied \(copiedAfter); the stopped instance had built \(built[owner])")
    }
}

extension DeployBucketTests {
    @Test(
        "a bucket refused (a wrong secret) or missing: said at start naming it and the answer, /ready not ready with why, images built here all the same"
    )
    func bucketRefusedAtStart() async throws {
        let store = try S3TestServer()
        defer { store.stop() }
        _ = try await Self.bucket("tiles", in: store)
        let folder = try TilerCommandTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try JPEGEncoder.encode(pixels: Synthetic.pixels(width: 400, height: 300), width: 400, height: 300)
            .write(to: URL(fileURLWithPath: "\(folder)/photo.jpg"))
        var wrongSecret = store.environment
        wrongSecret["AWS_SECRET_ACCESS_KEY"] = "not-the-secret"
        // Kept to the end of the test (a server let go while another starts is not this test's business).
        var servers: [ServeCommandTests.Server] = []
        defer { for server in servers where server.process.isRunning { kill(server.process.processIdentifier, SIGKILL) } }
        for (bucket, environment, answer) in [("tiles", wrongSecret, "403"), ("no-such-bucket", store.environment, "404")] {
            let server = try ServeCommandTests.Server(
                [folder, "--port", "0", "--cache", "\(folder)/.cache-\(bucket)", "--store", "s3://\(bucket)/stores/"], environment: environment)
            servers.append(server)
            let said = server.startup.split(separator: "\n").first { $0.contains("warning: the store shelf s3://\(bucket)/stores") } ?? ""
            #expect(said.contains(answer), "\(server.startup)")
            // /ready: 503 naming the shelf (its first look, made when the catalog starts, may still be under way).
            var ready = try DeployTests.get(server.port, "/ready")
            for _ in 0..<600 where ready.status == 200 {
                usleep(50_000)
                ready = try DeployTests.get(server.port, "/ready")
            }
            let why = String(decoding: ready.body, as: UTF8.self)
            #expect(ready.status == 503 && why.contains("the store shelf s3://\(bucket)/stores cannot be used") && why.contains(answer), "\(why)")
            let tile = try DeployTests.settled(server.port, "/iiif/3/photo/full/max/0/default.jpg")
            #expect(tile.status == 200 && tile.body.starts(with: [0xFF, 0xD8]), "\(tile.status)")
            // Its build ends just after the answer may be sent: waited for.
            var built = try DeployTests.metric(server.port, Self.completed)
            for _ in 0..<600 where built < 1 {
                usleep(50_000)
                built = try DeployTests.metric(server.port, Self.completed)
            }
            #expect(built == 1)
            #expect(server.terminate(within: 30)?.status == 0)
        }
    }

    @Test(
        "a bucket that never answers: the start waits --bucket-timeout for its listing, says so, /ready names it; images built here; SIGTERM ends it (the failed publish's clean-up given up on)"
    )
    func silentBucket() async throws {
        let silent = try SilentListener()
        let folder = try TilerCommandTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try JPEGEncoder.encode(pixels: Synthetic.pixels(width: 400, height: 300), width: 400, height: 300)
            .write(to: URL(fileURLWithPath: "\(folder)/photo.jpg"))
        let environment = [
            "AWS_ENDPOINT_URL": "http://127.0.0.1:\(silent.port)", "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test:tester",
            "AWS_SECRET_ACCESS_KEY": "testing"
        ]
        // The bucket's timeout is what the server waits for (the client's own is minutes): the start, each look.
        let server = try ServeCommandTests.Server(
            [folder, "--port", "0", "--cache", "\(folder)/.cache", "--store", "s3://tiles/stores/", "--bucket-timeout", "1"],
            environment: environment)
        defer { if server.process.isRunning { kill(server.process.processIdentifier, SIGKILL) } }
        let said = server.startup.split(separator: "\n").first { $0.contains("warning: the store shelf s3://tiles/stores") } ?? ""
        #expect(said.contains("its listing took longer than 1 s"), "\(server.startup)")
        var ready = try DeployTests.get(server.port, "/ready")
        for _ in 0..<600 where ready.status == 200 {
            usleep(50_000)
            ready = try DeployTests.get(server.port, "/ready")
        }
        let why = String(decoding: ready.body, as: UTF8.self)
        #expect(ready.status == 503 && why.contains("a look at the shelf took longer than 1 s"), "\(why)")
        let tile = try DeployTests.settled(server.port, "/iiif/3/photo/full/max/0/default.jpg")
        #expect(tile.status == 200 && tile.body.starts(with: [0xFF, 0xD8]), "\(tile.status)")
        #expect(server.terminate(within: 30)?.status == 0)
    }
}

extension DeployBucketTests {
    @Test("--source as a new user types it: without a folder it needs --cache; a URL that names no bucket is refused, naming the setting")
    func sourceSettings() throws {
        let folder = try TilerCommandTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let noCache = try TilerCommandTests.run(["serve", "--source", "s3://tiles/masters/", "--port", "0"], in: folder)
        #expect(noCache.status != 0 && noCache.stderr.contains("needs a cache folder: give --cache"), "\(noCache.stderr)")
        let notABucket = try TilerCommandTests.run(["serve", "--source", "https://tiles/masters", "--cache", "c", "--port", "0"], in: folder)
        #expect(
            notABucket.status != 0 && notABucket.stderr.contains("source (--source)") && notABucket.stderr.contains("s3://BUCKET/PREFIX"),
            "\(notABucket.stderr)")
    }
}
