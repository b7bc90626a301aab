public import Foundation
import NIOConcurrencyHelpers
package import NIOPosix
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
    /// Where a regular file is read (``init(regularFile:readingOn:chunkSize:)``); nil: a thread of the feed's own.
    private let pool: NIOThreadPool?
    public var name: String { path == "-" ? "stdin" : (path as NSString).lastPathComponent }
    public var filePath: String? { path == "-" ? nil : path }

    /// - Parameters:
    ///   - path: the file; `-` for standard input.
    ///   - chunkSize: bytes per read, default 1 MiB.
    public init(path: String, chunkSize: Int = 1 << 20) {
        self.path = path
        self.chunkSize = max(1, chunkSize)
        pool = nil
    }

    /// A regular file only (a FIFO or device planted at the path is refused, never waited on), read
    /// on `pool` a chunk at a time: what a server reads the masters of its folder with.
    package init(regularFile path: String, readingOn pool: NIOThreadPool, chunkSize: Int = 1 << 20) {
        self.path = path
        self.chunkSize = max(1, chunkSize)
        self.pool = pool
    }

    /// Reads the file chunk by chunk into `builder`, up to the end of the image. The file is opened and
    /// read on a thread of the feed's own, one chunk ahead, never on Swift's cooperative pool nor on a
    /// shared pool: standard input or a FIFO may wait for its writer for as long as it likes. A source
    /// made with ``init(regularFile:readingOn:chunkSize:)`` reads on its pool instead (a regular file
    /// only: nothing there waits for a writer).
    /// - Throws: `TileError.Code.io` naming the file and the cause, and the builder's errors.
    public func feed(into builder: ImageBuilder) async throws {
        if let pool { return try await feed(into: builder, readingOn: pool) }
        let reader = FeedReader(path: path, chunkSize: chunkSize)
        defer { reader.stop() }
        var parts = reader.parts.makeAsyncIterator()
        guard case .opened(let byteCount)? = try await parts.next() else { return try Task.checkCancellation() }
        await builder.setExpectedBytes(byteCount)
        while true {
            try Task.checkCancellation()
            reader.readNext()
            guard case .chunk(let chunk)? = try await parts.next() else { return try Task.checkCancellation() }
            try await builder.append(chunk)
            if await builder.hasReachedEndOfImage { return }
        }
    }
}

extension FileImageSource {
    /// Reads a regular file on `pool`, one chunk at a time (each read awaited before the next).
    private func feed(into builder: ImageBuilder, readingOn pool: NIOThreadPool) async throws {
        let (path, chunkSize) = (path, chunkSize)
        let file = try await pool.blocking { () throws(TileError) in try PoolReadFile(path: path) }
        await builder.setExpectedBytes(file.byteCount)
        while true {
            try Task.checkCancellation()
            let chunk = try await pool.blocking { () throws(TileError) in try file.next(chunkSize) }
            if chunk.isEmpty { return }
            try await builder.append(chunk)
            if await builder.hasReachedEndOfImage { return }
        }
    }
}

/// A regular file read a chunk at a time on a thread pool by one task.
///
/// @unchecked Sendable: the file is only touched inside `next(_:)`, which its one task calls on the
/// pool one call at a time.
private final class PoolReadFile: @unchecked Sendable {
    private let file: InputFile
    let byteCount: Int?

    init(path: String) throws(TileError) {
        file = try InputFile(regularFile: path)
        byteCount = file.byteCount
    }

    /// The next chunk of at most `size` bytes; empty at the end.
    func next(_ size: Int) throws(TileError) -> Data {
        var chunk = Data(count: size)
        let count = chunk.withUnsafeMutableBytes { raw in Result { () throws(TileError) in try file.read(into: raw) } }
        chunk.count = try count.get()
        return chunk
    }
}

/// A ``FileImageSource``'s file, opened and read on a thread of its own, a chunk at a time as the feed
/// asks (``readNext()``). The thread owns the file; it ends at the end of the file, at an error, or
/// once stopped (after the read in progress, which for a FIFO lasts until its writer writes or closes).
private final class FeedReader: Sendable {
    enum Part: Sendable {
        case opened(byteCount: Int?)
        case chunk(Data)
    }

    let parts: AsyncThrowingStream<Part, any Error>
    private let demand = DispatchSemaphore(value: 0)
    private let stopped = NIOLockedValueBox(false)

    init(path: String, chunkSize: Int) {
        let (parts, continuation) = AsyncThrowingStream.makeStream(of: Part.self)
        self.parts = parts
        let thread = Thread { [demand, stopped] in
            do throws(TileError) {
                let file = try InputFile(path: path)
                continuation.yield(.opened(byteCount: file.byteCount))
                while true {
                    demand.wait()
                    if stopped.withLockedValue({ $0 }) { break }
                    var chunk = Data(count: chunkSize)
                    let count = try chunk.withUnsafeMutableBytes { raw in Result { () throws(TileError) in try file.read(into: raw) } }.get()
                    if count == 0 { break }
                    chunk.count = count
                    continuation.yield(.chunk(chunk))
                }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        thread.name = "TiledImageKit.read"
        thread.start()
    }

    /// Lets the thread read the next chunk.
    func readNext() { demand.signal() }

    /// Ends the thread after the read in progress.
    func stop() {
        stopped.withLockedValue { $0 = true }
        demand.signal()
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
