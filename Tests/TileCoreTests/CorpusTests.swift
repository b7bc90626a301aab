import Foundation
import Testing
import TestTraits
import TestSupport
import TileCore

/// Tests over the external corpus `../shared/fixtures/jpeg` (djpeg's hashes in manifest.csv).
@Suite("Fixture corpus", .enabled(if: Corpus.isPresent, Comment(rawValue: Corpus.skipMessage)), .ownThreads)
struct CorpusTests {
    static let decodable = Corpus.entries.filter { $0["djpeg_ok"] == "y" }
    /// Files that are PNGs whatever their names (the format is told from the bytes): built as PNGs.
    static let pngs = Corpus.entries.filter { ($0["djpeg_error"]).hasPrefix("Not a JPEG file: starts with 0x89 0x50") }
    static let refused = Corpus.entries.filter {
        $0["djpeg_ok"] == "n" && $0["cmyk_ppm_sha256"].isEmpty && !$0["djpeg_error"].hasPrefix("Not a JPEG file: starts with 0x89 0x50")
    }
    static let cmyk = Corpus.entries.filter { !$0["cmyk_ppm_sha256"].isEmpty }

    static func rgbHash(_ image: TiledImage) throws -> String {
        var hasher = SHA256()
        try image.forEachRow(level: 0) { _, row in hasher.updateRGB(fromRGBA: row) }
        return hasher.finalize()
    }

    static func build(_ entry: Corpus.Entry, _ configure: (inout BuildOptions) -> Void = { _ in }) throws -> TiledImage {
        var options = BuildOptions()
        options.orientation = .none
        configure(&options)
        return try TileBuilder.build(contentsOfFile: entry.path, options: options, chunkSize: 64 * 1024)
    }

    /// Files whose scan data ends early: the stream ends ("Premature end of JPEG file"), or a scan is
    /// cut short by a marker ("premature end of data segment", here an EOI after a cut scan).
    static func isTruncated(_ entry: Corpus.Entry) -> Bool {
        entry["djpeg_warnings"].contains("Premature end") || entry["djpeg_warnings"].contains("premature end of data segment")
    }

    /// Options that accept what djpeg accepts: truncation, and any number of warnings.
    static func acceptingLikeDjpeg(_ entry: Corpus.Entry, _ options: inout BuildOptions) {
        options.allowTruncated = isTruncated(entry)
        options.warningLimit = nil
    }

    @Test("level 0 has djpeg's rgb_sha256", arguments: decodable)
    func levelZeroMatchesDjpeg(entry: Corpus.Entry) throws {
        let image = try Self.build(entry) { Self.acceptingLikeDjpeg(entry, &$0) }
        #expect(try image.level(0).width == Int(entry["width"]) && image.level(0).height == Int(entry["height"]))
        #expect(try Self.rgbHash(image) == entry["rgb_sha256"])
    }

    @Test("a file that ends before its image is refused as truncated by default", arguments: decodable.filter(isTruncated))
    func truncatedFilesAreRefused(entry: Corpus.Entry) throws {
        #expect(thrownCode { try Self.build(entry) } == .truncated)
    }

    @Test("files djpeg refuses end in a typed error, with no file left behind", arguments: refused)
    func refusedFilesFail(entry: Corpus.Entry) throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("corpus-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = folder.appendingPathComponent("out.tiles").path
        let code = thrownCode { try Self.build(entry) { $0.storage = .persistent(path: store) } }
        let expected: [TileError.Code] = [.corrupt, .unsupported, .tooLarge, .truncated]
        #expect(code.map(expected.contains) == true, "\(entry.file): \(String(describing: code))")
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).isEmpty)
    }

    @Test(
        "a PNG named .jpg is read as the PNG it is: pngtopnm's pixels", .enabled(if: PNGSourceTests.tools, PNGSourceTests.skip),
        arguments: pngs)
    func pngNamedJPEG(entry: Corpus.Entry) throws {
        let folder = try PNGSourceTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let image = try Self.build(entry)
        #expect(try image.pixels(level: 0) == PNGSourceTests.reference(try Data(contentsOf: URL(fileURLWithPath: entry.path)), in: folder))
    }

    @Test("CMYK and YCCK files match djpeg's CMYK-to-RGB pixels", arguments: cmyk)
    func cmykMatchesDjpeg(entry: Corpus.Entry) throws {
        #expect(try Self.rgbHash(try Self.build(entry)) == entry["cmyk_ppm_sha256"])
    }
}
