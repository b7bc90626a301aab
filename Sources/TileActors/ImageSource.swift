public import Foundation
import TileCore

/// Somewhere the bytes of a master (JPEG, PNG, TIFF) come from: a file, a sequence of chunks, or (in TileNetwork) an HTTP
/// response. A source streams its bytes into an ``ImageBuilder`` as they come.
public protocol ImageSource: Sendable {
    /// A name for reports and errors (a file name, a URL).
    var name: String { get }
    /// Appends every byte of the image to `builder`, chunk by chunk, as they arrive (not `finish`).
    /// - Throws: `TileError` (the builder's, or the source's own, e.g. `TileError.Code.io`).
    func feed(into builder: ImageBuilder) async throws
    /// Whether the bytes arrive over a network, slowly enough that whole-image previews of a
    /// progressive JPEG are worth making (`BuildOptions.preview`'s `.automatic`). Default `false`.
    var streamsOverNetwork: Bool { get }
    /// The file the bytes are read from, when they are one file's: a TIFF master is then read from the
    /// file itself instead of a spool of its bytes (``ImageBuilder/init(options:budget:sourcePath:)``).
    /// Default `nil`.
    var filePath: String? { get }
}

extension ImageSource {
    public var streamsOverNetwork: Bool { false }
    public var filePath: String? { nil }
}

/// A master's file, read a chunk at a time (never whole).
public struct FileImageSource: ImageSource {
    public let path: String
    public let chunkSize: Int
    public var name: String { path == "-" ? "stdin" : (path as NSString).lastPathComponent }
    public var filePath: String? { path == "-" ? nil : path }

    /// - Parameters:
    ///   - path: the file; `-` for standard input.
    ///   - chunkSize: bytes per read, default 1 MiB.
    public init(path: String, chunkSize: Int = 1 << 20) {
        self.path = path
        self.chunkSize = max(1, chunkSize)
    }

    /// Reads the file chunk by chunk into `builder`, up to the end of the image. The opening and every
    /// read run on the blocking threads (``BlockingWork``), never on Swift's cooperative pool: standard
    /// input or a FIFO may wait for its writer.
    /// - Throws: `TileError.Code.io` naming the file and the cause, and the builder's errors.
    public func feed(into builder: ImageBuilder) async throws {
        let path = self.path
        let file = try await BlockingWork.run { FeedFile(try InputFile(path: path)) }
        await builder.setExpectedBytes(file.byteCount)
        let size = chunkSize
        while true {
            try Task.checkCancellation()
            let chunk = try await BlockingWork.run { try file.next(size) }
            if chunk.isEmpty { return }
            try await builder.append(chunk)
            if await builder.hasReachedEndOfImage { return }
        }
    }
}

/// The file a ``FileImageSource`` feeds from, handed to the blocking threads one read at a time (the
/// feed awaits each read before the next: never two at once).
private final class FeedFile: @unchecked Sendable {
    private let input: InputFile
    let byteCount: Int?

    init(_ input: InputFile) { (self.input, byteCount) = (input, input.byteCount) }

    /// The next bytes, at most `size`; empty at the end.
    func next(_ size: Int) throws -> Data {
        var chunk = Data(count: size)
        let n = try chunk.withUnsafeMutableBytes { raw throws(TileError) in try input.read(into: raw) }
        chunk.count = n
        return chunk
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
        for try await chunk in chunks {
            try await builder.append(chunk)
            if await builder.hasReachedEndOfImage { return }
        }
    }
}
