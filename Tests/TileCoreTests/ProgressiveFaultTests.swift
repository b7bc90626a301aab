import Foundation
import Testing
import TestTraits
import TestSupport
@testable import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// What needs a process of its own for progressive JPEGs: a full disk while coefficients are written,
/// and the peak memory of a large build (issue 14). Exit tests capture nothing: fixed paths.
@Suite("Progressive JPEGs in a child process", .serialized, .ownThreads)
struct ProgressiveFaultTests {
    static let root = "/tmp/tiledimagekit-progressive-tests"

    /// Whether a sanitizer runtime is loaded: its shadow memory makes peak RSS meaningless.
    static var underSanitizer: Bool {
        dlsym(nil, "__asan_init") != nil || dlsym(nil, "__tsan_init") != nil
    }

    /// Peak resident memory of this process (VmHWM), in bytes.
    static func peakResidentBytes() -> Int {
        guard let status = FileFacts.procText("/proc/self/status"),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") })
        else { return -1 }
        return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? -1) * 1024
    }

    /// A `width` x `height` progressive 4:2:0 JPEG made row by row (a 1024x1024 pattern repeated, each
    /// repeat shifted in brightness so that blocks differ), never whole in memory as pixels.
    static func largeProgressiveJPEG(width: Int, height: Int) throws -> Data {
        let side = 1024
        let pattern = Synthetic.pixels(width: side, height: side)
        var options = JPEGEncoder.Options()
        options.quality = 85
        options.progressive = true
        let encoder = try JPEGEncoder(width: width, height: height, options: options)
        let band = 16
        var rows = [UInt8](repeating: 255, count: width * 4 * band)
        var y = 0
        while y < height {
            let count = min(band, height - y)
            for r in 0..<count {
                let source = ((y + r) % side) * side * 4
                for x0 in stride(from: 0, to: width, by: side) {
                    let n = min(side, width - x0)
                    let shift = UInt8(truncatingIfNeeded: (x0 / side) * 23 + ((y + r) / side) * 41)
                    for i in 0..<(n * 4) where i & 3 != 3 {
                        rows[r * width * 4 + x0 * 4 + i] = pattern[source + i] &+ shift
                    }
                }
            }
            try rows.withUnsafeBytes { try encoder.writeRows($0, stride: width * 4, count: count) }
            y += count
        }
        return try encoder.finish()
    }

    @Test("a full disk while coefficients are written fails the build with the errno and removes every file")
    func fullDiskWhileWritingCoefficients() async throws {
        try? FileManager.default.removeItem(atPath: "\(Self.root)/full")
        try FileManager.default.createDirectory(atPath: "\(Self.root)/full", withIntermediateDirectories: true)
        let result = await #expect(processExitsWith: .exitCode(0), observing: [\.standardErrorContent]) {
            let folder = "\(ProgressiveFaultTests.root)/full"
            // 2048x1024 4:4:4: level files of at most 8 MiB fit under the limit, the 12 MiB of
            // coefficients do not.
            let data = try Synthetic.jpeg(.init(width: 2048, height: 1024, subsampling: .s444, progressive: true))
            signal(SIGXFSZ, SIG_IGN)
            var limit = rlimit(rlim_cur: 10 << 20, rlim_max: 10 << 20)
            setrlimit(Int32(RLIMIT_FSIZE.rawValue), &limit)
            var options = BuildOptions()
            options.coefficientStorage = .disk
            options.coefficientWindowBytes = 1
            options.storage = .persistent(path: "\(folder)/photo.tiles")
            let error = thrownError { try TileBuilder.build(data: data, options: options) }
            let left = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? ["?"]
            let fine =
                error?.code == .io && error?.errno == EFBIG && left.isEmpty
                && error?.message.contains("coefficient file") == true
            if !fine { FileHandle.standardError.write(Data("full disk child: \(String(describing: error)), left \(left)\n".utf8)) }
            // A memory budget for the same image keeps it off the disk and succeeds.
            options.coefficientStorage = .memory
            let built = (try? TileBuilder.build(data: data, options: options))?.isComplete == true
            _exit(fine && built ? 0 : 1)
        }
        if result?.exitStatus != .exitCode(0), let result {
            Issue.record(Comment(rawValue: String(decoding: result.standardErrorContent, as: UTF8.self)))
        }
    }

    @Test(
        "a 105-megapixel progressive JPEG builds under 128 MiB of peak memory (its coefficients alone are 315 MB)",
        .enabled(if: !underSanitizer, "peak memory means nothing under a sanitizer"))
    func boundedMemory() async throws {
        try FileManager.default.createDirectory(atPath: Self.root, withIntermediateDirectories: true)
        let path = "\(Self.root)/large-progressive.jpg"
        try Self.largeProgressiveJPEG(width: 10240, height: 10240).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        await #expect(processExitsWith: .exitCode(0)) {
            let path = "\(ProgressiveFaultTests.root)/large-progressive.jpg"
            let image = try TileBuilder.build(contentsOfFile: path)  // the default options
            let peak = ProgressiveFaultTests.peakResidentBytes()
            let fine = image.isComplete && image.geometry.width == 10240 && peak > 0 && peak < 128 << 20
            FileHandle.standardError.write(Data("bounded memory child: peak \(peak >> 20) MiB\n".utf8))
            _exit(fine ? 0 : 1)
        }
    }
}
