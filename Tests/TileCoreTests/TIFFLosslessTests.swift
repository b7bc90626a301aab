import Foundation
import Testing
import TestTraits
import TestSupport
import TileCore

/// Level 0 of a TIFF store holds the source JPEG's own coefficients, checked against libjpeg's
/// `jpeg_read_coefficients` of the source and, where djpeg and jpegtran are installed, against
/// `jpegtran -crop` of the same region decoded with `djpeg -nosmooth`.
@Suite("TIFF level 0 is the source's coefficients", .ownThreads)
struct TIFFLosslessTests {
    static let generated: [Synthetic.Spec] = [
        .init(width: 777, height: 555),
        .init(width: 600, height: 300, subsampling: .s422),
        .init(width: 513, height: 257, subsampling: .s444, quality: 97),
        .init(width: 700, height: 260, subsampling: .s411),
        .init(width: 640, height: 480, progressive: true),
        .init(width: 300, height: 700, arithmetic: true),
        .init(width: 333, height: 222, progressive: true, arithmetic: true),
        .init(width: 530, height: 270, grayscale: true),
        .init(width: 260, height: 530, grayscale: true, progressive: true),
        .init(width: 512, height: 512, restartRows: 1),
        .init(width: 1, height: 1),
        .init(width: 17, height: 300, quality: 20)
    ]

    @Test("generated JPEGs: every level-0 tile holds the source's coefficients", arguments: generated)
    func generatedInputs(_ spec: Synthetic.Spec) throws {
        let jpeg = try Synthetic.jpeg(spec)
        let image = try Synthetic.build(jpeg, chunk: 4096, options: TIFFChecks.options())
        #expect(image.isLevelZeroCopied)
        #expect(try TIFFChecks.levelZeroMismatches(image, source: jpeg) == [])
    }

    @Test("a sampling TIFF cannot state (4:4:0) gets an encoded level 0, and is still read")
    func unstatableSampling() throws {
        let jpeg = try Synthetic.smoothJPEG(width: 300, height: 200, subsampling: .s440)
        let image = try TileBuilder.build(data: jpeg, options: TIFFChecks.options())
        #expect(!image.isLevelZeroCopied)
        let reference = try Reference.decode(jpeg).image
        let tile = RGBAImage(width: 256, height: 256, pixels: try image.readTile(level: 0, column: 0, row: 0))
        #expect(
            Reference.psnr(
                Reference.crop(tile, x: 0, y: 0, width: 256, height: 200),
                Reference.crop(reference, x: 0, y: 0, width: 256, height: 200)) > 38)
    }

    /// Every 8-bit YCbCr and gray fixture libjpeg decodes, but `dc-predictor-overflow.jpg`: a fuzzer's
    /// file whose DC differences need more than baseline's 11 bits (libjpeg decodes them; a baseline
    /// Huffman table cannot code them, so the tiles clamp them: level 0 is not lossless there).
    static let corpus = Corpus.entries.filter {
        $0["djpeg_ok"] == "y" && $0["precision"] == "8" && ($0["color_space"] == "YCbCr" || $0["color_space"] == "GRAYSCALE")
            && $0.file != "dc-predictor-overflow.jpg"
    }

    @Test(
        "fixtures: every level-0 tile holds the source's coefficients; corner tiles decode as jpegtran -crop's",
        .enabled(if: Corpus.isPresent, Comment(rawValue: Corpus.skipMessage)), arguments: corpus)
    func fixtures(_ entry: Corpus.Entry) throws {
        let source = try #require(FileManager.default.contents(atPath: entry.path))
        let image = try TileBuilder.build(
            contentsOfFile: entry.path,
            options: TIFFChecks.options {
                $0.orientation = .none  // the stored pixels: every fixture's coefficients can be copied
                $0.allowTruncated = CorpusTests.isTruncated(entry)
                $0.warningLimit = nil
            })
        guard entry["subsampling"] != "4:4:0" else {  // TIFF cannot state it: encoded, not copied
            #expect(!image.isLevelZeroCopied)
            return
        }
        #expect(image.isLevelZeroCopied)
        #expect(try TIFFChecks.levelZeroMismatches(image, source: source) == [])
        if Tools.have("djpeg", "jpegtran") { try Self.expectCornerPixels(image, jpeg: entry.path) }
    }

    /// The first and last tiles decode (`djpeg -nosmooth`) to the same pixels as `jpegtran -crop` of
    /// their region of the JPEG at `path` (the source, or jpegtran's turn of it).
    static func expectCornerPixels(_ image: TiledImage, jpeg path: String) throws {
        let level = try image.level(0)
        let size = image.geometry.tileSize
        for (column, row) in Set([(0, 0), (level.columns - 1, level.rows - 1)].map { [$0.0, $0.1] }).map({ ($0[0], $0[1]) }) {
            let (x, y) = (column * size, row * size)
            let (w, h) = (min(size, level.width - x), min(size, level.height - y))
            let expected = try TIFFChecks.djpeg(try Tools.run("jpegtran", ["-crop", "\(w)x\(h)+\(x)+\(y)", path]).stdout)
            let tile = try TIFFChecks.djpeg(try #require(try image.storedJPEGTile(level: 0, column: column, row: row)))
            #expect(expected.channels == tile.channels)
            for line in 0..<h {
                let a = expected.samples[(line * expected.width * expected.channels)..<((line * expected.width + w) * expected.channels)]
                let b = tile.samples[(line * tile.width * tile.channels)..<((line * tile.width + w) * tile.channels)]
                #expect(a == b, "\(path) tile (\(column), \(row)) row \(line)")
                if a != b { break }
            }
        }
    }
}
