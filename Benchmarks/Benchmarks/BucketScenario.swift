import Foundation
import Hummingbird
import Logging
import TestSupport
import TileActors
import TileCore
import TileNetwork
import TileServer

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
/// - `served warm`: the same tiles again, from the local copy (in the page cache);
/// - `served in place`: a server of this process (``TileServer``, the same code as `tiler serve`) over an
///   empty cache whose copy never ends (``HeldCopies``): every tile one ranged GET of the bucket, the
///   server's own cost over the plain client's tile for tile.
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
        let client = try await bench(on: server)
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
        // One curl operation per tile (`next`): a `range` set again would replace the one before for all.
        var (plain, served, plainBytes) = ([String](), [String](), 0)
        let writeOut = "write-out = \"%{http_code} %{size_download}\\n\"\noutput = /dev/null\nsilent\nshow-error\n"
        for index in stride(from: 0, to: columns * rows, by: step).prefix(tileCount) {
            let (column, row) = (index % columns, index / columns)
            guard let range = try pyramid.storedJPEGTileLocation(level: 0, column: column, row: row)?.storedRange else {
                throw BenchmarkError("level 0 holds no JPEG tiles")
            }
            plainBytes += range.count
            plain.append("url = \"\(url)\"\nrange = \(range.lowerBound)-\(range.upperBound - 1)\n" + writeOut)
            served.append("url = \"BASE/dzi/photo_files/\(top)/\(column)_\(row).jpg\"\n" + writeOut)
        }
        try plain.joined(separator: "next\n").write(toFile: "\(folder)/plain.cfg", atomically: false, encoding: .utf8)

        var (plainTimes, coldTimes, warmTimes, fromBucket) = ([Double](), [Double](), [Double](), [Int]())
        var inPlaceRuns: [InPlaceRun] = []
        var failures = (plain: 0, cold: 0, warm: 0, inPlace: 0)
        for run in 0..<runs {
            // Alternately first: neither always finds the store's caches as the other left them.
            func plainRun() throws {
                let result = try fetch(curl, config: "\(folder)/plain.cfg", expected: 206)
                plainTimes.append(result.seconds)
                failures.plain += result.failures + (result.bytes == plainBytes ? 0 : 1)
            }
            if run % 2 == 0 { try plainRun() }
            let (tilerServer, base) = try CLIServeScenario.start(
                tiler, images: "\(folder)/masters", cache: "\(folder)/cache-\(run)", log: "\(folder)/serve-\(run).log",
                options: ["--store", "s3://bench/stores/"])
            try served.joined(separator: "next\n").replacingOccurrences(of: "BASE", with: base).write(
                toFile: "\(folder)/served.cfg", atomically: false, encoding: .utf8)
            let cold = try fetch(curl, config: "\(folder)/served.cfg", expected: 200)
            fromBucket.append(try tilesRead(curl, base: base, folder: folder))
            let warm = try fetch(curl, config: "\(folder)/served.cfg", expected: 200)
            tilerServer.stop()
            (coldTimes, warmTimes) = (coldTimes + [cold.seconds], warmTimes + [warm.seconds])
            (failures.cold, failures.warm) = (failures.cold + cold.failures, failures.warm + warm.failures)
            if run % 2 == 1 { try plainRun() }
            let inPlace = try await servedInPlace(
                curl, served: served, shelf: S3StoreShelf(client: client, prefix: S3Location(bucket: "bench", key: "stores")), folder: folder,
                run: run)
            inPlaceRuns.append(inPlace)
            failures.inPlace += inPlace.failures
        }
        let (plainTime, coldTime, warmTime) = (ScenarioResult.median(plainTimes), ScenarioResult.median(coldTimes), ScenarioResult.median(warmTimes))
        let inPlaceTime = ScenarioResult.median(inPlaceRuns.map(\.tiles))
        func list(_ times: [Double]) -> String { times.map { String(format: "%.3f", $0) }.joined(separator: ", ") }
        return [
            String(
                format: "bucket-plain        %7.3f s  %d ranged GETs of the TIFF object (%d bytes), %d at a time (curl; runs %@)", plainTime,
                tileCount,
                plainBytes, concurrency, list(plainTimes)),
            String(
                format:
                    "bucket-served-cold  %7.3f s  %.2fx the plain GETs  (tiler serve, empty cache, the store copied meanwhile; runs %@; tiles read from the bucket %@, the rest from the copy)",
                coldTime, coldTime / plainTime, list(coldTimes), fromBucket.map(String.init).joined(separator: ", ")),
            String(format: "bucket-served-warm  %7.3f s  (the same tiles again, from the local copy; runs %@)", warmTime, list(warmTimes)),
            String(
                format:
                    "bucket-served-in-place %7.3f s  %.3fx the plain GETs  (a server of this process, empty cache, its copy held, after its first answer: every tile one ranged GET of the bucket; runs %@; tiles read from the bucket %@; %d bytes answered; the server's CPU %@ s)",
                inPlaceTime, inPlaceTime / plainTime, list(inPlaceRuns.map(\.tiles)), inPlaceRuns.map { String($0.read) }.joined(separator: ", "),
                inPlaceRuns.last?.bytes ?? 0, list(inPlaceRuns.map(\.cpu))),
            String(
                format: "bucket-in-place-first %7.3f s  (its first answer, info.json: the master hashed, the store found and opened; runs %@)",
                ScenarioResult.median(inPlaceRuns.map(\.first)), list(inPlaceRuns.map(\.first))),
            "bucket failures     plain \(failures.plain) (not 206, or other bytes), cold \(failures.cold), warm \(failures.warm), in place \(failures.inPlace) (not 200)"
        ]
    }

    /// A client of `server` (its endpoint and credentials also put in this process's environment, for the
    /// `tiler` children) and its bucket `bench`, created.
    static func bench(on server: S3TestServer) async throws -> S3Client {
        for (key, value) in server.environment { setenv(key, value, 1) }
        let client = S3Client(
            configuration: S3Configuration(
                endpoint: server.endpoint, region: server.region,
                credentials: S3Credentials(accessKeyID: server.accessKey, secretAccessKey: server.secretKey)))
        try await client.createBucket("bench")
        return client
    }

    /// The tiles of `served` (curl operations, `BASE` their server) from a server of this process over an
    /// empty cache, with `shelf` behind ``HeldCopies``: every tile is read from the bucket. First the
    /// image's `info.json` (the lookup: the master hashed, the store found and opened where it lies),
    /// timed on its own; then the tiles, timed, with this process's CPU meanwhile.
    static func servedInPlace(_ curl: String, served: [String], shelf: S3StoreShelf, folder: String, run: Int) async throws
        -> InPlaceRun
    {
        let catalog = try ImageCatalog(root: "\(folder)/masters", cache: "\(folder)/in-place-\(run)", shelf: HeldCopies(shelf))
        await catalog.setShelfCopyGrace(.seconds(3600))  // the held copy is never given up for a build here
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        var logger = Logger(label: "bench")
        logger.logLevel = .error
        var server = TileServer(service: TileService(catalog: catalog))
        server.metricsRegistry = registry  // as `tiler serve` has them: its requests' metrics recorded
        let app = server.application(host: "127.0.0.1", port: 0, logger: logger) { continuation.yield($0.localAddress?.port ?? 0) }
        let running = Task { try await app.runService(gracefulShutdownSignals: []) }
        defer { running.cancel() }
        var iterator = ports.makeAsyncIterator()
        let base = "http://127.0.0.1:\(await iterator.next() ?? 0)"
        try served.joined(separator: "next\n").replacingOccurrences(of: "BASE", with: base).write(
            toFile: "\(folder)/in-place.cfg", atomically: false, encoding: .utf8)
        // The process's metrics outlive a server: the reads of this run are the count's growth.
        let before = try tilesRead(curl, base: base, folder: folder)
        let start = ContinuousClock.now
        let info = try ChildProcess.run(curl, ["-sS", "-o", "/dev/null", "-w", "%{http_code}", "\(base)/iiif/3/photo/info.json"])
        let first = ContinuousClock.now - start
        let cpuBefore = ownCPU()
        let tiles = try fetch(curl, config: "\(folder)/in-place.cfg", expected: 200)
        let cpu = ownCPU() - cpuBefore
        let read = try tilesRead(curl, base: base, folder: folder) - before
        let copying = await catalog.isBuilding("photo")  // the copy still held: no tile came from a local copy
        running.cancel()
        _ = await running.result
        return InPlaceRun(
            first: Double(first.components.seconds) + Double(first.components.attoseconds) / 1e18, tiles: tiles.seconds,
            failures: tiles.failures + (info.exitStatus == 0 && copying ? 0 : 1), bytes: tiles.bytes, read: read, cpu: cpu)
    }

    struct InPlaceRun {
        var first: Double
        var tiles: Double
        var failures: Int
        var bytes: Int
        var read: Int
        var cpu: Double
    }

    static let registry = ServerMetrics.bootstrapPrometheus()

    /// This process's CPU time so far (user and system), in seconds: the server's, not curl's.
    static func ownCPU() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }

    /// A bucket's shelf whose copies never end (until cancelled): its stores are answered where they lie.
    final class HeldCopies: StoreShelf {
        let shelf: S3StoreShelf
        init(_ shelf: S3StoreShelf) { self.shelf = shelf }
        var description: String { shelf.description }
        func check() async throws { try await shelf.check() }
        func isUnavailable(_ error: any Error) -> Bool { shelf.isUnavailable(error) }
        func find(_ id: String) async throws -> ShelvedStore? { try await shelf.find(id) }
        func open(_ store: ShelvedStore) async throws -> (any ShelvedPyramid)? { try await shelf.open(store) }
        func publish(_ id: String, store path: String, masterVersion: String?) async throws {}
        func copy(_ store: ShelvedStore, to path: String) async throws { try await Task.sleep(for: .seconds(86_400)) }
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

    /// curl over the operations of `config`, `concurrency` at a time: the wall time, the answers whose
    /// status was not `expected` (or that never came), and the bytes received.
    static func fetch(_ curl: String, config: String, expected: Int) throws -> (seconds: Double, failures: Int, bytes: Int) {
        let codes = config + ".codes"
        let start = ContinuousClock.now
        _ = try ChildProcess.run(curl, ["-sS", "--parallel", "--parallel-max", "\(concurrency)", "-K", config], output: codes)
        let elapsed = ContinuousClock.now - start
        let answers = ((try? String(contentsOfFile: codes, encoding: .utf8)) ?? "").split(separator: "\n").map { $0.split(separator: " ") }
        let failures = answers.count { $0.first != "\(expected)"[...] } + max(0, tileCount - answers.count)
        let bytes = answers.compactMap { $0.count == 2 ? Int($0[1]) : nil }.reduce(0, +)
        return (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18, failures, bytes)
    }
}
