import Foundation
import Testing
import TestTraits
import TestSupport
import TileCore

@Suite("Pyramids of generated JPEGs", .ownThreads)
struct GeneratedInputTests {
    static let specs: [Synthetic.Spec] = [
        .init(width: 1, height: 1),
        .init(width: 300, height: 200, subsampling: .s444),
        .init(width: 301, height: 199, subsampling: .s422),
        .init(width: 517, height: 263, subsampling: .s420),
        .init(width: 260, height: 520, grayscale: true),
        .init(width: 333, height: 277, progressive: true),
        .init(width: 270, height: 300, subsampling: .s422, progressive: true, restartRows: 1),
        .init(width: 257, height: 255, restartRows: 2),
        .init(width: 13, height: 1000, subsampling: .s444),
        .init(width: 1000, height: 7, grayscale: true)
    ]

    @Test("level 0 equals libjpeg's ordinary whole-image decode, byte for byte", arguments: specs)
    func levelZeroMatchesReferenceDecode(spec: Synthetic.Spec) throws {
        let data = try Synthetic.jpeg(spec)
        let reference = try Reference.decode(data).image
        var options = BuildOptions()
        options.orientation = .none
        let image = try TileBuilder.build(data: data, options: options)
        #expect(try image.level(0).width == spec.width && image.level(0).height == spec.height)
        #expect(try image.pixels(level: 0) == reference)
    }

    @Test("every lower level equals a plain 2x2 box filter of the level above", arguments: specs)
    func lowerLevelsMatchBoxFilter(spec: Synthetic.Spec) throws {
        let data = try Synthetic.jpeg(spec)
        var expected = try Reference.decode(data).image
        var options = BuildOptions()
        options.levels = .count(20)
        let image = try TileBuilder.build(data: data, options: options)
        for level in 1..<image.levelCount {
            expected = Reference.shrink(expected)
            #expect(try image.pixels(level: level) == expected, "level \(level)")
        }
        let last = try image.level(image.levelCount - 1)
        #expect(last.width == 1 && last.height == 1)
    }

    @Test("padding beyond the image's right and bottom edges is zero, alpha included")
    func paddingIsZero() throws {
        let data = try Synthetic.jpeg(.init(width: 300, height: 270))
        let image = try TileBuilder.build(data: data)
        let tile = try image.readTile(level: 0, column: 1, row: 1)
        // Tile (1, 1) covers x 256..<512, y 256..<512; the image ends at x 300, y 270.
        for y in 0..<256 {
            for x in 0..<256 {
                let alpha = tile[(y * 256 + x) * 4 + 3]
                let inside = 256 + x < 300 && 256 + y < 270
                if inside {
                    #expect(alpha == 255)
                } else if alpha != 0 || tile[(y * 256 + x) * 4] != 0 {
                    Issue.record("padding pixel (\(x), \(y)) is not zero")
                    return
                }
            }
        }
    }

    @Test("chunks of 1 byte, 7 bytes, 64 KiB and all at once give identical tiles")
    func chunkSizesGiveIdenticalTiles() throws {
        for spec in [Synthetic.Spec(width: 700, height: 530), .init(width: 390, height: 410, progressive: true)] {
            let data = try Synthetic.jpeg(spec)
            let whole = try Synthetic.build(data, chunk: data.count).allTiles()
            for chunk in [1, 7, 65536] {
                #expect(try Synthetic.build(data, chunk: chunk).allTiles() == whole, "\(spec) in chunks of \(chunk)")
            }
        }
    }

    @Test("the compressed bytes held stay bounded by the chunk size, not the file size")
    func compressedBufferStaysBounded() throws {
        let data = try Synthetic.jpeg(.init(width: 1600, height: 1200, subsampling: .s444, quality: 97))
        let builder = try TileBuilder()
        var largest = 0
        let chunk = 16 * 1024
        for offset in stride(from: 0, to: data.count, by: chunk) {
            try builder.append(data[offset..<min(offset + chunk, data.count)])
            largest = max(largest, builder.bytesBuffered)
        }
        _ = try builder.finish()
        #expect(data.count > 8 * chunk)
        #expect(largest <= 2 * chunk, "held \(largest) bytes of a \(data.count)-byte file")
    }

