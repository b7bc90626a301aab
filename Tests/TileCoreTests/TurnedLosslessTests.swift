import Foundation
import Testing
import TestTraits
import TestSupport
import TileCore

/// Level 0 of a TIFF store of a turned JPEG (EXIF orientations 2-8) holds the source's coefficients
/// turned in the DCT domain, checked against `jpegtran -perfect` turning the same JPEG the same way:
/// every tile's coefficients equal jpegtran's (`jpeg_read_coefficients` of both), and corner tiles
/// decode (`djpeg -nosmooth`) as `jpegtran -crop` of jpegtran's turned JPEG. Where jpegtran refuses
/// `-perfect` (a flipped side that is not a whole number of MCUs), level 0 is encoded, and says why.
@Suite(
    "TIFF level 0 of a turned JPEG is the source's coefficients turned", .ownThreads,
    .enabled(if: Tools.have("jpegtran", "djpeg"), Comment(rawValue: Tools.missing("jpegtran", "djpeg"))))
struct TurnedLosslessTests {
    /// jpegtran's arguments that turn a JPEG of EXIF orientation N upright.
    static let jpegtranTurn: [Int: [String]] = [
        2: ["-flip", "horizontal"], 3: ["-rotate", "180"], 4: ["-flip", "vertical"], 5: ["-transpose"],
        6: ["-rotate", "90"], 7: ["-transverse"], 8: ["-rotate", "270"]
    ]

    /// `jpegtran -perfect` of `jpeg` turned upright from `orientation`; `nil` when jpegtran refuses it.
    static func jpegtran(_ jpeg: Data, orientation: Int) throws -> Data? {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("turn-\(UUID().uuidString).jpg")
        try jpeg.write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let run = try Tools.run("jpegtran", ["-perfect", "-copy", "none"] + jpegtranTurn[orientation]! + [file.path])
        return run.status == 0 ? run.stdout : nil
    }

    static func build(_ jpeg: Data, orientation: Int, storage: TileStorage? = nil) throws -> TiledImage {
        try TileBuilder.build(
            data: jpeg,
            options: TIFFChecks.options {
                $0.orientation = .fixed(ImageOrientation(rawValue: orientation)!)
                if let storage { $0.storage = storage }
            })
    }

    /// Sizes of whole MCUs (so every turn is perfect), in every coding the copy handles.
    static let generated: [Synthetic.Spec] = [
        .init(width: 640, height: 480),
        .init(width: 528, height: 272, subsampling: .s444, quality: 97),
        .init(width: 520, height: 264, grayscale: true),
        .init(width: 384, height: 656, progressive: true),
        .init(width: 512, height: 256, restartRows: 1)
    ]

    @Test(
        "generated JPEGs, every orientation: level 0 is jpegtran's turn, block for block",
        arguments: generated, 2...8)
    func generatedInputs(_ spec: Synthetic.Spec, orientation: Int) throws {
        let jpeg = try Synthetic.jpeg(spec)
        let turned = try #require(try Self.jpegtran(jpeg, orientation: orientation), "jpegtran -perfect refused \(spec)")
        let image = try Self.build(jpeg, orientation: orientation)
        #expect(image.isLevelZeroCopied)
        #expect(try TIFFChecks.levelZeroMismatches(image, source: turned) == [])
        try Self.expectCornerPixels(image, turned: turned)
    }

    @Test("small tiles: many bands of rows, the first short where rows are flipped, the ring reused", arguments: 2...8)
    func smallTiles(orientation: Int) throws {
        let jpeg = try Synthetic.jpeg(.init(width: 528, height: 400, progressive: orientation % 2 == 0))
        let turned = try #require(try Self.jpegtran(jpeg, orientation: orientation))
        let image = try TileBuilder.build(
            data: jpeg,
            options: TIFFChecks.options {
                $0.orientation = .fixed(ImageOrientation(rawValue: orientation)!)
                $0.tileSize = 32
            })
        #expect(image.isLevelZeroCopied)
        #expect(try TIFFChecks.levelZeroMismatches(image, source: turned) == [])
    }

    @Test("waitUntilWritten in the middle of a turned build returns (a band of rows is coded whole or not yet)")
    func waitMidway() throws {
        let jpeg = try Synthetic.jpeg(.init(width: 640, height: 1200))
        let turned = try #require(try Self.jpegtran(jpeg, orientation: 6))
        let builder = try TileBuilder(options: TIFFChecks.options { $0.orientation = .fixed(.rotate90) })
        for part in stride(from: 0, to: jpeg.count, by: jpeg.count / 7 + 1) {
            try builder.append(jpeg[part..<min(part + jpeg.count / 7 + 1, jpeg.count)])
            try builder.waitUntilWritten()
        }
        let image = try builder.finish()
        #expect(image.isLevelZeroCopied)
        #expect(try TIFFChecks.levelZeroMismatches(image, source: turned) == [])
    }

