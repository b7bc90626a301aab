import CJpegReference
import Foundation
import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// The export and render scenarios, and the comparison of the exported tiles with vips dzsave's.
enum ExportScenarios {
    /// The folder every export of this benchmark run writes in, one subfolder per run: nothing is
    /// deleted until the whole run ends, because ext4 here skips recently freed inodes when it creates
    /// files (for 60 to 300 s), which made file creation up to 10x slower right after a deletion of
    /// thousands (measured: 6,800 files in 0.18 s, then 2.2 s).
    static func runFolder(parent: pid_t = getppid()) -> String {
        NSTemporaryDirectory() + "/tiledimagekit-bench-outputs-\(parent)"
    }

    /// A fresh subfolder of ``runFolder(parent:)`` for one child's output.
    static func outputFolder(_ prefix: String) throws -> String {
        let folder = "\(runFolder())/\(prefix)-\(getpid())"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        return folder
    }

    /// `tiler export`'s defaults on the input, read 1 MiB at a time.
    static func exportDZI(input: String) throws {
        let exporter = try TileExporter(name: "dz", outputDirectory: try outputFolder("ours"), options: ExportOptions())
        let file = try InputFile(path: input)
        var chunk = Data(count: 1 << 20)
        while !exporter.hasReachedEndOfImage {
            chunk.count = 1 << 20
            let n = try chunk.withUnsafeMutableBytes { try file.read(into: $0) }
            if n == 0 { break }
            chunk.count = n
            try exporter.append(chunk)
        }
        _ = try exporter.finish()
    }

    /// The floor of an export's writes: as many files as the DeepZoom export of the input has tiles
    /// (256-pixel tiles, no overlap, every level down to 1x1), in the same folders, 11 KiB each (the
    /// mean size of a quality-80 tile of the bench photo), nothing encoded.
    static func createFiles(input: String) throws {
        let info = try ImageInfo.read(contentsOfFile: input)
        var levels = [(info.width, info.height)]
        while levels[0] != (1, 1) { levels.insert(((levels[0].0 + 1) / 2, (levels[0].1 + 1) / 2), at: 0) }
        let root = try outputFolder("floor")
        let bytes = [UInt8](repeating: 0x5A, count: 11 * 1024)
        for (number, (w, h)) in levels.enumerated() {
            let folder = "\(root)/\(number)"
            guard mkdir(folder, 0o755) == 0 else { throw BenchmarkError("cannot create \(folder)") }
            for c in 0..<((w + 255) / 256) {
                for r in 0..<((h + 255) / 256) {
                    let fd = open("\(folder)/\(c)_\(r).jpg", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
                    guard fd >= 0, bytes.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == bytes.count else {
                        throw BenchmarkError("cannot write a file")
                    }
                    close(fd)
                }
            }
        }
    }

    /// Builds the input's store, then renders 200 random 2000x2000 regions as 512x512 JPEGs (an IIIF
    /// server's `x,y,2000,2000/512,512/0/default.jpg`) twice: cold (the build bypassed the page cache),
    /// then warm.
    static func renders(input: String, count: Int = 200) throws -> (cold: [Double], warm: [Double]) {
        let image = try TileBuilder.build(contentsOfFile: input)
        let (width, height) = (image.geometry.width, image.geometry.height)
        var generator = SplitMix(seed: 7)
        let requests = try (0..<count).map { _ in
            let x = Int(generator.next() % UInt64(max(1, width - 2000)))
            let y = Int(generator.next() % UInt64(max(1, height - 2000)))
            return try ImageRequest(path: "\(x),\(y),2000,2000/512,512/0/default.jpg").resolve(width: width, height: height)
        }
        let clock = ContinuousClock()
        func pass() throws -> [Double] {
            try requests.map { request in
                let start = clock.now
                let jpeg = try image.renderEncoded(request, quality: 80)
                precondition(jpeg.count > 1000)
                return seconds(clock.now - start)
            }
        }
        let cold = try pass()
        return (cold, try pass())
    }

    /// Compares the newest export of ours with the newest of vips in this run: the same file list,
    /// and the PSNR of every tile (libjpeg's decodes of both). Nil when either is missing.
    static func compareWithVips() -> String? {
        let root = runFolder(parent: getpid())
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: root) else { return nil }
        func newest(_ prefix: String) -> String? {
            names.filter { $0.hasPrefix(prefix) }.max { modified("\(root)/\($0)") < modified("\(root)/\($1)") }
                .map { "\(root)/\($0)/dz_files" }
        }
        guard let ours = newest("ours-"), let theirs = newest("vips-") else { return nil }
        let a = files(ours), b = files(theirs).filter { !$0.hasSuffix(".xml") }
        var squared = 0.0, samples = 0.0, worst = Double.infinity
        for file in a where b.contains(file) {
            guard let x = decode("\(ours)/\(file)"), let y = decode("\(theirs)/\(file)"), x.count == y.count else {
                return "export vs vips: \(file) differs in size"
            }
            var tileSquared = 0.0
            for i in 0..<x.count where i % 4 != 3 {
                let d = Double(x[i]) - Double(y[i])
                tileSquared += d * d
            }
            squared += tileSquared
            samples += Double(x.count / 4 * 3)
            let mse = tileSquared / Double(x.count / 4 * 3)
            worst = min(worst, mse == 0 ? .infinity : 10 * log10(255 * 255 / mse))
        }
        let overall = squared == 0 ? Double.infinity : 10 * log10(255 * 255 / (squared / samples))
        return String(
            format: "export vs vips dzsave: file lists %@ (%d and %d files); PSNR over all tiles %.1f dB, worst tile %.1f dB",
            a == b ? "identical" : "DIFFER", a.count, b.count, overall, worst)
    }

    private static func modified(_ path: String) -> Double {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0
    }

    private static func files(_ root: String) -> [String] {
        var found: [String] = []
        let enumerator = FileManager.default.enumerator(atPath: root)
        while let path = enumerator?.nextObject() as? String {
            if path.hasSuffix(".jpg") || path.hasSuffix(".xml") { found.append(path) }
        }
        return found.sorted()
    }

    private static func decode(_ path: String) -> [UInt8]? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        var result = cjs_reference_result()
        var out: UnsafeMutableRawPointer?
        let status = data.withUnsafeBytes { cjs_reference_decode($0.baseAddress, $0.count, &out, &result) }
        guard status == 0, let out else { return nil }
        defer { cjs_reference_free(out) }
        return [UInt8](UnsafeRawBufferPointer(start: out, count: Int(result.width) * Int(result.height) * 4))
    }
}
