import Foundation
import Testing
import TestTraits
import TestSupport
@testable import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// Progressive and multi-scan JPEGs with their coefficients on disk (issue 14): the pixels are
/// libjpeg's (djpeg's hashes, libjpeg's own decode of the same bytes), truncation at every scan gives
/// libjpeg's image or a typed error with nothing left behind, and memory stays bounded.
@Suite("Progressive JPEGs, coefficients on disk", .ownThreads)
struct ProgressiveTests {
    static func options(_ storage: CoefficientStorage, _ configure: (inout BuildOptions) -> Void = { _ in }) -> BuildOptions {
        var options = BuildOptions()
        options.orientation = .none
        options.coefficientStorage = storage
        options.coefficientWindowBytes = 1  // the smallest window: every few block rows go to disk and back
        configure(&options)
        return options
    }

    /// Where each scan's entropy-coded data ends: the offset of the first marker after it (written
    /// plainly: segments by their lengths, then entropy data up to an 0xFF that is neither a stuffed
    /// 0xFF00 nor a restart marker).
    static func scanEnds(_ jpeg: Data) -> [Int] {
        let bytes = [UInt8](jpeg)
        var ends: [Int] = []
        var i = 2
        while i + 3 < bytes.count {
            guard bytes[i] == 0xFF else { break }
            let marker = bytes[i + 1]
            if marker == 0xD9 { break }
            let length = Int(bytes[i + 2]) << 8 | Int(bytes[i + 3])
            i += 2 + length
            guard marker == 0xDA else { continue }
            while i + 1 < bytes.count {
                if bytes[i] == 0xFF, bytes[i + 1] != 0, !(0xD0...0xD7).contains(bytes[i + 1]) { break }
                i += 1
            }
            ends.append(i)
        }
        return ends
    }

