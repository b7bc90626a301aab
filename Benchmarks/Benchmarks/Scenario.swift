import Foundation
import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// One thing to measure: an in-process job run by a child of this executable, or a reference tool.
struct Scenario {
    enum Kind {
        /// This executable run with `--child name`; the child reports its own elapsed time.
        case inProcess
        /// An external command; its wall time is measured around the process.
        case external(executable: String, arguments: [String])
    }

    var name: String
    var kind: Kind
    var input: String
    var missing: String?
    /// Per-operation latencies (reported in microseconds, p50 and p99) rather than a whole job.
    var isLatency = false
    /// Extra arguments for the child (e.g. the URL of the rate-limited server).
    var childArguments: [String] = []

    var isAvailable: Bool { missing == nil }

    static func all(input: String, loaderInput: String, networkURL: String) -> [Scenario] {
        let scratch = NSTemporaryDirectory() + "/tiledimagekit-bench-\(getpid())"
        var list = [
            Scenario(name: "decode-floor", kind: .inProcess, input: input),
            Scenario(name: "write-only", kind: .inProcess, input: input),
            Scenario(name: "build", kind: .inProcess, input: input),
            Scenario(name: "build-memory", kind: .inProcess, input: input),
            Scenario(name: "build-whole-tiles", kind: .inProcess, input: input),
            Scenario(name: "build-lean", kind: .inProcess, input: input),
            Scenario(name: "build-buffered", kind: .inProcess, input: input),
            Scenario(name: "build-1thread", kind: .inProcess, input: input),
            Scenario(name: "build-window", kind: .inProcess, input: input),
            Scenario(name: "read-tile-1", kind: .inProcess, input: input, isLatency: true),
            Scenario(name: "read-tile-6", kind: .inProcess, input: input, isLatency: true),
            Scenario(name: "info-read", kind: .inProcess, input: input, isLatency: true),
            Scenario(name: "export-dzi", kind: .inProcess, input: input),
            Scenario(name: "files-floor", kind: .inProcess, input: input),
            Scenario(name: "render-512", kind: .inProcess, input: input, isLatency: true),
            Scenario(name: "serve-dropped", kind: .inProcess, input: input),
            Scenario(name: "load-8-c1", kind: .inProcess, input: loaderInput),
            Scenario(name: "load-8-c2", kind: .inProcess, input: loaderInput),
            Scenario(name: "net-download-only", kind: .inProcess, input: input, childArguments: ["--url", networkURL]),
            Scenario(name: "net-download-then-build", kind: .inProcess, input: input, childArguments: ["--url", networkURL]),
            Scenario(name: "net-stream-build", kind: .inProcess, input: input, childArguments: ["--url", networkURL]),
            Scenario(name: "net-stream-build-nopreview", kind: .inProcess, input: input, childArguments: ["--url", networkURL]),
            Scenario(name: "net-stream-tiff", kind: .inProcess, input: input, childArguments: ["--url", networkURL]),
            Scenario(name: "thumb-1500", kind: .inProcess, input: loaderInput),
            Scenario(name: "thumbnailer-100-q1", kind: .inProcess, input: loaderInput),
            Scenario(name: "thumbnailer-100-q2", kind: .inProcess, input: loaderInput)
        ]
        list += TIFFScenarios.scenarios(input: input)
        list.append(tool("djpeg", ["-rgb", "-outfile", "/dev/null", input], name: "djpeg", input: input))
        list.append(
            tool(
                "vips", ["dzsave", input, "{out}/dz", "--tile-size", "256", "--overlap", "0", "--suffix", ".jpg[Q=80]"],
                name: "vips-dzsave", input: input))
        list.append(
            tool("vipsthumbnail", [loaderInput, "-s", "1500", "-o", scratch + "/vt.jpg[Q=80]"], name: "vipsthumbnail", input: loaderInput))
        list.append(
            tool(
                "convert", ["-define", "jpeg:size=3000x3000", loaderInput, "-resize", "1500x1500", "-quality", "80", scratch + "/im.jpg"],
                name: "convert", input: loaderInput))
        return list
    }

    static func tool(_ executable: String, _ arguments: [String], name: String, input: String) -> Scenario {
        guard let path = which(executable) else {
            return Scenario(name: name, kind: .inProcess, input: input, missing: "\(executable) is not on PATH")
        }
        return Scenario(name: name, kind: .external(executable: path, arguments: arguments), input: input)
    }

