import ArgumentParser
import Foundation
import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// `swift run -c release Benchmarks [--input PATH] [--loader-input PATH] [--rate-mbps R] [--runs N] [--scenario NAME] [--json]`
///
/// Every scenario runs in a child process (so its peak RSS is its own), `runs` times; the table shows
/// medians, side by side with the reference tools when they are on PATH, as ratios to the decode floor.
@main
struct Benchmarks: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "Benchmarks",
        abstract: "Run each scenario in a child process, N times, and print medians, ratios to the decode floor and each child's own peak RSS.",
        discussion: "Scenarios are listed in BENCHMARKS.md.")

    @Option(help: "The JPEG to measure (default ../shared/bench/huge.jpg, else a generated 8192x6144 image).")
    var input: String?

    @Option(help: "The JPEG of the loader and thumbnail scenarios (default ../shared/bench/photo24.jpg, else --input).")
    var loaderInput: String?

    @Option(help: "The rate of the download scenarios' loopback server, in MB/s.")
    var rateMbps: Double = 20

    @Option(help: "Runs per scenario, at least 1.")
    var runs = 5

    @Option(help: "Run only these scenarios (names separated by commas).")
    var scenario: String?

    var selected: Set<String>? { scenario.map { Set($0.split(separator: ",").map(String.init)) } }

    @Option(help: "How long serve-soak runs, in seconds.")
    var soakSeconds = 180

    @Flag(help: "Print JSON instead of the table.")
    var json = false

    @Option(help: .hidden) var child: String?
    @Option(help: .hidden) var report: String?
    @Option(help: .hidden) var url: String?

    func validate() throws {
        guard runs >= 1 else { throw ValidationError("--runs must be at least 1, not \(runs).") }
        guard rateMbps > 0 else { throw ValidationError("--rate-mbps must be positive.") }
        let names = Set(
            Scenario.all(input: "", loaderInput: "", networkURL: "").map(\.name) + LoadScenarios.names + [
                "tiff-compare", "serve-tiff", MasterScenarios.name, BusyServeScenario.name, AttackScenario.name, FormatScenarios.name,
                CollectionScenario.name, BucketScenario.name, BucketMasterScenario.name
            ])
        for name in selected ?? [] where !names.contains(name) {
            throw ValidationError("no scenario named '\(name)' (BENCHMARKS.md lists them).")
        }
    }

    func run() async throws {
        if let child {
            guard let input, let report else { throw ValidationError("--child needs --input and --report.") }
            try await runChild(child, input: input, report: report, url: url)
            return
        }
        let input = try self.input ?? Self.defaultInput()
        let info = try ImageInfo.read(contentsOfFile: input)
        let megapixels = Double(info.width * info.height) / 1e6
        if !json {
            print(
                "input: \(input) (\(info.width)x\(info.height), \(String(format: "%.0f", megapixels)) MP, \(info.coding.rawValue)); \(runs) runs per scenario, medians"
            )
        }
        var results: [ScenarioResult] = []
        let loaderInput = self.loaderInput ?? Self.defaultLoaderInput(input)
        // The download scenarios fetch the input from this process at a fixed rate (default 20 MB/s).
        let server = try await RateLimitedServer(file: input, bytesPerSecond: rateMbps * 1e6)
        defer { Task { await server.stop() } }
        let networkURL = "http://127.0.0.1:\(server.port)/image.jpg"
        if !json { print("download scenarios: served on loopback at \(rateMbps) MB/s") }
        let all = Scenario.all(input: input, loaderInput: loaderInput, networkURL: networkURL)
        for scenario in all where selected?.contains(scenario.name) ?? true {
            guard scenario.isAvailable else {
                if !json { print("  \(scenario.name): skipped (\(scenario.missing ?? "not available"))") }
                continue
            }
            // The loader scenarios build 8 copies of their own input.
            let loaderMegapixels = try ImageInfo.read(contentsOfFile: loaderInput).pixelMegapixels
            let scenarioMegapixels =
                scenario.name.hasPrefix("load-")
                ? loaderMegapixels * 8
                : scenario.name.hasPrefix("thumbnailer-")
                    ? loaderMegapixels * 100
                    : scenario.input == loaderInput && loaderInput != input ? loaderMegapixels : megapixels
            let scenarioRuns = scenario.name.hasPrefix("thumbnailer-") ? 1 : runs
            if scenario.name == "vips-dzsave" && results.contains(where: { $0.name == "vips-dzsave" }) { continue }
            var measured: [ScenarioResult]
            if scenario.name == "export-dzi", let vips = all.first(where: { $0.name == "vips-dzsave" && $0.isAvailable }),
                selected?.contains(vips.name) ?? true
            {
                // Alternately with vips, which creates the same files: see ExportScenarios.runFolder.
                let (ours, theirs) = try scenario.measurePaired(with: vips, runs: scenarioRuns, megapixels: scenarioMegapixels)
                measured = [ours, theirs]
            } else {
                measured = [try scenario.measure(runs: scenarioRuns, megapixels: scenarioMegapixels)]
            }
            for result in measured {
                results.append(result)
                if !json { print("  " + result.line(floor: results.first { $0.name == "decode-floor" })) }
            }
        }
        if !json, let comparison = ExportScenarios.compareWithVips() { print("  " + comparison) }
        // Sizes and lower levels' PSNR of our TIFF and vips', after the timed runs.
        if !json && selected?.contains("tiff-compare") ?? true {
            for line in try TIFFComparison.run(input: input) { print("  " + line) }
        }
        // The load scenarios (their own processes: our server, nginx, wrk, h2load); serve-soak only
        // when named. Printed as they finish; not in the JSON.
        let load = LoadScenarios.names.filter { selected?.contains($0) ?? ($0 != "serve-soak") }
        if !load.isEmpty && !json {
            let setup = try LoadScenarios.prepare(input: input)
            defer { try? FileManager.default.removeItem(atPath: setup.folder) }
            print("load scenarios: level 0 of \(input) as DeepZoom tiles, 64 connections, loopback")
            if load.contains("serve-warm") { for line in try LoadScenarios.warm(setup, runs: min(runs, 3)) { print("  " + line) } }
            if load.contains("serve-cold") { for line in try LoadScenarios.cold(setup, input: input, runs: min(runs, 3)) { print("  " + line) } }
            if load.contains("serve-start") { for line in try LoadScenarios.start(setup, runs: min(runs, 3)) { print("  " + line) } }
            if load.contains("serve-soak") {
                for line in try await LoadScenarios.soak(setup, jpeg: loaderInput, seconds: soakSeconds) { print("  " + line) }
            }
        }
        // Serving a TIFF store beside nginx and IIPImage: only when named.
        if !json && selected?.contains("serve-tiff") == true {
            print("serve-tiff: level 0 of \(input) as a TIFF store, 64 connections, loopback")
            for line in try await TIFFServeScenarios.run(input: input, runs: min(runs, 3)) { print("  " + line) }
        }
        // The answers' formats (sizes, fidelity, encode times; warm WebP tiles beside nginx): only when named.
        if !json && selected?.contains(FormatScenarios.name) == true {
            print("formats: JPEG, WebP and AVIF answers of \(input) at their default qualities")
            for line in try await FormatScenarios.run(input: input, runs: min(runs, 3)) { print("  " + line) }
        }
        // Serving a built image while the input is built four times: only when named.
        if !json && selected?.contains(BusyServeScenario.name) == true {
            print("serve-busy: tiler serve building four copies of \(input) while a built image is looked at")
            for line in try await BusyServeScenario.run(input: input, runs: min(runs, 3)) { print("  " + line) }
        }
        // A folder of 2,000 images as a IIIF collection: only when named.
        if !json && selected?.contains(CollectionScenario.name) == true {
            print("serve-collection: tiler serve's IIIF collection of a folder of 2,000 images")
            for line in try await CollectionScenario.run(runs: min(runs, 3)) { print("  " + line) }
        }
        // Issue 37's attack, re-measured: only when named.
        if !json && selected?.contains(AttackScenario.name) == true {
            print("serve-attack: renders abandoned by 24 connections beside a victim (tiler serve over \(input)), bombs, a PNG past the budget")
            for line in try AttackScenario.run(input: input, runs: min(runs, 3)) { print("  " + line) }
        }
        // Tiles of a store in a bucket, beside the same ranged GETs: only when named.
        if !json && selected?.contains(BucketScenario.name) == true {
            print("serve-bucket: tiles of \(input)'s store in a bucket on loopback (OpenStack Swift), served and fetched plainly")
            for line in try await BucketScenario.run(input: input, runs: runs) { print("  " + line) }
        }
        // A master in a bucket, built and served beside the same file on disk: only when named.
        if !json && selected?.contains(BucketMasterScenario.name) == true {
            print("bucket-master: \(input) as a master in a bucket on loopback (OpenStack Swift), built and served, beside the file on disk")
            for line in try await BucketMasterScenario.run(input: input, runs: runs) { print("  " + line) }
        }
        // Masters in other formats, made from the input, beside vips: only when named.
        if !json && selected?.contains(MasterScenarios.name) == true {
            print("masters: TIFF and PNG masters made from \(input), built by us and by vips tiffsave, alternately")
            for line in try MasterScenarios.run(input: input, runs: min(runs, 3)) { print("  " + line) }
        }
        try? FileManager.default.removeItem(atPath: ExportScenarios.runFolder(parent: getpid()))
        if json { print(try ScenarioResult.json(results, input: input, megapixels: megapixels)) }
    }

    /// The 8-image loader scenarios use the 24 MP photo when present, else the main input.
    static func defaultLoaderInput(_ input: String) -> String {
        let shared = FileManager.default.currentDirectoryPath + "/../shared/bench/photo24.jpg"
        return FileManager.default.fileExists(atPath: shared) ? shared : input
    }

    static func defaultInput() throws -> String {
        let shared = FileManager.default.currentDirectoryPath + "/../shared/bench/huge.jpg"
        if FileManager.default.fileExists(atPath: shared) { return shared }
        let path = NSTemporaryDirectory() + "/tiledimagekit-bench-demo.jpg"
        if !FileManager.default.fileExists(atPath: path) {
            _ = FileManager.default.createFile(atPath: path, contents: try DemoImage.jpeg(width: 8192, height: 6144))
        }
        return path
    }
}

extension ImageInfo {
    var pixelMegapixels: Double { Double(width * height) / 1e6 }
}
