import Foundation
import TileCore

/// Inputs made here: a deterministic picture encoded with libjpeg through the shim.
enum Inputs {
    static func jpeg(width: Int, height: Int, seed: Int = 1) throws -> Data {
        var pixels = [UInt8](repeating: 255, count: width * height * 4)
        for y in 0..<height {
            for x in 0..<width {
                let i = (y * width + x) * 4
                pixels[i] = UInt8((x * 7 + seed * 31) & 255)
                pixels[i + 1] = UInt8((y * 5 + (x ^ y)) & 255)
                pixels[i + 2] = UInt8(((x + y) * 3 + seed) & 255)
            }
        }
        return try JPEGEncoder.encode(pixels: pixels, width: width, height: height)
    }

    static func temporaryFolder() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("actors-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    static var corpusFolder: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("shared/fixtures/jpeg")
    }
}

extension TiledImage {
    func allTiles() throws -> [[UInt8]] {
        var tiles: [[UInt8]] = []
        for level in 0..<levelCount {
            for row in 0..<self.geometry.levels[level].rows {
                for column in 0..<self.geometry.levels[level].columns {
                    tiles.append(try readTile(level: level, column: column, row: row))
                }
            }
        }
        return tiles
    }
}

/// A sequence of chunks of some bytes.
struct Chunks: AsyncSequence, Sendable {
    let data: Data
    let size: Int
    struct AsyncIterator: AsyncIteratorProtocol {
        let data: Data
        let size: Int
        var offset = 0
        mutating func next() async -> Data? {
            guard offset < data.count else { return nil }
            let end = Swift.min(offset + size, data.count)
            defer { offset = end }
            return data.subdata(in: offset..<end)
        }
    }
    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(data: data, size: size) }
}

/// Records events from several tasks.
actor Recorder<Event: Sendable> {
    private(set) var events: [Event] = []
    func record(_ event: Event) { events.append(event) }
}
