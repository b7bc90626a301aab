import Foundation
import Testing
import TestSupport
@testable import TileCore

/// A TIFF pyramid's directories read from parts of its bytes (what a store in a bucket is read by):
/// the parts asked for are the file's, and every tile located so equals the tile read from the file.
@Suite("TIFF directories read from parts of the file")
struct TIFFPyramidIndexTests {
    /// The bytes of `file` in blocks of `block`: each asked-for range's blocks added, those that touch
    /// kept as one part (written plainly: a set of block numbers, runs of consecutive ones).
    struct Parts {
        let file: [UInt8]
        let block: Int
        var blocks: Set<Int> = []

        var parts: [(offset: Int, bytes: [UInt8])] {
            var out: [(offset: Int, bytes: [UInt8])] = []
            for number in blocks.sorted() {
                let range = (number * block)..<min(file.count, (number + 1) * block)
                if let last = out.last, last.offset + last.bytes.count == range.lowerBound {
                    out[out.count - 1].bytes += file[range]
                } else {
                    out.append((range.lowerBound, Array(file[range])))
                }
            }
            return out
        }

        /// Adds the blocks of `range`; false when it held them all already.
        mutating func add(_ range: Range<Int>) -> Bool {
            let before = blocks.count
            for number in (range.lowerBound / block)...((range.upperBound - 1) / block) { blocks.insert(number) }
            return blocks.count > before
        }
    }

    static func store(width: Int, height: Int) throws -> (folder: String, tiff: String) {
        let folder = NSTemporaryDirectory() + "tiff-index-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let jpeg = try Synthetic.jpeg(.init(width: width, height: height))
        try jpeg.write(to: URL(fileURLWithPath: "\(folder)/source.jpg"))
        _ = try TileBuilder.build(
            contentsOfFile: "\(folder)/source.jpg", options: TIFFChecks.options { $0.storage = .persistent(path: "\(folder)/s.tiles") })
        return (folder, "\(folder)/s.tiles/pyramid.tif")
    }

    @Test("read by the ranges it asks for (4 KiB and 64 KiB blocks): the file's geometry, every tile's bytes as the file gives them")
    func byRanges() throws {
        let (folder, tiff) = try Self.store(width: 2500, height: 1700)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let file = [UInt8](try Data(contentsOf: URL(fileURLWithPath: tiff)))
        let image = try TiledImage.open(tiff: tiff)
        for block in [4096, 65_536] {
            var held = Parts(file: file, block: block)
            var index: TIFFPyramidIndex?
            var asked: [Range<Int>] = []
            while index == nil, asked.count < 1000 {
                switch try TIFFPyramidIndex.open(parts: held.parts, byteCount: file.count, name: "s.tiles") {
                case .index(let found): index = found
                case .needs(let range):
                    #expect(!range.isEmpty && range.upperBound <= file.count, "asked for \(range) of \(file.count) bytes")
                    let added = held.add(range)
                    #expect(added, "asked again for \(range), held")
                    asked.append(range)
                }
            }
            let found = try #require(index, "no index after \(asked.count) ranges")
            #expect(found.geometry == image.geometry)
            // Far less than the file is read for its directories (its tiles are most of it).
            let read = held.blocks.count * block
            #expect(read * 4 < file.count, "\(read) of \(file.count) bytes read in \(asked.count) ranges")
            for level in 0..<image.levelCount {
                let l = image.geometry.levels[level]
                for row in 0..<l.rows {
                    for column in 0..<l.columns {
                        let range = try found.tileRange(level: level, column: column, row: row)
                        let made = try found.completeJPEG(level: level, column: column, row: row, stored: Array(file[range]))
                        #expect(Data(made) == (try image.storedJPEGTile(level: level, column: column, row: row)), "tile \(level)/\(column)/\(row)")
                    }
                }
            }
            // The JPEGs made, decoded by libjpeg on their own (the reference decoder), are the tiles'
            // pixels as the store reads them (its tables and tile given to libjpeg apart).
            for (level, column, row) in [(0, 0, 0), (0, 9, 6), (1, 2, 1), (image.levelCount - 1, 0, 0)] {
                let range = try found.tileRange(level: level, column: column, row: row)
                let made = try found.completeJPEG(level: level, column: column, row: row, stored: Array(file[range]))
                let decoded = try Reference.decode(Data(made)).image
                let (width, height) = image.geometry.pixelSize(level: level, column: column, row: row)
                let tile = try image.readTile(level: level, column: column, row: row)
                let size = image.geometry.tileSize
                #expect(decoded.width == size && decoded.height == size)
                var differing = 0
                for y in 0..<height {
                    for x in 0..<width
                    where decoded.pixels[(y * size + x) * 4..<(y * size + x) * 4 + 3] != tile[(y * size + x) * 4..<(y * size + x) * 4 + 3] {
                        differing += 1
                    }
                }
                #expect(differing == 0, "tile \(level)/\(column)/\(row): \(differing) pixels differ")
            }
            #expect(found.isJPEG(level: 0) && !found.isJPEG(level: image.levelCount))
            #expect(throws: TileError.self) { try found.tileRange(level: 0, column: image.geometry.levels[0].columns, row: 0) }
            #expect(throws: TileError.self) { try found.tileRange(level: image.levelCount, column: 0, row: 0) }
        }
    }

    @Test("the whole file as one part: the index at once; bytes that are no TIFF: refused as not a store")
    func wholeAndForeign() throws {
        let (folder, tiff) = try Self.store(width: 700, height: 500)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let file = [UInt8](try Data(contentsOf: URL(fileURLWithPath: tiff)))
        guard case .index(let index) = try TIFFPyramidIndex.open(parts: [(0, file)], byteCount: file.count, name: "s") else {
            Issue.record("the whole file asked for more")
            return
        }
        #expect(index.geometry == (try TiledImage.open(tiff: tiff)).geometry)
        let jpeg = [UInt8](try Synthetic.jpeg(.init(width: 64, height: 64)))
        do {
            _ = try TIFFPyramidIndex.open(parts: [(0, jpeg)], byteCount: jpeg.count, name: "s")
            Issue.record("a JPEG was read as a TIFF")
        } catch {
            #expect(error.code == .invalidStore, "\(error)")
        }
        // Nothing held: the header is asked for first.
        guard case .needs(let range) = try TIFFPyramidIndex.open(parts: [], byteCount: file.count, name: "s") else {
            Issue.record("no bytes gave an index")
            return
        }
        #expect(range.lowerBound == 0 && !range.isEmpty)
    }
}
