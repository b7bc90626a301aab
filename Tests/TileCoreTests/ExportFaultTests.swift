import Foundation
import Testing
import TestTraits
import TestSupport
import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// An export whose tile writes fail midway (a file-size limit: EFBIG, as a full disk fails with
/// ENOSPC), in a process of its own.
@Suite("Export faults in a child process", .serialized, .ownThreads)
struct ExportFaultTests {
    static let root = "/tmp/tiledimagekit-export-fault-tests"

    @Test("a tile that cannot be written fails the export with the errno and leaves nothing behind")
    func fullDisk() async throws {
        try? FileManager.default.removeItem(atPath: Self.root)
        try FileManager.default.createDirectory(atPath: Self.root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: Self.root) }
        let result = await #expect(processExitsWith: .exitCode(0), observing: [\.standardErrorContent]) {
            // Noise tiles of quality 95 are far over 4 KiB: the first level-0 tile's write fails.
            let data = try Synthetic.jpeg(.init(width: 1200, height: 900, quality: 95))
            signal(SIGXFSZ, SIG_IGN)
            var limit = rlimit(rlim_cur: 4096, rlim_max: 4096)
            setrlimit(Int32(RLIMIT_FSIZE.rawValue), &limit)
            var options = ExportOptions()
            options.format = .jpeg(quality: 95)
            let exporter = try TileExporter(name: "full", outputDirectory: ExportFaultTests.root, options: options)
            let error = thrownError {
                try exporter.append(data)
                return try exporter.finish()
            }
            let left = (try? FileManager.default.contentsOfDirectory(atPath: ExportFaultTests.root)) ?? ["?"]
            let fine = error?.code == .io && error?.errno == EFBIG && left.isEmpty
            if !fine { FileHandle.standardError.write(Data("export child: \(String(describing: error)), left \(left)\n".utf8)) }
            _exit(fine ? 0 : 1)
        }
        if result?.exitStatus != .exitCode(0), let result {
            Issue.record(Comment(rawValue: String(decoding: result.standardErrorContent, as: UTF8.self)))
        }
    }
}