    /// Open descriptors of this process on files under `folder` (unlinked ones included: their link
    /// in /proc names the path they had, with " (deleted)").
    static func descriptorsOpen(under folder: String) -> [String] {
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return fds.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)") }
            .filter { $0.hasPrefix(folder) }
    }

    // MARK: - Pixels

    static let multiScan = Corpus.entries.filter {
        $0["djpeg_ok"] == "y" && $0["cmyk_ppm_sha256"].isEmpty && (Int($0["scans"]) ?? 1) > 1
    }

    @Test("every multi-scan fixture matches djpeg's hashes with its coefficients on disk", arguments: multiScan)
    func corpusOnDisk(entry: Corpus.Entry) throws {
        try #require(Corpus.isPresent, Comment(rawValue: Corpus.skipMessage))
        let options = Self.options(.disk) { CorpusTests.acceptingLikeDjpeg(entry, &$0) }
        let image = try TileBuilder.build(contentsOfFile: entry.path, options: options, chunkSize: 64 * 1024)
        #expect(try CorpusTests.rgbHash(image) == entry["rgb_sha256"])
    }

    @Test(
        "a generated progressive image on disk equals libjpeg's decode, fed in chunks of any size",
        arguments: [(JPEGEncoder.Subsampling.s420, 1), (.s420, 777), (.s444, 4096), (.s422, 1 << 20)])
    func generatedOnDisk(subsampling: JPEGEncoder.Subsampling, chunk: Int) throws {
        // 1000 columns: a Y block row is 16 KB, so a window holds far fewer rows than the image has.
        let data = try Synthetic.jpeg(.init(width: 1000, height: 1400, subsampling: subsampling, progressive: true))
        let reference = try Reference.decode(data).image
        let image = try Synthetic.build(data, chunk: chunk, options: Self.options(.disk))
        #expect(try image.pixels(level: 0) == reference)
        #expect(try image.pixels(level: 1) == Reference.shrink(reference))
        #expect(image.scratchByteCount == 0)
    }

    @Test("the automatic setting keeps small images in memory, and all three give the same tiles")
    func storagesAgree() throws {
        let data = try Synthetic.jpeg(.init(width: 640, height: 480, progressive: true))
        let tiles = try [CoefficientStorage.default, .memory, .disk, .automatic(memoryLimit: 0)].map {
            try TileBuilder.build(data: data, options: Self.options($0)).allTiles()
        }
        #expect(Set(tiles).count == 1)
    }

    // MARK: - Truncation

    @Test("progressive files cut at every scan boundary and inside every scan: libjpeg's image, or truncated with nothing left")
    func truncatedAtEveryScan() throws {
        let data = try Synthetic.jpeg(.init(width: 520, height: 390, progressive: true))
        let ends = Self.scanEnds(data)
        try #require(ends.count >= 8, "a libjpeg progressive script has 10 scans, found \(ends.count)")
        var cuts: [Int] = []
        var scanStart = ends.first.map { _ in 0 } ?? 0
        for end in ends {
            cuts.append(end)  // the end of a scan, before the next marker
            if scanStart > 0 { cuts.append((scanStart + end) / 2) }  // inside the scan
            scanStart = end
        }
        cuts.removeLast()  // the last scan's end plus EOI is the whole file
        let folder = try Inputs.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        for cut in cuts {
            let prefix = data.prefix(cut)
            let store = folder.appendingPathComponent("cut.tiles").path
            let refused = thrownError {
                try Synthetic.build(prefix, chunk: 997, options: Self.options(.disk) { $0.storage = .persistent(path: store) })
            }
            #expect(refused?.code == .truncated, "cut at \(cut): \(String(describing: refused))")
            #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).isEmpty, "cut at \(cut)")
            #expect(Self.descriptorsOpen(under: folder.path).isEmpty, "cut at \(cut): a file was left open")

            let reference = try Reference.decode(prefix).image
            let accepted = try Synthetic.build(
                prefix, chunk: 997,
                options: Self.options(.disk) {
                    $0.allowTruncated = true; $0.warningLimit = nil
                })
            #expect(try accepted.pixels(level: 0) == reference, "cut at \(cut)")
        }
    }

    // MARK: - The last scan

    @Test("the image's rows come out while the scan that completes every coefficient is still arriving")
    func rowsBeforeTheLastByte() throws {
        let data = try Synthetic.jpeg(.init(width: 1000, height: 1400, progressive: true))
        let ends = Self.scanEnds(data)
        let middle = (ends[ends.count - 2] + data.count) / 2  // halfway through the last scan
        let builder = try TileBuilder(options: Self.options(.disk))
        try builder.append(data.prefix(middle))
        #expect(builder.rowsDecoded > 0 && builder.rowsDecoded < 1400, "\(builder.rowsDecoded) rows")
        try builder.append(data[middle...])
        #expect(try builder.finish().pixels(level: 0) == Reference.decode(data).image)
    }

    @Test("a scan after every coefficient is complete counts as a warning and changes nothing")
    func scanAfterCompletion() throws {
        let data = try Synthetic.jpeg(.init(width: 300, height: 200, progressive: true))
        let end = try #require(Self.scanEnds(data).last)
        let lastSOS = try #require((0..<end - 1).last { data[$0] == 0xFF && data[$0 + 1] == 0xDA })
        let late = data.prefix(end) + data[lastSOS..<end] + [0xFF, 0xD9]  // the last scan twice
        let builder = try TileBuilder(options: Self.options(.disk))
        try builder.append(late)
        let image = try builder.finish()
        // libjpeg's own warnings for this stream (it reads the late scan too), and ours for the scan.
        #expect(builder.warningCount == (try Reference.decode(late).warnings) + 1)
        // The image as of the scan that completed every coefficient: the stream without the late scan.
        #expect(try image.pixels(level: 0) == Reference.decode(data).image)
    }

    // MARK: - Previews

    @Test("previews after scans 1 and 2 are libjpeg's 1/8-scale decode of the stream cut after that scan, then the final image replaces them")
    func previewsAfterEachScan() throws {
        let data = try Synthetic.jpeg(.init(width: 1200, height: 900, progressive: true))
        let ends = Self.scanEnds(data)
        let builder = try TileBuilder(
            options: Self.options(.disk) {
                $0.levels = .count(6); $0.preview = .afterScans(2)
            })
        var fed = 0
        func feed(to end: Int) throws {
            try builder.append(data[fed..<end])
            fed = end
        }
        try feed(to: ends[0] - 1)  // scan 1 not fully in yet
        builder.waitForPreview()
        let image = try #require(builder.image)
        #expect(image.previewScan == nil)
        #expect(thrownCode { try image.readTile(level: 3, column: 0, row: 0) } == .notReady)
        for scan in [1, 2] {
            // A scan has ended once the marker after it starts arriving.
            try feed(to: ends[scan - 1] + 2)
            builder.waitForPreview()  // previews are made on a thread of their own
            let reference = try Reference.decode(data.prefix(ends[scan - 1]) + [0xFF, 0xD9], scale: 8).image
            #expect(image.previewScan == scan)
            #expect(image.quality(ofLevel: 3) == .preliminary(scan: scan))
            #expect(image.quality(level: 5, column: 0, row: 0) == .preliminary(scan: scan))
            #expect(try image.pixels(level: 3) == reference)
            #expect(try image.pixels(level: 4) == Reference.shrink(reference))
            #expect(try image.pixels(level: 5) == Reference.shrink(Reference.shrink(reference)))
            // Finer levels need every scan.
            #expect(thrownCode { try image.readTile(level: 2, column: 0, row: 0) } == .notReady)
            #expect(image.quality(level: 2, column: 0, row: 0) == nil)
        }
        try feed(to: data.count)
        let complete = try builder.finish()
        let full = try Reference.decode(data).image
        #expect(try complete.pixels(level: 3) == Reference.shrink(Reference.shrink(Reference.shrink(full))))
        #expect(complete.quality(ofLevel: 3) == .final)
        #expect(complete.quality(level: 3, column: 0, row: 0) == .final)
    }

    @Test("no previews by default for a builder fed directly, nor for baseline JPEGs")
    func previewsOff() throws {
        let progressive = try Synthetic.jpeg(.init(width: 1200, height: 900, progressive: true))
        let builder = try TileBuilder(options: Self.options(.default) { $0.levels = .count(6) })
        try builder.append(progressive.prefix(Self.scanEnds(progressive)[1] + 2))
        builder.waitForPreview()
        #expect(try #require(builder.image).previewScan == nil)

        let baseline = try Synthetic.jpeg(.init(width: 1200, height: 900))
        let other = try TileBuilder(
            options: Self.options(.default) {
                $0.levels = .count(6); $0.preview = .afterScans(2)
            })
        try other.append(baseline.prefix(baseline.count / 2))
        other.waitForPreview()
        #expect(try #require(other.image).previewScan == nil)
    }
}
