import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import TestSupport
import TileNetwork

#if canImport(Glibc)
import Glibc
#endif

/// A master in a bucket (issue 43's first bar), only when named (`--scenario bucket-master`): the input
/// put as `masters/{name}.jpg` into OpenStack Swift's S3 layer on loopback (TestSupport's
/// `S3TestServer`), against the same file on disk, each kind in turn, run after run:
/// - `master-plain-get`: the object read whole by a plain client (``S3Client``'s streamed GET, the bytes
///   counted and dropped);
/// - `master-build-local`, `master-build-bucket`: the release `tiler build FILE --out` and
///   `tiler build s3://... --out`, child processes: wall time;
/// - `master-serve-folder`, `master-serve-bucket`: the release `tiler serve` over a folder holding the
///   file (a hard link) and `tiler serve --source s3://` over the bucket, each with an empty cache: from
///   the first `info.json`, the seconds to the top-left 512-px region's first 200 and to the build's
///   state `ready` (`/images/{id}`, a small JSON, asked every 20 ms: `/metrics` asked that often costs
///   the build measurably on two cores), the build's own `tiler_build_duration_seconds`, peak RSS.
/// The bar: complete within 1.10x the longer of the plain GET and the local build, peak RSS under
/// 128 MiB, the first tile answered before the download could have ended.
enum BucketMasterScenario {
    static let name = "bucket-master"

