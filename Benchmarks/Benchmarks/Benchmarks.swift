import CJpegShim
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
struct Benchmarks {
    static func main() async throws {
        let arguments = Arguments(CommandLine.arguments.dropFirst())
        if arguments.flag("--help") || arguments.flag("-h") {
            print(usage)
            return
        }
        if let child = arguments.value("--child") {
            try await runChild(child, arguments: arguments)
            return
        }
        let input = try arguments.value("--input") ?? defaultInput()
        let runs = Int(arguments.value("--runs") ?? "") ?? 5
        let selected = arguments.value("--scenario")
        let json = arguments.flag("--json")
        let info = try ImageInfo.read(contentsOfFile: input)
        let megapixels = Double(info.width * info.height) / 1e6
        if !json {
            print("input: \(input) (\(info.width)x\(info.height), \(String(format: "%.0f", megapixels)) MP, \(info.coding.rawValue)); \(runs) runs per scenario, medians")
        }
        var results: [ScenarioResult] = []
        let loaderInput = arguments.value("--loader-input") ?? defaultLoaderInput(input)
        // The download scenarios fetch the input from this process at a fixed rate (default 20 MB/s).
        let rate = Double(arguments.value("--rate-mbps") ?? "") ?? 20
        let server = try await RateLimitedServer(file: input, bytesPerSecond: rate * 1e6)
        defer { Task { await server.stop() } }
        let networkURL = "http://127.0.0.1:\(server.port)/image.jpg"
        if !json { print("download scenarios: served on loopback at \(rate) MB/s") }
        for scenario in Scenario.all(input: input, loaderInput: loaderInput, networkURL: networkURL) where selected == nil || scenario.name == selected {
            guard scenario.isAvailable else {
                if !json { print("  \(scenario.name): skipped (\(scenario.missing ?? "not available"))") }
                continue
            }
            // The loader scenarios build 8 copies of their own input.
            let loaderMegapixels = try ImageInfo.read(contentsOfFile: loaderInput).pixelMegapixels
            let scenarioMegapixels =
                scenario.name.hasPrefix("load-") ? loaderMegapixels * 8
                : scenario.name.hasPrefix("thumbnailer-") ? loaderMegapixels * 100
                : scenario.input == loaderInput && loaderInput != input ? loaderMegapixels : megapixels
            let scenarioRuns = scenario.name.hasPrefix("thumbnailer-") ? 1 : runs
            let result = try scenario.measure(runs: scenarioRuns, megapixels: scenarioMegapixels)
            results.append(result)
            if !json { print("  " + result.line(floor: results.first { $0.name == "decode-floor" })) }
        }
        if json { print(try ScenarioResult.json(results, input: input, megapixels: megapixels)) }
    }

    static let usage = """
        usage: Benchmarks [--input JPEG] [--loader-input JPEG] [--rate-mbps R] [--runs N] [--scenario NAME] [--json]
        Runs each scenario in a child process, N times (default 5), and prints medians, ratios to the
        decode floor and each child's own peak RSS. Scenarios are listed in BENCHMARKS.md.
        """

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

/// A tiny argument reader: `--name value` and `--flag`.
struct Arguments {
    let words: [String]
    init(_ words: ArraySlice<String>) { self.words = Array(words) }

    func value(_ name: String) -> String? {
        guard let i = words.firstIndex(of: name), i + 1 < words.count else { return nil }
        return words[i + 1]
    }

    func flag(_ name: String) -> Bool { words.contains(name) }
}

extension ImageInfo {
    var pixelMegapixels: Double { Double(width * height) / 1e6 }
}
