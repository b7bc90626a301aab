import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOFoundationCompat
import Testing
import TestSupport
import TestTraits
import TileActors
import TileCore
@testable import TileNetwork

#if canImport(Glibc)
import Glibc
#endif

/// `s3://` URLs and the store the environment names (issue 43, point 2), written from the AWS tools'
/// documented variables.
@Suite("S3 locations and configuration from the environment")
struct S3ConfigurationTests {
    @Test("s3://BUCKET/KEY: the bucket as S3 allows its names, the key as written")
    func locations() {
        #expect(S3Location("s3://tiles/maps/rome.jpg") == S3Location(bucket: "tiles", key: "maps/rome.jpg"))
        #expect(S3Location("s3://tiles/a b/+%.jpg")?.key == "a b/+%.jpg")
        #expect(S3Location("s3://tiles") == S3Location(bucket: "tiles", key: ""))
        #expect(S3Location("s3://my.bucket-1/") == S3Location(bucket: "my.bucket-1", key: ""))
        for bad in ["tiles/x.jpg", "http://tiles/x.jpg", "s3://", "s3://ab/x", "s3://Tiles/x", "s3://-tiles/x", "s3://tiles-/x", "s3://ti_les/x"] {
            #expect(S3Location(bad) == nil, "\(bad)")
        }
        #expect(S3Location(String(repeating: "a", count: 63)).map { _ in true } == nil)  // no s3:// prefix
        #expect(S3Location("s3://" + String(repeating: "a", count: 63) + "/k") != nil)
        #expect(S3Location("s3://" + String(repeating: "a", count: 64) + "/k") == nil)
    }

    @Test("AWS's variables: AWS's endpoint in the region, the bucket in the host name; a named endpoint: path style")
    func awsVariables() throws {
        let aws = try S3Configuration.fromEnvironment([
            "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_SESSION_TOKEN": "token", "AWS_REGION": "eu-west-3"
        ])
        #expect(aws.endpoint == "https://s3.eu-west-3.amazonaws.com" && aws.region == "eu-west-3" && !aws.pathStyle)
        #expect(aws.credentials == S3Credentials(accessKeyID: "AKID", secretAccessKey: "secret", sessionToken: "token"))
        // AWS's addressing: the bucket in the host name, but in the path for a name with dots (an
        // https certificate's wildcard covers one label).
        let client = S3Client(configuration: aws)
        #expect(client.target(bucket: "tiles", key: "a/b.jpg").url == "https://tiles.s3.eu-west-3.amazonaws.com/a/b.jpg")
        #expect(client.target(bucket: "my.tiles", key: "a/b.jpg").url == "https://s3.eu-west-3.amazonaws.com/my.tiles/a/b.jpg")
        let own = try S3Configuration.fromEnvironment([
            "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_ENDPOINT_URL": "http://127.0.0.1:9000/",
            "AWS_DEFAULT_REGION": "garage"
        ])
        #expect(own.endpoint == "http://127.0.0.1:9000" && own.region == "garage" && own.pathStyle)
        let defaults = try S3Configuration.fromEnvironment(["AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "secret"])
        #expect(defaults.region == "us-east-1" && defaults.endpoint == "https://s3.us-east-1.amazonaws.com")
    }

    @Test("TILER_S3_* before AWS's; TILER_S3_PATH_STYLE chooses the addressing")
    func tilerVariables() throws {
        let both = try S3Configuration.fromEnvironment([
            "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_ENDPOINT_URL": "http://aws.example",
            "TILER_S3_ACCESS_KEY_ID": "mine", "TILER_S3_SECRET_ACCESS_KEY": "my secret", "TILER_S3_ENDPOINT": "https://store.example:8443",
            "TILER_S3_REGION": "local", "TILER_S3_PATH_STYLE": "FALSE"
        ])
        #expect(both.credentials == S3Credentials(accessKeyID: "mine", secretAccessKey: "my secret"))
        #expect(both.endpoint == "https://store.example:8443" && both.region == "local" && !both.pathStyle)
        let virtual = try S3Configuration.fromEnvironment([
            "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "secret", "TILER_S3_PATH_STYLE": "true"
        ])
        #expect(virtual.pathStyle)
    }

    @Test("what is missing or malformed is named: credentials, the endpoint, the addressing")
    func refusals() {
        func message(_ environment: [String: String]) -> String? {
            do {
                _ = try S3Configuration.fromEnvironment(environment)
                return nil
            } catch {
                return error.code == .invalidArgument ? error.message : "wrong code: \(error)"
            }
        }
        #expect(message([:])?.contains("no S3 credentials") == true)
        #expect(message(["AWS_ACCESS_KEY_ID": "AKID"])?.contains("AWS_SECRET_ACCESS_KEY") == true)
        // Half of TILER_S3_'s pair is a mistake, not a reason to take AWS's pair instead.
        let half = ["AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "secret", "TILER_S3_ACCESS_KEY_ID": "x"]
        #expect(message(half)?.contains("go together") == true)
        let keys = ["AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "secret"]
        #expect(message(keys.merging(["AWS_ENDPOINT_URL": "ftp://store"]) { $1 })?.contains("ftp://store") == true)
        #expect(message(keys.merging(["TILER_S3_PATH_STYLE": "yes"]) { $1 })?.contains("TILER_S3_PATH_STYLE") == true)
    }
}

/// Masters in a bucket of the real store (``S3TestServer``), built as they download: the same tiles as
/// the same bytes built from memory, by the library and by `tiler build s3://...` as a user types it.
@Suite("Masters in a bucket (loopback store)", .serialized, .ownThreads, .enabled(if: S3TestServer.isAvailable, S3TestServer.skip))
struct S3SourceTests {
    /// The `tiler` binary SwiftPM built beside this test bundle.
    static let tiler: String = {
        let me = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: me).deletingLastPathComponent().appendingPathComponent("tiler").path
    }()

    /// Runs `tiler arguments` with only `environment` (and PATH): exit status, standard output and error.
    static func tiler(_ arguments: [String], environment: [String: String]) throws -> (status: Int32, stdout: String, stderr: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tiler)
        process.arguments = arguments
        process.environment = environment.merging([
            "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin", "ASAN_OPTIONS": "detect_leaks=0"
        ]) {
            $1
        }
        let (out, err) = (Pipe(), Pipe())
        (process.standardOutput, process.standardError) = (out, err)
        try process.run()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: stdout, as: UTF8.self), String(decoding: stderr, as: UTF8.self))
    }