    static func run(input: String, runs: Int) async throws -> [String] {
        let tiler = (ChildProcess.selfExecutable as NSString).deletingLastPathComponent + "/tiler"
        guard access(tiler, X_OK) == 0 else { return ["\(name): skipped (no release tiler beside the Benchmarks executable)"] }
        guard S3TestServer.isAvailable else { return ["\(name): skipped (the object store's packages are absent: scripts/s3-server.sh install)"] }
        let folder = NSTemporaryDirectory() + "/tiledimagekit-bucket-master-\(getpid())"
        try FileManager.default.createDirectory(atPath: "\(folder)/masters", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let id = "master"
        do { try FileManager.default.linkItem(atPath: input, toPath: "\(folder)/masters/\(id).jpg") } catch {
            try FileManager.default.copyItem(atPath: input, toPath: "\(folder)/masters/\(id).jpg")
        }
        let server = try S3TestServer()
        defer { server.stop() }
        let store = try await BucketScenario.bench(on: server)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: input))
        _ = try await store.put(bucket: "bench", key: "masters/\(id).jpg", body: ByteBuffer(bytes: bytes), contentType: "image/jpeg")
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let times: [String: [Double]]
        do {
            times = try await measure(runs: runs, id: id, input: input, size: bytes.count, folder: folder, tiler: tiler, store: store, client: client)
        } catch {
            try? await client.shutdown()
            throw error
        }
        try await client.shutdown()
        let median = times.mapValues(ScenarioResult.median)
        func listed(_ key: String) -> String { (times[key] ?? []).map { String(format: "%.3f", $0) }.joined(separator: ", ") }
        let floor = max(median["plain"]!, median["build-local"]!)
        return [
            String(format: "master-plain-get     %7.3f s  the %d-byte object read whole (runs %@)", median["plain"]!, bytes.count, listed("plain")),
            String(format: "master-build-local   %7.3f s  tiler build FILE --out (runs %@)", median["build-local"]!, listed("build-local")),
            String(
                format: "master-build-bucket  %7.3f s  %.3fx the longer of the two above  tiler build s3://... --out (runs %@)",
                median["build-bucket"]!, median["build-bucket"]! / floor, listed("build-bucket")),
            String(
                format: "master-serve-folder  %7.3f s  first tile %.3f s, build %.3f s, peak %.1f MiB  tiler serve over the file (runs %@)",
                median["serve-folder"]!, median["serve-folder-tile"]!, median["serve-folder-build"]!, median["serve-folder-peak"]!,
                listed("serve-folder")),
            String(
                format:
                    "master-serve-bucket  %7.3f s  %.3fx the longer of the GET and the local build, %.3fx the server over the file (builds: %.3fx)  first tile %.3f s, build %.3f s, peak %.1f MiB  tiler serve --source s3:// (runs %@)",
                median["serve-bucket"]!, median["serve-bucket"]! / floor, median["serve-bucket"]! / median["serve-folder"]!,
                median["serve-bucket-build"]! / median["serve-folder-build"]!, median["serve-bucket-tile"]!, median["serve-bucket-build"]!,
                median["serve-bucket-peak"]!, listed("serve-bucket"))
        ]
    }

    /// Each kind of run in turn, `runs` times: the seconds (and MiB) of each series by name.
    static func measure(
        runs: Int, id: String, input: String, size: Int, folder: String, tiler: String, store: S3Client, client: HTTPClient
    ) async throws -> [String: [Double]] {
        let clock = ContinuousClock()
        func seconds(since start: ContinuousClock.Instant) -> Double {
            let (whole, fraction) = (clock.now - start).components
            return Double(whole) + Double(fraction) / 1e18
        }
        var times: [String: [Double]] = [:]
        for run in 0..<runs {
            let start = clock.now
            var received = 0
            for try await part in try await store.stream(bucket: "bench", key: "masters/\(id).jpg").body { received += part.readableBytes }
            guard received == size else { throw BenchmarkError("the plain GET read \(received) bytes of \(size)") }
            times["plain", default: []].append(seconds(since: start))
            for (kind, source) in [("local", input), ("bucket", "s3://bench/masters/\(id).jpg")] {
                let out = "\(folder)/build-\(kind)-\(run).tiles"
                let build = try ChildProcess.run(tiler, ["build", source, "--out", out])
                guard build.exitStatus == 0 else { throw BenchmarkError("tiler build \(source) failed") }
                times["build-\(kind)", default: []].append(build.seconds)
                try? FileManager.default.removeItem(atPath: out)
            }
            for kind in ["folder", "bucket"] {
                let arguments = kind == "folder" ? ["serve", "\(folder)/masters"] : ["serve", "--source", "s3://bench/masters/"]
                let (process, base) = try CLIServeScenario.start(
                    tiler, arguments: arguments + ["--port", "0", "--cache", "\(folder)/cache-\(kind)-\(run)", "--no-access-log"],
                    log: "\(folder)/serve-\(kind)-\(run).log")
                defer { process.stop() }
                let first = clock.now
                _ = try await status(client, "\(base)/iiif/3/\(id)/info.json")
                while try await status(client, "\(base)/iiif/3/\(id)/0,0,512,512/512,/0/default.jpg") != 200 {}
                times["serve-\(kind)-tile", default: []].append(seconds(since: first))
                while try await state(client, "\(base)/images/\(id)") != "ready" {
                    guard seconds(since: first) < 600 else { throw BenchmarkError("the build of \(id) did not end (\(kind))") }
                    try await Task.sleep(for: .milliseconds(20))
                }
                times["serve-\(kind)", default: []].append(seconds(since: first))
                times["serve-\(kind)-build", default: []].append(try await BusyServeScenario.metric(client, base, "tiler_build_duration_seconds_sum"))
                times["serve-\(kind)-peak", default: []].append(process.statusMiB("VmHWM"))
            }
        }
        return times
    }

    /// The status of a GET of `url` (its body read and dropped).
    static func status(_ client: HTTPClient, _ url: String) async throws -> Int {
        let response = try await client.execute(HTTPClientRequest(url: url), timeout: .seconds(120))
        _ = try await response.body.collect(upTo: 64 << 20)
        return Int(response.status.code)
    }

    /// The `state` of an image's build (`/images/{id}`), or "" when the answer has none.
    static func state(_ client: HTTPClient, _ url: String) async throws -> String {
        let response = try await client.execute(HTTPClientRequest(url: url), timeout: .seconds(60))
        let body = try await response.body.collect(upTo: 1 << 20)
        return (try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any])?["state"] as? String ?? ""
    }
}
