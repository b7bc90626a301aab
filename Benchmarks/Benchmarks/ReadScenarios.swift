import Foundation
import TileCore

/// Latency scenarios: each returns per-operation times in seconds (the harness reports p50 and p99).
enum ReadScenarios {
    /// Builds the input's pyramid with `orientation` forced, then reads `count` random level-0 tiles
    /// twice: the first pass is cold where the build bypassed the page cache, the second warm.
    static func tileReads(input: String, orientation: ImageOrientation, count: Int = 2000) throws -> (cold: [Double], warm: [Double]) {
        var options = BuildOptions()
        options.orientation = .fixed(orientation)
        let image = try TileBuilder.build(contentsOfFile: input, options: options)
        let level = image.geometry.levels[0]
        var generator = SplitMix(seed: 42)
        let tiles = (0..<count).map { _ in
            (Int(generator.next() % UInt64(level.columns)), Int(generator.next() % UInt64(level.rows)))
        }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: image.geometry.tileByteCount, alignment: 64)
        defer { buffer.deallocate() }
        let clock = ContinuousClock()
        func pass() throws -> [Double] {
            try tiles.map { column, row in
                let start = clock.now
                try image.readTile(level: 0, column: column, row: row, into: buffer)
                return seconds(clock.now - start)
            }
        }
        let cold = try pass()
        return (cold, try pass())
    }

    /// `ImageInfo.read(contentsOfFile:)` on the input, `count` times.
    static func infoReads(input: String, count: Int = 500) throws -> [Double] {
        let clock = ContinuousClock()
        return try (0..<count).map { _ in
            let start = clock.now
            _ = try ImageInfo.read(contentsOfFile: input)
            return seconds(clock.now - start)
        }
    }
}

/// SplitMix64: a small deterministic generator, so every run asks for the same tiles in the same order.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }

func percentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return .nan }
    return sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * p).rounded()))]
}