    @Test("a JPEG in a bucket: the tiles of the same bytes from memory; a missing key is a 404 NoSuchKey; tiler build s3:// as a user runs it")
    func masterInABucket() async throws {
        let server = try S3TestServer()
        defer { server.stop() }
        let client = S3Client(configuration: server.configuration)
        try await client.createBucket("masters")
        let jpeg = try HTTPImageSourceTests.jpeg()
        try await client.put(bucket: "masters", key: "maps/old photo.jpg", body: ByteBuffer(data: jpeg), contentType: "image/jpeg")

        // The library: streamed into a builder, reported part by part.
        let last = NIOLockedValueBox<(received: Int, expected: Int?)>((0, nil))
        var source = S3ImageSource(client: client, location: try #require(S3Location("s3://masters/maps/old photo.jpg")))
        source.onBodyPart = { received, expected in last.withLockedValue { $0 = (received, expected) } }
        let builder = try ImageBuilder()
        try await source.feed(into: builder)
        #expect(try await builder.finish().allTiles() == TileBuilder.build(data: jpeg).allTiles())
        let reported = last.withLockedValue { $0 }
        #expect(reported.received == jpeg.count && reported.expected == jpeg.count && source.name == "s3://masters/maps/old photo.jpg")

        // A missing object: the store's 404, named; a user's error (invalidArgument), not an I/O failure.
        let missing = S3ImageSource(client: client, location: S3Location(bucket: "masters", key: "nothing.jpg"))
        do {
            try await missing.feed(into: try ImageBuilder())
            Issue.record("a missing object was built")
        } catch let error as S3Error {
            #expect(error.status == 404 && error.code == "NoSuchKey" && error.tileError.code == .invalidArgument, "\(error)")
        }

        // tiler build, with the store named as AWS's tools name it.
        let folder = NSTemporaryDirectory() + "s3-build-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let environment = [
            "AWS_ACCESS_KEY_ID": server.configuration.credentials.accessKeyID,
            "AWS_SECRET_ACCESS_KEY": server.configuration.credentials.secretAccessKey, "AWS_ENDPOINT_URL": server.configuration.endpoint,
            "AWS_REGION": server.configuration.region
        ]
        let built = try Self.tiler(["build", "s3://masters/maps/old photo.jpg", "--out", "\(folder)/photo.tiles"], environment: environment)
        #expect(built.status == 0 && built.stdout.contains("640x480"), "\(built)")
        let store = try TiledImage.open(store: "\(folder)/photo.tiles")
        #expect(store.geometry.width == 640 && store.geometry.height == 480)
        // Level 0 is the JPEG's own DCT blocks in tiles, decoded a tile at a time (chroma upsampled at
        // tile edges without its neighbours): libjpeg's decode of the whole, all but at the edges.
        let psnr = Reference.psnr(try store.pixels(level: 0), try Reference.decode(jpeg).image)
        #expect(psnr >= 40, "level 0 against libjpeg's decode: \(psnr) dB")

        let info = try Self.tiler(["info", "s3://masters/maps/old photo.jpg", "--json"], environment: environment)
        let fields = try JSONSerialization.jsonObject(with: Data(info.stdout.utf8)) as? [String: Any]
        #expect(info.status == 0 && fields?["width"] as? Int == 640 && fields?["height"] as? Int == 480, "\(info)")
        let absent = try Self.tiler(["build", "s3://masters/none.jpg", "--out", "\(folder)/none.tiles"], environment: environment)
        #expect(absent.status != 0 && absent.stderr.contains("NoSuchKey") && absent.stderr.contains("s3://masters/none.jpg"), "\(absent)")
        let anonymous = try Self.tiler(["build", "s3://masters/maps/old photo.jpg"], environment: [:])
        #expect(anonymous.status != 0 && anonymous.stderr.contains("no S3 credentials"), "\(anonymous)")
        let wrong = try Self.tiler(
            ["build", "s3://masters/maps/old photo.jpg"], environment: environment.merging(["AWS_SECRET_ACCESS_KEY": "wrong"]) { $1 })
        #expect(wrong.status != 0 && wrong.stderr.contains("403"), "\(wrong)")
    }

