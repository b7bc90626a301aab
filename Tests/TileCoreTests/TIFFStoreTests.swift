import CJpegShim
import Foundation
import Testing
import TestTraits
import TestSupport
import TileCore

/// TIFF stores (``StoreFormat/tiff(_:)``): publication, reopening, lower levels, tiles during a build,
/// turned images, the choices made where level 0 cannot be copied.
@Suite("TIFF stores", .ownThreads)
struct TIFFStoreTests {
    static func folder() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("tiff-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static func allTiles(_ image: TiledImage) throws -> [[UInt8]] {
        var tiles: [[UInt8]] = []
        for level in 0..<image.levelCount {
            let l = try image.level(level)
            for row in 0..<l.rows { for column in 0..<l.columns { tiles.append(try image.readTile(level: level, column: column, row: row)) } }
        }
        return tiles
    }

    @Test("a persistent store is a manifest and pyramid.tif, published by one rename, reopened with the same tiles")
    func persistentStore() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let jpeg = try Synthetic.jpeg(.init(width: 900, height: 700))
        let source = "\(folder)/source.jpg"
        try jpeg.write(to: URL(fileURLWithPath: source))
        let store = "\(folder)/s.tiles"
        let built = try TileBuilder.build(
            contentsOfFile: source, options: TIFFChecks.options { $0.storage = .persistent(path: store) })
        #expect(try FileManager.default.contentsOfDirectory(atPath: store).sorted() == ["manifest.json", "pyramid.tif"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder).sorted() == ["s.tiles", "source.jpg"])
        let description = try StoreDescription.read(at: store)
        #expect(description.format == "tiff" && description.levelZero == "copied" && description.quality == 74)
        #expect(description.tables == .flattened)
        #expect(description.sourceByteCount == jpeg.count)
        let reopened = try TiledImage.open(store: store)
        #expect(reopened.isLevelZeroCopied && reopened.levelCount == built.levelCount)
        #expect(try Self.allTiles(reopened) == Self.allTiles(built))
        #expect(try TiledImage.isStore(store, builtFrom: source))
        #expect(reopened.tileCoding(ofLevel: 1) == .jpeg)
    }

    @Test("lower levels are the 2x2 box shrink of the decoded image, within the default coding's loss")
    func lowerLevels() throws {
        let jpeg = try Synthetic.smoothJPEG(width: 1000, height: 600)
        let image = try TileBuilder.build(data: jpeg, options: TIFFChecks.options())
        var reference = try Reference.decode(jpeg).image
        for level in 1..<image.levelCount {
            reference = Reference.shrink(reference)
            let l = try image.level(level)
            var rows: [UInt8] = []
            try image.forEachRow(level: level) { _, row in rows.append(contentsOf: row) }
            let psnr = Reference.psnr(RGBAImage(width: l.width, height: l.height, pixels: rows), reference)
            #expect(psnr > 38, "level \(level): \(psnr) dB")
        }
    }

    /// The JPEG standard's Annex K tables (K.1 luminance, K.2 chrominance), natural order.
    static let annexK: [[Int]] = [
        [
            16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55, 14, 13, 16, 24, 40, 57, 69, 56,
            14, 17, 22, 29, 51, 87, 80, 62, 18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81, 104, 113, 92,
            49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99
        ],
        [
            17, 18, 24, 47, 99, 99, 99, 99, 18, 21, 26, 66, 99, 99, 99, 99, 24, 26, 56, 99, 99, 99, 99, 99,
            47, 66, 99, 99, 99, 99, 99, 99
        ] + Array(repeating: 99, count: 32)
    ]

    /// A table scaled to `quality` as the IJG's code scales (5000 / q under 50, else 200 - 2q percent),
    /// each entry first flattened (the geometric mean with the first entry, where it is larger) if asked.
    static func expectedTable(_ table: [Int], quality: Int, flattened: Bool) -> [UInt16] {
        let scale = quality < 50 ? 5000 / quality : 200 - 2 * quality
        let first = table[0]
        return table.map { k in
            let base = flattened && k > first ? Int((Double(k * first)).squareRoot().rounded()) : k
            return UInt16(min(max((base * scale + 50) / 100, 1), 255))
        }
    }

    @Test(
        "encoded levels are quantised with Annex K's tables, flattened by default, scaled by the quality",
        arguments: [(TIFFWriting(), true), (TIFFWriting(quality: 85, tables: .annexK), false), (TIFFWriting(quality: 40), true)])
    func quantisationTables(coding: TIFFWriting, flattened: Bool) throws {
        let jpeg = try Synthetic.jpeg(.init(width: 900, height: 700))
        let image = try TileBuilder.build(data: jpeg, options: TIFFChecks.options { $0.format = .tiff(coding) })
        let tile = try #require(try image.storedJPEGTile(level: 1, column: 0, row: 0))
        let coefficients = try JPEGCoefficients(tile)
        #expect(coefficients.components.count == 3)
        for (index, component) in coefficients.components.enumerated() {
            let expected = Self.expectedTable(Self.annexK[index == 0 ? 0 : 1], quality: coding.quality, flattened: flattened)
            #expect(component.quantisation == expected, "component \(index)")
            // Flattened or not, never coarser than Annex K's at the same quality.
            let annexK = Self.expectedTable(Self.annexK[index == 0 ? 0 : 1], quality: coding.quality, flattened: false)
            #expect(zip(component.quantisation, annexK).allSatisfy { $0 <= $1 })
        }
    }

    @Test("a stored tile read without waiting: the same bytes while the page cache holds them, nil once it does not")
    func storedTileIfCached() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = "\(folder)/s.tiles"
        let jpeg = try Synthetic.jpeg(.init(width: 700, height: 600))
        _ = try TileBuilder.build(data: jpeg, options: TIFFChecks.options { $0.storage = .persistent(path: store) })
        let image = try TiledImage.open(store: store)
        func ifCached(_ image: TiledImage) throws -> Data? {
            guard let location = try image.storedJPEGTileLocation(level: 0, column: 1, row: 1) else { return nil }
            var data = Data(count: location.byteCount)
            let read = try data.withUnsafeMutableBytes { (space) throws(TileError) -> Bool in
                try image.readStoredJPEGTileIfCached(location, into: space)
            }
            return read ? data : nil
        }
        let whole = try #require(try image.storedJPEGTile(level: 0, column: 1, row: 1))
        #expect(try image.storedJPEGTileLocation(level: 0, column: 1, row: 1)?.byteCount == whole.count)
        #expect(try ifCached(image) == whole)
        // The file's pages dropped from the page cache (written back first): the read would wait. The
        // kernel keeps a page still in another core's LRU batch (the advice drains only its own core's):
        // the advice is given again until the read says the pages are gone (CI's TSan stage once saw
        // the first advice leave the tile cached), at most 200 times.
        var dropped = false
        for _ in 0..<200 where !dropped {
            let fd = open("\(store)/pyramid.tif", O_RDONLY)
            #expect(fd >= 0 && fsync(fd) == 0 && posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0)
            close(fd)
            dropped = try ifCached(image) == nil
            if !dropped { usleep(10_000) }
        }
        #expect(dropped, "the page cache kept the tile after 200 advices")
        #expect(try image.storedJPEGTile(level: 0, column: 1, row: 1) == whole)
        #expect(try ifCached(image) == whole)
        // A raw pyramid has no stored JPEG tiles.
        let raw = try TileBuilder.build(data: jpeg)
        #expect(try raw.storedJPEGTileLocation(level: 0, column: 0, row: 0) == nil)
    }

    @Test("tiles are readable tile row by tile row while the image is built; later rows are not ready")
    func tilesDuringBuild() throws {
        let jpeg = try Synthetic.jpeg(.init(width: 600, height: 1100))
        let builder = try TileBuilder(options: TIFFChecks.options())
        try builder.append(jpeg[..<(jpeg.count / 2)])
        try builder.waitUntilWritten()
        let image = try #require(builder.image)
        #expect(builder.rowsDecoded > 272)
        #expect(image.isTileReady(level: 0, column: 0, row: 0))
        #expect(try image.storedJPEGTile(level: 0, column: 2, row: 0) != nil)
        #expect(thrownCode { try image.readTile(level: 0, column: 0, row: 4) } == .notReady)
        #expect(thrownCode { try image.storedJPEGTile(level: 0, column: 0, row: 4) } == .notReady)
        try builder.append(jpeg[(jpeg.count / 2)...])
        let done = try builder.finish()
        #expect(done.isComplete)
        #expect(try TIFFChecks.levelZeroMismatches(done, source: jpeg) == [])
    }

    @Test("a turned image whose flipped side is not whole MCUs is written upright, as the raw pyramid shows it, level 0 encoded")
    func turnedImage() throws {
        let jpeg = try Synthetic.smoothJPEG(width: 500, height: 300)
        var raw = BuildOptions()
        raw.orientation = .fixed(.rotate90)
        let shown = try TileBuilder.build(data: jpeg, options: raw)
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let image = try TileBuilder.build(
            data: jpeg,
            options: TIFFChecks.options {
                $0.orientation = .fixed(.rotate90)
                $0.storage = .persistent(path: "\(folder)/t.tiles")
            })
        #expect(!image.isLevelZeroCopied)
        #expect(image.geometry.width == 300 && image.geometry.height == 500 && image.geometry.orientation == .identity)
        for level in 0..<image.levelCount {
            let l = try image.level(level)
            var a: [UInt8] = [], b: [UInt8] = []
            try image.forEachRow(level: level) { _, row in a.append(contentsOf: row) }
            try shown.forEachRow(level: level) { _, row in b.append(contentsOf: row) }
            let psnr = Reference.psnr(RGBAImage(width: l.width, height: l.height, pixels: a), RGBAImage(width: l.width, height: l.height, pixels: b))
            #expect(psnr > 38, "level \(level): \(psnr) dB")
        }
        let description = try StoreDescription.read(at: "\(folder)/t.tiles")
        #expect(description.levelZero == "encoded" && description.levelZeroReason?.contains("turned") == true)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder) == ["t.tiles"])
    }

    @Test("raw pyramids have no stored JPEG tiles; a TIFF's tile size must be a multiple of 16")
    func rawAndTileSize() throws {
        let jpeg = try Synthetic.jpeg(.init(width: 100, height: 80))
        let raw = try TileBuilder.build(data: jpeg)
        #expect(try raw.storedJPEGTile(level: 0, column: 0, row: 0) == nil)
        #expect(raw.tileCoding(ofLevel: 0) == .rawRGBA && !raw.isLevelZeroCopied)
        #expect(thrownCode { try TileBuilder.build(data: jpeg, options: TIFFChecks.options { $0.tileSize = 40 }) } == .invalidArgument)
        #expect(
            thrownCode { try TileBuilder.build(data: jpeg, options: TIFFChecks.options { $0.format = .tiff(.init(quality: 0)) }) } == .invalidArgument
        )
    }

    @Test("the stored JPEG of a tile is the tables spliced before the tile's stream, a whole JPEG")
    func storedJPEG() throws {
        let jpeg = try Synthetic.jpeg(.init(width: 300, height: 300))
        let image = try TileBuilder.build(data: jpeg, options: TIFFChecks.options())
        for level in 0..<image.levelCount {
            let bytes = try #require(try image.storedJPEGTile(level: level, column: 0, row: 0))
            #expect(bytes.prefix(2) == Data([0xFF, 0xD8]) && bytes.suffix(2) == Data([0xFF, 0xD9]))
            let decoded = try Reference.decode(bytes).image
            #expect(decoded.width == 256 && decoded.height == 256)
            let tile = RGBAImage(width: 256, height: 256, pixels: try image.readTile(level: level, column: 0, row: 0))
            let l = try image.level(level)
            let (w, h) = (min(256, l.width), min(256, l.height))
            #expect(Reference.crop(decoded, x: 0, y: 0, width: w, height: h) == Reference.crop(tile, x: 0, y: 0, width: w, height: h))
        }
    }

    @Test(
        "an edge tile's exact JPEG is the stored tile cropped without decoding: jpegtran -crop's pixels at the edge tile's size",
        .enabled(if: Tools.have("djpeg", "jpegtran"), Comment(rawValue: Tools.missing("djpeg", "jpegtran"))),
        arguments: [
            Synthetic.Spec(width: 700, height: 500), Synthetic.Spec(width: 650, height: 530, subsampling: .s444),
            Synthetic.Spec(width: 600, height: 300, grayscale: true)
        ])
    func exactEdgeTiles(spec: Synthetic.Spec) throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // Edge tiles 188 (700 - 512) or 138 wide and 244, 18 or 44 high: crops that end inside an MCU.
        let image = try TileBuilder.build(data: try Synthetic.jpeg(spec), options: TIFFChecks.options())
        for level in 0..<image.levelCount {
            let l = try image.level(level)
            for row in 0..<l.rows {
                for column in 0..<l.columns {
                    let (w, h) = (min(256, l.width - column * 256), min(256, l.height - row * 256))
                    let stored = try #require(try image.storedJPEGTile(level: level, column: column, row: row))
                    let exact = try #require(try image.exactJPEGTile(level: level, column: column, row: row))
                    if w == 256, h == 256 {
                        #expect(exact == stored)
                        continue
                    }
                    let file = "\(folder)/tile.jpg"
                    try stored.write(to: URL(fileURLWithPath: file))
                    let reference = try TIFFChecks.djpeg(try Tools.run("jpegtran", ["-crop", "\(w)x\(h)+0+0", file]).stdout)
                    let ours = try TIFFChecks.djpeg(exact)
                    #expect(ours.width == w && ours.height == h && ours.channels == reference.channels)
                    #expect(ours.samples == reference.samples, "\(spec) level \(level) tile (\(column), \(row))")
                }
            }
        }
    }

    @Test(
        "a tile whose DC table lacks a category the crop needs is cropped with tables made for the crop: jpegtran -crop's pixels",
        .enabled(if: Tools.have("djpeg", "jpegtran"), Comment(rawValue: Tools.missing("djpeg", "jpegtran"))))
    func cropWithIncompleteTables() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // A 256x256 gray tile as another writer may pad it: each row ramps from black up to white over
        // the first 48 pixels, then slowly back to black. Its own DC differences stay small; cropped to
        // 48 wide, every row starts black right after a white block, a jump its optimised DC table has
        // no code for.
        var pixels = [UInt8](repeating: 0, count: 256 * 256)
        for y in 0..<256 {
            for x in 0..<256 { pixels[y * 256 + x] = x < 48 ? UInt8(x * 255 / 47) : UInt8((255 - x) * 255 / 208) }
        }
        var options = JPEGEncoder.Options()
        options.quality = 90
        options.optimizeCoding = true
        let tile = try JPEGEncoder.encode(pixels: pixels, width: 256, height: 256, input: .grayscale, options: options)
        let file = "\(folder)/tile.jpg"
        try tile.write(to: URL(fileURLWithPath: file))
        // The point of the test: the DC table lacks categories (read plainly from the DHT segment).
        let categories = try #require(Self.dcCategories(in: [UInt8](tile)).first)
        #expect(categories.count < 12, "\(categories.sorted())")
        for (w, h) in [(48, 256), (48, 100), (40, 8)] {
            var pointer: UnsafeMutableRawPointer?
            var length = 0
            var message = [CChar](repeating: 0, count: 256)
            let status = tile.withUnsafeBytes { bytes in
                cjs_jpeg_tile_crop(nil, 0, bytes.baseAddress, bytes.count, 256, 256, UInt32(w), UInt32(h), &pointer, &length, &message, message.count)
            }
            defer { cjs_free(pointer) }
            try #require(status == CJS_OK && pointer != nil)
            let ours = try TIFFChecks.djpeg(Data(bytes: pointer!, count: length))
            let reference = try TIFFChecks.djpeg(try Tools.run("jpegtran", ["-crop", "\(w)x\(h)+0+0", file]).stdout)
            let same = ours.samples == reference.samples  // (not the arrays in a failure's message)
            #expect(ours.width == w && ours.height == h)
            #expect(same, "\(w)x\(h)")
        }
    }

    /// The symbols of each DC Huffman table (class 0) in a JPEG's DHT segments.
    static func dcCategories(in jpeg: [UInt8]) -> [Set<UInt8>] {
        var tables: [Set<UInt8>] = []
        var i = 2
        while i + 4 <= jpeg.count, jpeg[i] == 0xFF, jpeg[i + 1] != 0xDA {
            let length = Int(jpeg[i + 2]) << 8 | Int(jpeg[i + 3])
            if jpeg[i + 1] == 0xC4 {
                var j = i + 4
                while j + 17 <= i + 2 + length {
                    let count = jpeg[(j + 1)...(j + 16)].reduce(0) { $0 + Int($1) }
                    if jpeg[j] >> 4 == 0 { tables.append(Set(jpeg[(j + 17)..<(j + 17 + count)])) }
                    j += 17 + count
                }
            }
            i += 2 + length
        }
        return tables
    }

    @Test("a CMYK source gets an encoded level 0", .enabled(if: Corpus.isPresent, Comment(rawValue: Corpus.skipMessage)))
    func cmykSource() throws {
        let path = Corpus.folder.appendingPathComponent("tree-cmyk-notransform.jpg").path
        let image = try TileBuilder.build(contentsOfFile: path, options: TIFFChecks.options())
        #expect(!image.isLevelZeroCopied)
        let raw = try TileBuilder.build(contentsOfFile: path)
        let a = RGBAImage(width: 256, height: 256, pixels: try image.readTile(level: 0, column: 0, row: 0))
        let b = RGBAImage(width: 256, height: 256, pixels: try raw.readTile(level: 0, column: 0, row: 0))
        #expect(Reference.psnr(Reference.crop(a, x: 0, y: 0, width: 256, height: 250), Reference.crop(b, x: 0, y: 0, width: 256, height: 250)) > 30)
    }
}