    static let writerConfigurations: [(String, @Sendable (inout BuildOptions) -> Void)] = [
        ("window", { $0.writer = .window }),
        ("bands on the caller, buffered", { $0.writer = .bands(.init(threading: .onCaller, bypassesPageCache: false)) }),
        ("bands on a worker", { $0.writer = .bands(.init(threading: .onWorker)) }),
        ("bands writing behind, buffered", { $0.writer = .bands(.init(bypassesPageCache: false)) }),
        ("bands of whole tiles", { $0.writer = .bands(.init(rowsPerBlock: $0.tileSize)) })
    ]

    @Test("the window writer and the band writer (on the caller or a worker, direct or buffered) give identical files")
    func writersAgree() throws {
        for spec in [Synthetic.Spec(width: 777, height: 555), .init(width: 513, height: 260, grayscale: true)] {
            let data = try Synthetic.jpeg(spec)
            let defaults = try TileBuilder.build(data: data).allTiles()
            for (name, configure) in Self.writerConfigurations {
                var options = BuildOptions()
                configure(&options)
                #expect(try TileBuilder.build(data: data, options: options).allTiles() == defaults, "\(spec): \(name)")
            }
        }
    }

    @Test(
        "tile sizes whose blocks are not 64-row bands, and images placed against the bottom-right edge, write every level right",
        arguments: [32, 100, 128, 256])
    func bandWriterAcrossTileSizes(tileSize: Int) throws {
        // 100 px tiles have blocks O_DIRECT refuses (not 4096-aligned), so the writer falls back to
        // the page cache; 128 px tiles are two bands a tile row; orientation 3 places the image
        // against the right and bottom edges, so bands start and end inside tiles.
        let data = try Synthetic.jpeg(.init(width: 613, height: 389))
        let stored = try Reference.decode(data).image
        for (name, configure) in [("defaults", { @Sendable (_: inout BuildOptions) in })] + Self.writerConfigurations {
            for orientation in [ImageOrientation.identity, .rotate180] {
                var options = BuildOptions()
                options.tileSize = tileSize
                options.orientation = .fixed(orientation)
                configure(&options)
                let image = try TileBuilder.build(data: data, options: options)
                // Lower levels are box filters of the stored image, then oriented (the stated rule).
                var shrunk = stored
                for level in 0..<image.levelCount {
                    if level > 0 { shrunk = Reference.shrink(shrunk) }
                    let expected = Reference.orient(shrunk, orientation.rawValue)
                    #expect(try image.pixels(level: level) == expected, "\(name), tile \(tileSize), \(orientation), level \(level)")
                }
                let l = try image.level(0)
                let corner = try image.readTile(level: 0, column: l.columns - 1, row: l.rows - 1)
                let inside = (l.width - (l.columns - 1) * tileSize, l.height - (l.rows - 1) * tileSize)
                #expect(
                    corner.enumerated().allSatisfy { index, byte in
                        let pixel = index / 4
                        return pixel % tileSize < inside.0 && pixel / tileSize < inside.1 || byte == 0
                    }, "\(name), tile \(tileSize), \(orientation): padding not zero")
            }
        }
    }

    @Test("a write block that does not divide the tile size is refused before anything is written")
    func rowsPerBlockMustDivideTheTileSize() throws {
        let data = try Synthetic.jpeg(.init(width: 300, height: 200))
        for rows in [0, 48, 257] {
            var options = BuildOptions()
            options.writer = .bands(.init(rowsPerBlock: rows))
            #expect(thrownCode { try TileBuilder.build(data: data, options: options) } == .invalidArgument, "\(rows)")
        }
    }

    @Test("tiles become readable tile row by tile row while bytes are still arriving")
    func tilesReadableDuringBuild() throws {
        let data = try Synthetic.jpeg(.init(width: 600, height: 800))
        let reference = try Reference.decode(data).image
        let builder = try TileBuilder()
        try builder.append(data[0..<(data.count * 2 / 3)])
        try builder.waitUntilWritten()
        let image = try #require(builder.image)
        #expect(image.isTileReady(level: 0, column: 0, row: 0))
        #expect(!image.isTileReady(level: 0, column: 0, row: 3))
        #expect(thrownCode { try image.readTile(level: 0, column: 0, row: 3) } == .notReady)
        let early = try image.readTile(level: 0, column: 1, row: 0)
        for x in [0, 100, 255] where 256 + x < 600 {
            let p = (x * 4)
            #expect(Array(early[p..<(p + 4)]) == Array(reference[256 + x, 0]))
        }
        #expect(!image.isComplete)
        try builder.append(data[(data.count * 2 / 3)...])
        _ = try builder.finish()
        #expect(image.isComplete)
    }
}
