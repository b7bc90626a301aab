public import Foundation
import TileCore

/// Somewhere the bytes of a JPEG come from: a file, a sequence of chunks, or (in TileNetwork) an HTTP
/// response. A source streams its bytes into an ``ImageBuilder`` as they come.
public protocol ImageSource: Sendable {
    /// A name for reports and errors (a file name, a URL).
    var name: String { get }
    /// Appends every byte of the image to `builder`, chunk by chunk, as they arrive (not `finish`).
    /// - Throws: ``TileError`` (the builder's, or the source's own, e.g. ``TileError/Code/io``).
    func feed(into builder: ImageBuilder) async throws
}

/// A JPEG file, read a chunk at a time (never whole).
public struct FileImageSource: ImageSource {
    public let path: String
    public let chunkSize: Int
    public var name: String { (path as NSString).lastPathComponent }

    /// - Parameters:
    ///   - path: the file.
    ///   - chunkSize: bytes per read, default 1 MiB.
    public init(path: String, chunkSize: Int = 1 << 20) {
        self.path = path
        self.chunkSize = max(1, chunkSize)
    }

    public func feed(into builder: ImageBuilder) async throws {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw TileError(.io, "cannot open \(path)", errno: ENOENT)
        }
        defer { try? handle.close() }
        let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? nil
        await builder.setExpectedBytes(size)
        while true {
            try Task.checkCancellation()
            let chunk: Data
            do { chunk = try handle.read(upToCount: chunkSize) ?? Data() } catch {
                throw TileError(.io, "cannot read \(path): \(error)")
            }
            if chunk.isEmpty { return }
            try await builder.append(chunk)
        }
    }
}

/// Any asynchronous sequence of byte chunks (`Data`, `[UInt8]`, ...).
public struct ChunkSequenceSource<Chunks: AsyncSequence & Sendable>: ImageSource
where Chunks.Element: ContiguousBytes & Sendable {
    public let name: String
    public let chunks: Chunks

    public init(name: String, chunks: Chunks) {
        self.name = name
        self.chunks = chunks
    }

    public func feed(into builder: ImageBuilder) async throws {
        for try await chunk in chunks { try await builder.append(chunk) }
    }
}