    @Test("tiler build --out s3://: the TIFF, then the manifest naming it; refused over a store unless --force, which replaces it whole")
    func storeInABucket() async throws {
        let server = try S3TestServer()
        defer { server.stop() }
        let client = S3Client(configuration: server.configuration)
        try await client.createBucket("stores")
        let folder = NSTemporaryDirectory() + "s3-publish-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let jpeg = try HTTPImageSourceTests.jpeg()
        try jpeg.write(to: URL(fileURLWithPath: "\(folder)/photo.jpg"))
        let environment = [
            "AWS_ACCESS_KEY_ID": server.configuration.credentials.accessKeyID,
            "AWS_SECRET_ACCESS_KEY": server.configuration.credentials.secretAccessKey, "AWS_ENDPOINT_URL": server.configuration.endpoint
        ]
        let location = S3Location(bucket: "stores", key: "maps/photo.tiles")
        let built = try Self.tiler(["build", "\(folder)/photo.jpg", "--out", "s3://stores/maps/photo.tiles"], environment: environment)
        #expect(built.status == 0 && built.stdout.contains("-> s3://stores/maps/photo.tiles"), "\(built)")
        let first = try #require(try await client.store(at: location))
        // The manifest names the TIFF object by key, size and tag; the TIFF is a pyramid of the photo.
        let manifestObject = try await client.get(bucket: "stores", key: "maps/photo.tiles/manifest.json")
        let manifest = try JSONSerialization.jsonObject(with: Data(manifestObject.readableBytesView)) as? [String: Any]
        let object = manifest?["object"] as? [String: Any]
        let tiffKey = try #require(object?["key"] as? String)
        #expect(tiffKey.hasPrefix("maps/photo.tiles/pyramid-") && tiffKey.hasSuffix(".tif") && first.tiffKey == tiffKey, "\(tiffKey)")
        #expect((manifest?["tiff"] as? [String: Any])?["file"] as? String == String(tiffKey.dropFirst("maps/photo.tiles/".count)))
        #expect(manifest?["format"] as? String == "tiff" && manifest?["sourceByteCount"] as? Int == jpeg.count)
        let tiff = try await client.get(bucket: "stores", key: tiffKey)
        #expect(tiff.readableBytes == object?["size"] as? Int && tiff.readableBytes > 0)
        try Data(tiff.readableBytesView).write(to: URL(fileURLWithPath: "\(folder)/pyramid.tif"))
        let pyramid = try TiledImage.open(tiff: "\(folder)/pyramid.tif")
        #expect(pyramid.geometry.width == 640 && pyramid.geometry.height == 480)
        let psnr = Reference.psnr(try pyramid.pixels(level: 0), try Reference.decode(jpeg).image)
        #expect(psnr >= 40, "level 0 of the bucket's TIFF against libjpeg's decode: \(psnr) dB")

        // A store there: refused without --force, nothing changed; replaced with it, the old TIFF deleted.
        let refused = try Self.tiler(["build", "\(folder)/photo.jpg", "--out", "s3://stores/maps/photo.tiles"], environment: environment)
        #expect(refused.status != 0 && refused.stderr.contains("a store exists there"), "\(refused)")
        #expect(try await client.store(at: location) == first)
        let forced = try Self.tiler(["build", "\(folder)/photo.jpg", "--out", "s3://stores/maps/photo.tiles", "--force"], environment: environment)
        #expect(forced.status == 0, "\(forced)")
        let second = try #require(try await client.store(at: location))
        // The store's listing catches up with the delete (Swift updates container listings after the
        // fact): waited for, as a state.
        let wanted: Set = [second.tiffKey, "maps/photo.tiles/manifest.json"]
        var keys: Set<String> = []
        for _ in 0..<200 {
            keys = Set(try await client.listAll(bucket: "stores", prefix: "maps/photo.tiles/").map(\.key))
            if keys == wanted { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(second.tiffKey != first.tiffKey && keys == wanted, "\(keys)")
        #expect(try await client.head(bucket: "stores", key: first.tiffKey) == nil, "the replaced store's TIFF is deleted")

        // A publish that fails after its TIFF is uploaded (the local TIFF changed meanwhile: touched
        // until the publish returns) leaves the store there as it was, and no object of its own.
        let local = try Self.tiler(["build", "\(folder)/photo.jpg", "--out", "\(folder)/local.tiles"], environment: [:])
        #expect(local.status == 0, "\(local)")
        // A thread of its own (a task may wait for a thread of the cooperative pool until the publish is
        // over, and touch nothing: a whole-suite run once saw it), touching before the publish begins.
        let (touching, touched, stopped) = (ManagedAtomicFlag(), DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        Thread.detachNewThread {
            var first = true
            while !touching.isSet {
                _ = utimensat(AT_FDCWD, "\(folder)/local.tiles/pyramid.tif", nil, 0)
                if first { touched.signal() }
                first = false
                usleep(1000)
            }
            stopped.signal()
        }
        touched.wait()
        await #expect(throws: TileError.self) { try await client.publishStore(at: "\(folder)/local.tiles", to: location) }
        touching.set()
        stopped.wait()
        #expect(try await client.store(at: location) == second)
        for _ in 0..<200 {
            keys = Set(try await client.listAll(bucket: "stores", prefix: "maps/photo.tiles/").map(\.key))
            if keys == wanted { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(keys == wanted, "after a failed publish: \(keys)")

        // A manifest whose TIFF is gone is not a store a reader may use.
        try await client.delete(bucket: "stores", key: second.tiffKey)
        await #expect(throws: TileError.self) { try await client.store(at: location) }
        // Only TIFF stores are published: a raw one is a usage error; one given to the library is refused.
        let raw = try Self.tiler(["build", "\(folder)/photo.jpg", "--out", "s3://stores/raw.tiles", "--format", "raw"], environment: environment)
        #expect(raw.status == 64 && raw.stderr.contains("TIFF store"), "\(raw)")
        let rawBuilt = try Self.tiler(["build", "\(folder)/photo.jpg", "--out", "\(folder)/raw.tiles", "--format", "raw"], environment: [:])
        #expect(rawBuilt.status == 0, "\(rawBuilt)")
        await #expect(throws: TileError.self) {
            try await client.publishStore(at: "\(folder)/raw.tiles", to: S3Location(bucket: "stores", key: "raw.tiles"))
        }
        // A bucket that does not exist: said before anything is built.
        let nowhere = try Self.tiler(["build", "\(folder)/photo.jpg", "--out", "s3://nowhere/photo.tiles"], environment: environment)
        #expect(nowhere.status != 0 && nowhere.stderr.contains("NoSuchBucket") && !nowhere.stdout.contains("levels"), "\(nowhere)")
    }
}

/// A flag one task sets and another reads.
final class ManagedAtomicFlag: Sendable {
    private let value = NIOLockedValueBox(false)
    var isSet: Bool { value.withLockedValue { $0 } }
    func set() { value.withLockedValue { $0 = true } }
}

@Suite("A listing's dates")
struct S3ListedDateTests {
    @Test("LastModified in nanoseconds, held at the ends of Int64 past 2262 and before 1677 (a date there trapped)")
    func extremes() {
        // 2026-12-03T12:00:00Z is 1,796,299,200 s after 1970 (days from 1970 to 2026-12-03: 20,790).
        #expect(S3MasterShelf.nanoseconds(listed: "2026-12-03T12:00:00.000Z") == 1_796_299_200 * 1_000_000_000)
        #expect(S3MasterShelf.nanoseconds(listed: "2300-01-01T00:00:00Z") == .max)
        #expect(S3MasterShelf.nanoseconds(listed: "9999-12-31T23:59:59Z") == .max)
        #expect(S3MasterShelf.nanoseconds(listed: "1600-01-01T00:00:00Z") == .min)
        #expect(S3MasterShelf.nanoseconds(listed: "not a date") == 0)
    }
}
