public import Foundation
import TileCore

/// Inputs made here: a deterministic picture encoded with libjpeg through the shim.
public enum Inputs {
    public static func jpeg(width: Int, height: Int, seed: Int = 1) throws -> Data {
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

    public static func temporaryFolder() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("actors-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    public static var corpusFolder: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("shared/fixtures/jpeg")
    }
}

/// A sequence of chunks of some bytes.
public struct Chunks: AsyncSequence, Sendable {
    public let data: Data
    public let size: Int
    public init(data: Data, size: Int) {
        self.data = data
        self.size = size
    }
    public struct AsyncIterator: AsyncIteratorProtocol {
        public let data: Data
        public let size: Int
        public var offset = 0
        public mutating func next() async -> Data? {
            guard offset < data.count else { return nil }
            let end = Swift.min(offset + size, data.count)
            defer { offset = end }
            return data.subdata(in: offset..<end)
        }
    }
    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(data: data, size: size) }
}

/// Records events from several tasks.
public actor Recorder<Event: Sendable> {
    public init() {}
    public private(set) var events: [Event] = []
    public func record(_ event: Event) { events.append(event) }
}

/// Every regular file below `root`, as paths relative to it, sorted.
public func regularFiles(below root: String) -> [String] {
    let enumerator = FileManager.default.enumerator(atPath: root)
    var found: [String] = []
    while let path = enumerator?.nextObject() as? String {
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: "\(root)/\(path)", isDirectory: &isFolder), !isFolder.boolValue {
            found.append(path)
        }
    }
    return found.sorted()
}
