import Foundation

/// The measurements of one scenario.
struct ScenarioResult {
    var name: String
    var seconds: [Double]
    var peakMiB: [Double]
    var megapixels: Double
    var isLatency = false
    var extras: [String: [Double]] = [:]

    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return .nan }
        return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }

    var medianSeconds: Double { Self.median(seconds) }
    var medianPeakMiB: Double { Self.median(peakMiB) }

    func line(floor: ScenarioResult?) -> String {
        if isLatency {
            func us(_ key: String) -> String {
                extras[key].map { String(format: "%.1f", Self.median($0) * 1e6) } ?? "-"
            }
            var text = "\(name.padding(toLength: 19, withPad: " ", startingAt: 0)) warm p50 \(us("warm-p50")) us, p99 \(us("warm-p99")) us"
            if extras["cold-p50"] != nil { text += "; cold p50 \(us("cold-p50")) us, p99 \(us("cold-p99")) us" }
            return text + String(format: "  peak RSS %.1f MiB", medianPeakMiB)
        }
        let notes = extras.keys.sorted().map { key in
            let value = Self.median(extras[key]!)
            if key == "sizeMB" { return String(format: "  size %.1f MB", value) }
            if key == "sizeRatio" { return String(format: " (%.3fx the source)", value) }
            if key == "rawRatio" { return String(format: " (%.3fx a raw store)", value) }
            return String(format: "  %@ %.3f s", key, value)
        }.joined()
        let ratio = floor.map { String(format: "%.2fx floor", medianSeconds / $0.medianSeconds) } ?? "-"
        return String(
            format: "%@ %8.3f s  %6.1f MP/s  %@  peak RSS %7.1f MiB  (min %.3f, max %.3f)",
            name.padding(toLength: 19, withPad: " ", startingAt: 0) as NSString, medianSeconds, megapixels / medianSeconds, ratio as NSString,
            medianPeakMiB,
            seconds.min() ?? 0, seconds.max() ?? 0) + notes
    }

    static func json(_ results: [ScenarioResult], input: String, megapixels: Double) throws -> String {
        let floor = results.first { $0.name == "decode-floor" }?.medianSeconds
        let rows: [[String: Any]] = results.map { r in
            var row: [String: Any] = [
                "scenario": r.name, "medianSeconds": r.medianSeconds, "seconds": r.seconds,
                "megapixelsPerSecond": r.megapixels / r.medianSeconds, "peakRSSMiB": r.medianPeakMiB
            ]
            if let floor, !r.isLatency { row["ratioToFloor"] = r.medianSeconds / floor }
            for (key, values) in r.extras {
                if r.isLatency { row[key + "Microseconds"] = median(values) * 1e6 } else { row[key + "Seconds"] = median(values) }
            }
            return row
        }
        let object: [String: Any] = ["input": input, "megapixels": megapixels, "results": rows]
        let data = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys])
        return String(decoding: data, as: UTF8.self)
    }
}