    @Test(
        "every component sampled 1x2 (iMCU rows of 16 in an 8-pixel MCU): flipped rows copied exactly where the iMCU rows are whole",
        .enabled(if: Tools.have("cjpeg"), Comment(rawValue: Tools.missing("cjpeg"))))
    func wholeIMCURows() throws {
        let pixels = try Synthetic.jpeg(.init(width: 48, height: 40, subsampling: .s444))
        let ppm = try Tools.run("djpeg", ["-pnm", try Self.file(pixels)]).stdout
        let jpeg = try Tools.run("cjpeg", ["-sample", "1x2,1x2,1x2", "-quality", "90", try Self.file(ppm, suffix: "ppm")]).stdout
        for orientation in 2...8 {
            let perfect = try Self.jpegtran(jpeg, orientation: orientation)
            let image = try TileBuilder.build(
                data: jpeg,
                options: TIFFChecks.options {
                    $0.orientation = .fixed(ImageOrientation(rawValue: orientation)!)
                    $0.tileSize = 16
                })
            #expect(image.isLevelZeroCopied == (perfect != nil), "orientation \(orientation)")
            if let perfect { #expect(try TIFFChecks.levelZeroMismatches(image, source: perfect) == [], "orientation \(orientation)") }
        }
    }

    /// `data` in a temporary file (removed when the process ends: the test's folder is temporary).
    static func file(_ data: Data, suffix: String = "jpg") throws -> String {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("turned-\(UUID().uuidString).\(suffix)")
        try data.write(to: file)
        return file.path
    }

    @Test("a turned JPEG cut short fails as truncated and leaves no folder behind")
    func truncated() throws {
        let jpeg = try Synthetic.jpeg(.init(width: 640, height: 480))
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("turned-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let error = thrownError {
            try TileBuilder.build(
                data: jpeg.prefix(jpeg.count / 2),
                options: TIFFChecks.options {
                    $0.orientation = .fixed(.rotate90)
                    $0.storage = .persistent(path: "\(folder)/t.tiles")
                })
        }
        #expect(error?.code == .truncated)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder) == [])
    }

    @Test("a flipped side that is not a whole number of MCUs: level 0 encoded, the manifest says why; a bare transpose is still copied")
    func partialMCUs() throws {
        let jpeg = try Synthetic.smoothJPEG(width: 777, height: 555, subsampling: .s420)
        for orientation in 2...8 {
            let perfect = try Self.jpegtran(jpeg, orientation: orientation)
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("turned-\(UUID().uuidString)").path
            defer { try? FileManager.default.removeItem(atPath: folder) }
            let image = try Self.build(jpeg, orientation: orientation, storage: .persistent(path: folder))
            #expect(image.isLevelZeroCopied == (perfect != nil), "orientation \(orientation)")
            let description = try StoreDescription.read(at: folder)
            if let perfect {
                #expect(orientation == 5)
                #expect(try TIFFChecks.levelZeroMismatches(image, source: perfect) == [])
                #expect(description.levelZero == "copied")
            } else {
                #expect(description.levelZero == "encoded")
                #expect(description.levelZeroReason?.contains("not a whole number of 16-pixel MCUs") == true, "\(orientation)")
                // Encoded upright all the same: close to libjpeg's decode turned by the plain reference.
                let reference = Reference.orient(try Reference.decode(jpeg).image, orientation)
                let psnr = Reference.psnr(try image.pixels(level: 0), reference)
                #expect(psnr > 38, "orientation \(orientation): \(psnr) dB")
            }
        }
    }

    @Test("4:2:2 transposed is a sampling TIFF cannot state: encoded; flipped only, copied")
    func transposedSubsampling() throws {
        let jpeg = try Synthetic.jpeg(.init(width: 608, height: 304, subsampling: .s422))
        #expect(try !Self.build(jpeg, orientation: 6).isLevelZeroCopied)
        let image = try Self.build(jpeg, orientation: 3)
        #expect(image.isLevelZeroCopied)
        #expect(try TIFFChecks.levelZeroMismatches(image, source: try #require(try Self.jpegtran(jpeg, orientation: 3))) == [])
    }

    /// The corpus's photos with orientations 2-8, built from their EXIF orientation: copied exactly when
    /// `jpegtran -perfect` can turn them, and then equal to its turn.
    static let corpus = Corpus.entries.filter {
        (2...8).contains(Int($0["exif_orientation"] ?? "") ?? 0) && $0["djpeg_ok"] == "y"
    }

    @Test(
        "fixtures with orientations 2-8: level 0 is jpegtran's turn wherever jpegtran -perfect turns them",
        .enabled(if: Corpus.isPresent, Comment(rawValue: Corpus.skipMessage)), arguments: corpus)
    func fixtures(_ entry: Corpus.Entry) throws {
        let jpeg = try #require(FileManager.default.contents(atPath: entry.path))
        let orientation = try #require(Int(entry["exif_orientation"] ?? ""))
        let image = try TileBuilder.build(data: jpeg, options: TIFFChecks.options())
        let perfect = try Self.jpegtran(jpeg, orientation: orientation)
        #expect(image.isLevelZeroCopied == (perfect != nil))
        if let perfect {
            #expect(try TIFFChecks.levelZeroMismatches(image, source: perfect) == [])
            try Self.expectCornerPixels(image, turned: perfect)
        }
    }

    /// The first and last tiles decode as `jpegtran -crop` of jpegtran's turned JPEG
    /// (``TIFFLosslessTests/expectCornerPixels(_:jpeg:)``).
    static func expectCornerPixels(_ image: TiledImage, turned: Data) throws {
        let path = try file(turned)
        defer { try? FileManager.default.removeItem(atPath: path) }
        try TIFFLosslessTests.expectCornerPixels(image, jpeg: path)
    }
}