    static func which(_ executable: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/\(executable)" }.first { access($0, X_OK) == 0 }
    }

    /// Runs the scenario `runs` times, each in its own process.
    func measure(runs: Int, megapixels: Double) throws -> ScenarioResult {
        var times: [Double] = []
        var peaks: [Double] = []
        var extras: [String: [Double]] = [:]
        for _ in 0..<(isLatency ? 1 : runs) {
            let run = try runOnce()
            times.append(run.seconds)
            peaks.append(run.peakMiB)
            for (key, value) in run.extras { extras[key, default: []].append(value) }
        }
        return ScenarioResult(
            name: name, seconds: times, peakMiB: peaks, megapixels: megapixels, isLatency: isLatency, extras: extras)
    }

    /// Runs this scenario and `other` alternately, `runs` times each: for two that contend for the same
    /// resource (here the file system's inode allocator), so that both meet the same conditions.
    func measurePaired(with other: Scenario, runs: Int, megapixels: Double) throws -> (ScenarioResult, ScenarioResult) {
        var mine: [(seconds: Double, peakMiB: Double, extras: [String: Double])] = []
        var theirs = mine
        for _ in 0..<runs {
            mine.append(try runOnce())
            theirs.append(try other.runOnce())
        }
        func result(_ scenario: Scenario, _ runs: [(seconds: Double, peakMiB: Double, extras: [String: Double])]) -> ScenarioResult {
            var extras: [String: [Double]] = [:]
            for run in runs { for (key, value) in run.extras { extras[key, default: []].append(value) } }
            return ScenarioResult(
                name: scenario.name, seconds: runs.map(\.seconds), peakMiB: runs.map(\.peakMiB), megapixels: megapixels,
                extras: extras)
        }
        return (result(self, mine), result(other, theirs))
    }

    private func runOnce() throws -> (seconds: Double, peakMiB: Double, extras: [String: Double]) {
        switch kind {
        case .inProcess:
            let report = NSTemporaryDirectory() + "/tiledimagekit-bench-\(getpid())-\(name).txt"
            defer { unlink(report) }
            let child = try ChildProcess.run(
                ChildProcess.selfExecutable, ["--child", name, "--input", input, "--report", report] + childArguments)
            let words = ((try? String(contentsOfFile: report, encoding: .utf8)) ?? "").split(whereSeparator: \.isWhitespace)
            guard child.exitStatus == 0, let first = words.first, let seconds = Double(first) else {
                throw BenchmarkError("scenario \(name) failed (exit \(child.exitStatus))")
            }
            var extras: [String: Double] = [:]
            for word in words.dropFirst() {
                let parts = word.split(separator: "=")
                if parts.count == 2, let value = Double(parts[1]) { extras[String(parts[0])] = value }
            }
            // The child's own high-water mark (see ownPeakMiB); wait4's figure only as a fallback.
            return (seconds, extras.removeValue(forKey: "rss") ?? child.peakMiB, extras)
        case .external(let executable, var arguments):
            let scratch = NSTemporaryDirectory() + "/tiledimagekit-bench-\(getpid())"
            try? FileManager.default.removeItem(atPath: scratch)
            try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: scratch) }
            // An export's output goes to a folder of its own that stays until the run ends
            // (ExportScenarios.runFolder says why).
            var out: String?
            if arguments.contains(where: { $0.contains("{out}") }) {
                let folder = ExportScenarios.runFolder(parent: getpid()) + "/vips-\(UUID().uuidString)"
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
                arguments = arguments.map { $0.replacingOccurrences(of: "{out}", with: folder) }
                out = folder
            }
            let child = try ChildProcess.run(executable, arguments)
            guard child.exitStatus == 0 else { throw BenchmarkError("\(name) exited with \(child.exitStatus)") }
            // A single output file's size (vips tiffsave's), as the TIFF scenarios report theirs.
            if let out, let names = try? FileManager.default.contentsOfDirectory(atPath: out), names.count == 1,
                let bytes = try? fileSize("\(out)/\(names[0])")
            {
                return (child.seconds, child.peakMiB, ["sizeMB": Double(bytes) / 1e6, "sizeRatio": Double(bytes) / Double(try fileSize(input))])
            }
            return (child.seconds, child.peakMiB, [:])
        }
    }
}

struct BenchmarkError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
