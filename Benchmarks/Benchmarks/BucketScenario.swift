import Foundation
import TestSupport
import TileCore
import TileNetwork

#if canImport(Glibc)
import Glibc
#endif

/// Tiles of a store in a bucket (issue 43, point 3), only when named (`--scenario serve-bucket`): the
/// input built and published by `tiler build --out s3://` to OpenStack Swift's S3 layer on loopback
/// (TestSupport's `S3TestServer`), then 300 whole level-0 tiles asked for once each, 8 at a time, by
/// curl (`--parallel`), alternately:
/// - `plain`: the same ranged GETs of the TIFF object (a presigned URL, each tile's stored bytes);
/// - `served cold`: `tiler serve --store s3://...` started with an empty cache, its DeepZoom tiles (the
///   first request finds the store; while its copy runs, tiles are read from the bucket; after, from
///   the cache);
/// - `served warm`: the same tiles again, from the local copy.
/// Needs the release `tiler` beside the Benchmarks executable, curl and the object store's packages.
enum BucketScenario {
    static let name = "serve-bucket"
    static let (tileCount, concurrency) = (300, 8)

    static func run(input: String, runs: Int) async throws -> [String] {
        let tiler = (ChildProcess.selfExecutable as NSString).deletingLastPathComponent + "/tiler"
        guard access(tiler, X_OK) == 0 else { return ["\(name): skipped (no release tiler beside the Benchmarks executable)"] }
        guard let curl = Scenario.which("curl") else { return ["\(name): skipped (no curl)"] }
        guard S3TestServer.isAvailable else { return ["\(name): skipped (the object store's packages are absent: scripts/s3-server.sh install)"] }
        let folder = NSTemporaryDirectory() + "/tiledimagekit-bucket-\(getpid())"
        try FileManager.default.createDirectory(atPath: "\(folder)/masters", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // A hard link where the file system allows it, else a copy (the folder follows no symlink out of it).
        do { try FileManager.default.linkItem(atPath: input, toPath: "\(folder)/masters/photo.jpg") } catch {
            try FileManager.default.copyItem(atPath: input, toPath: "\(folder)/masters/photo.jpg")
        }
        let server = try S3TestServer()
        defer { server.stop() }
        for (key, value) in server.environment { setenv(key, value, 1) }
        let client = S3Client(
            configuration: S3Configuration(
                endpoint: server.endpoint, region: server.region,
                credentials: S3Credentials(accessKeyID: server.accessKey, secretAccessKey: server.secretKey)))
        try await client.createBucket("bench")
        let build = try ChildProcess.run(tiler, ["build", input, "--out", "s3://bench/stores/photo.tiles"])
        guard build.exitStatus == 0 else { throw BenchmarkError("tiler build --out s3:// failed") }

        // The tiles: whole level-0 tiles spread over the image, their ranges read from a copy of the TIFF.
        let location = S3Location(bucket: "bench", key: "stores/photo.tiles")
        guard let store = try await client.store(at: location) else { throw BenchmarkError("no store published") }
        let shelf = S3StoreShelf(client: client, prefix: S3Location(bucket: "bench", key: "stores"))
        guard let shelved = try await shelf.find("photo") else { throw BenchmarkError("the shelf does not find the store") }
        try await shelf.copy(shelved, to: "\(folder)/copy.tiles")
        let pyramid = try TiledImage.open(store: "\(folder)/copy.tiles")
        let geometry = pyramid.geometry
        let (columns, rows) = (geometry.width / geometry.tileSize, geometry.height / geometry.tileSize)
        let step = max(1, columns * rows / tileCount)
        let top = geometry.deepZoomTopLevel
        let url = client.presignedURL(bucket: "bench", key: store.tiffKey, expires: 36000)
        var (plain, served) = ("", "")
        for index in stride(from: 0, to: columns * rows, by: step).prefix(tileCount) {
            let (column, row) = (index % columns, index / columns)
            guard let range = try pyramid.storedJPEGTileLocation(level: 0, column: column, row: row)?.storedRange else {
                throw BenchmarkError("level 0 holds no JPEG tiles")
            }
            plain += "url = \"\(url)\"\nrange = \(range.lowerBound)-\(range.upperBound - 1)\noutput = /dev/null\n"
            served += "url = \"BASE/dzi/photo_files/\(top)/\(column)_\(row).jpg\"\noutput = /dev/null\n"
        }
        try plain.write(toFile: "\(folder)/plain.cfg", atomically: false, encoding: .utf8)

        var (plainTimes, coldTimes, warmTimes, failures) = ([Double](), [Double](), [Double](), 0)
        var fromBucket: [Int] = []
        for run in 0..<runs {
            let (seconds, failed) = try fetch(curl, config: "\(folder)/plain.cfg")
            (plainTimes, failures) = (plainTimes + [seconds], failures + failed)
            let cache = "\(folder)/cache-\(run)"
            let (tilerServer, base) = try CLIServeScenario.start(
                tiler, images: "\(folder)/masters", cache: cache, log: "\(folder)/serve-\(run).log",
                options: ["--store", "s3://bench/stores/"])
            defer { tilerServer.stop() }
            try served.replacingOccurrences(of: "BASE", with: base).write(toFile: "\(folder)/served.cfg", atomically: false, encoding: .utf8)
            let (cold, coldFailed) = try fetch(curl, config: "\(folder)/served.cfg")
            fromBucket.append(try tilesRead(curl, base: base, folder: folder))
            let (warm, warmFailed) = try fetch(curl, config: "\(folder)/served.cfg")
            (coldTimes, warmTimes, failures) = (coldTimes + [cold], warmTimes + [warm], failures + coldFailed + warmFailed)
        }
        let (plainTime, coldTime, warmTime) = (ScenarioResult.median(plainTimes), ScenarioResult.median(coldTimes), ScenarioResult.median(warmTimes))
        func list(_ times: [Double]) -> String { times.map { String(format: "%.3f", $0) }.joined(separator: ", ") }
        return [
            String(
                format: "bucket-plain        %7.3f s  %d ranged GETs of the TIFF object, %d at a time (curl; runs %@)", plainTime, tileCount,
                concurrency,
                list(plainTimes)),
            String(
                format:
                    "bucket-served-cold  %7.3f s  %.2fx the plain GETs  (tiler serve, empty cache, the store copied meanwhile; runs %@; tiles read from the bucket %@, the rest from the copy)",
                coldTime, coldTime / plainTime, list(coldTimes), fromBucket.map(String.init).joined(separator: ", ")),
            String(format: "bucket-served-warm  %7.3f s  (the same tiles again, from the local copy; runs %@)", warmTime, list(warmTimes)),
            "bucket failures     \(failures) (answers other than 200 or 206)"
        ]
    }

    /// The tiles the server read from the bucket (its `/metrics`: `tiler_shelf_operations_total` of `tile`, `read`).
    static func tilesRead(_ curl: String, base: String, folder: String) throws -> Int {
        let metrics = "\(folder)/metrics.txt"
        _ = try ChildProcess.run(curl, ["-sS", "\(base)/metrics"], output: metrics)
        let text = (try? String(contentsOfFile: metrics, encoding: .utf8)) ?? ""
        let line = text.split(separator: "\n").first {
            $0.hasPrefix("tiler_shelf_operations_total") && $0.contains("\"tile\"") && $0.contains("\"read\"")
        }
        return line.flatMap { $0.split(separator: " ").last }.flatMap { Int($0) } ?? 0
    }

    /// curl over the URLs of `config`, `concurrency` at a time: the wall time, and the answers that
    /// were not 200 or 206.
    static func fetch(_ curl: String, config: String) throws -> (seconds: Double, failures: Int) {
        let codes = config + ".codes"
        let start = ContinuousClock.now
        let child = try ChildProcess.run(
            curl, ["-sS", "--parallel", "--parallel-max", "\(concurrency)", "-K", config, "-w", "%{http_code}\\n"],
            output: codes)
        let elapsed = ContinuousClock.now - start
        guard child.exitStatus == 0 else { throw BenchmarkError("curl failed (\(child.exitStatus))") }
        let statuses = ((try? String(contentsOfFile: codes, encoding: .utf8)) ?? "").split(separator: "\n")
        let failures = statuses.count { $0 != "200" && $0 != "206" } + max(0, tileCount - statuses.count)
        return (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18, failures)
    }
}
