import Foundation
import Testing
import TestTraits
import TestSupport
import TileCore

@Suite("Orientation", .ownThreads)
struct OrientationTests {
    /// A generated image whose sides are not multiples of the tile size or of 2, in small tiles so the
    /// grid has several tiles each way and odd edges at every level.
    static let spec = Synthetic.Spec(width: 203, height: 117, subsampling: .s444)

    static func build(_ data: Data, _ orientation: OrientationOption) throws -> TiledImage {
        var options = BuildOptions()
        options.orientation = orientation
        options.tileSize = 32
        options.levels = .count(20)
        return try TileBuilder.build(data: data, options: options)
    }

    @Test("forcing each orientation gives level 0 as the plain reference transform", arguments: ImageOrientation.allCases)
    func forcedOrientationMatchesReference(orientation: ImageOrientation) throws {
        let data = try Synthetic.jpeg(Self.spec)
        let stored = try Reference.decode(data).image
        let image = try Self.build(data, .fixed(orientation))
        #expect(try image.pixels(level: 0) == Reference.orient(stored, orientation.rawValue))
    }

    /// The rule for lower levels: level k is the 2x2 box filter applied k times to the *stored* image,
    /// then oriented. Where an orientation flips an axis of odd length, the column (row) averaged with
    /// itself is the stored image's last one, which shows up first (left or top) once displayed.
    @Test("lower levels are the stored image's box filter, oriented", arguments: ImageOrientation.allCases)
    func lowerLevelsFollowTheStatedRule(orientation: ImageOrientation) throws {
        let data = try Synthetic.jpeg(Self.spec)
        var stored = try Reference.decode(data).image
        let image = try Self.build(data, .fixed(orientation))
        for level in 1..<image.levelCount {
            stored = Reference.shrink(stored)
            #expect(try image.pixels(level: level) == Reference.orient(stored, orientation.rawValue), "level \(level)")
        }
    }

    @Test("geometry is in display orientation and padding ends right and bottom")
    func displayGeometry() throws {
        let data = try Synthetic.jpeg(Self.spec)
        for orientation in ImageOrientation.allCases {
            let image = try Self.build(data, .fixed(orientation))
            let l = try image.level(0)
            #expect(orientation.swapsAxes ? (l.width, l.height) == (117, 203) : (l.width, l.height) == (203, 117))
            // The bottom-right tile holds padding at its right and bottom: alpha 0 past the image's edge.
            let tile = try image.readTile(level: 0, column: l.columns - 1, row: l.rows - 1)
            let lastX = (l.width - 1) % 32, lastY = (l.height - 1) % 32
            #expect(tile[(lastY * 32 + lastX) * 4 + 3] == 255)
            if lastX < 31 { #expect(tile[(lastY * 32 + lastX + 1) * 4 + 3] == 0) }
            if lastY < 31 { #expect(tile[((lastY + 1) * 32 + lastX) * 4 + 3] == 0) }
        }
    }

    @Test("withTile gives the same bytes as readTile in every orientation")
    func withTileMatchesReadTile() throws {
        let data = try Synthetic.jpeg(Self.spec)
        for orientation in ImageOrientation.allCases {
            let image = try Self.build(data, .fixed(orientation))
            let read = try image.readTile(level: 0, column: 1, row: 2)
            let viewed = try image.withTile(level: 0, column: 1, row: 2) { Array($0) }
            #expect(read == viewed, "\(orientation)")
        }
    }
}

@Suite("Orientation over the corpus", .enabled(if: Corpus.isPresent, Comment(rawValue: Corpus.skipMessage)), .ownThreads)
struct CorpusOrientationTests {
    static let oriented = Corpus.entries.filter { $0["djpeg_ok"] == "y" && !$0["oriented_rgb_sha256"].isEmpty }

    @Test("level 0 built with .fromExif has oriented_rgb_sha256", arguments: oriented)
    func fromExifMatchesManifest(entry: Corpus.Entry) throws {
        let image = try CorpusTests.build(entry) {
            $0.orientation = .fromExif
            CorpusTests.acceptingLikeDjpeg(entry, &$0)
        }
        #expect(try image.level(0).width == Int(entry["oriented_width"]))
        #expect(try image.level(0).height == Int(entry["oriented_height"]))
        #expect(try CorpusTests.rgbHash(image) == entry["oriented_rgb_sha256"])
    }
}

@Suite("Stores reopened with an orientation", .ownThreads)
struct StoreOrientationTests {
    @Test(
        "a store opened with .none shows the stored pixels, with .fixed any of the eight, by default its own",
        arguments: [1, 6, 3, 7])
    func orientationOverrideOnAStore(built: Int) throws {
        let data = try Synthetic.jpeg(.init(width: 300, height: 170))
        let stored = try Reference.decode(data).image
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("orient-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var options = BuildOptions()
        options.orientation = .fixed(try #require(ImageOrientation(rawValue: built)))
        options.storage = .persistent(path: "\(folder)/s.tiles")
        options.tileSize = 128
        _ = try TileBuilder.build(data: data, options: options)
        let path = "\(folder)/s.tiles"
        #expect(try TiledImage.open(store: path).pixels(level: 0) == Reference.orient(stored, built))
        #expect(try TiledImage.open(store: path, orientation: .none).pixels(level: 0) == stored)
        for value in 1...8 {
            let image = try TiledImage.open(store: path, orientation: .fixed(try #require(ImageOrientation(rawValue: value))))
            #expect(try image.pixels(level: 0) == Reference.orient(stored, value), "built \(built), read \(value)")
            // Lower levels: the stored shrink, oriented (the stated rule).
            #expect(try image.pixels(level: 1) == Reference.orient(Reference.shrink(stored), value), "built \(built), read \(value)")
        }
    }

    @Test("a TIFF store, written upright, opens in the orientation it was built with and refuses any other")
    func tiffStoreOrientation() throws {
        let data = try Synthetic.jpeg(.init(width: 300, height: 170))
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("orient-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var options = BuildOptions()
        options.orientation = .fixed(.rotate90)
        options.format = .tiff()
        options.storage = .persistent(path: "\(folder)/t.tiles")
        _ = try TileBuilder.build(data: data, options: options)
        let path = "\(folder)/t.tiles"
        #expect(try TiledImage.open(store: path).geometry.width == 170)
        #expect(try TiledImage.open(store: path, orientation: .fixed(.rotate90)).geometry.width == 170)
        for option in [OrientationOption.none, .fixed(.rotate180), .fixed(.identity)] {
            #expect(thrownError { try TiledImage.open(store: path, orientation: option) }?.code == .unsupported, "\(option)")
        }
    }
}
