public import Foundation
public import NIOPosix
public import TileCore

/// The async owner of a `TileExporter`: exports a JPEG whose bytes arrive from any source (a file,
/// an HTTP response, an upload) as DeepZoom or IIIF tiles, its work on a thread pool (`threadPool`, NIO's
/// shared one by default), one job at a time, never on Swift's cooperative pool (decoding and file writes block).
///
/// Sources feed it with ``append(_:)`` as they feed an ``ImageBuilder``; ``finish()`` publishes.
/// A cancelled task cancels the export and removes what it wrote.
public actor ImageExporter {
    private let executor: PoolSerialExecutor
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    private let exporter: TileExporter

    /// See `TileExporter.init(name:outputDirectory:options:buildOptions:keepingStoreAt:replacingExisting:)`; `threadPool` is
    /// where the export's work runs (default NIO's shared pool).
    public init(
        name: String, outputDirectory: String, options: ExportOptions = ExportOptions(),
        buildOptions: BuildOptions = BuildOptions(), keepingStoreAt: String? = nil, replacingExisting: Bool = false,
        threadPool: NIOThreadPool = .singleton
    ) throws(TileError) {
        executor = PoolSerialExecutor(pool: threadPool)
        exporter = try TileExporter(
            name: name, outputDirectory: outputDirectory, options: options, buildOptions: buildOptions,
            keepingStoreAt: keepingStoreAt, replacingExisting: replacingExisting)
    }

    /// Tiles written so far.
    public var tilesWritten: Int { exporter.tilesWritten }
    /// Bytes received so far.
    public var bytesReceived: Int { exporter.bytesReceived }
    /// Whether the image's last byte has been decoded (later bytes are not needed).
    public var hasReachedEndOfImage: Bool { exporter.hasReachedEndOfImage }

    /// Pushes the next bytes; tiles are written as their rows decode.
    /// - Throws: `TileError`, and `TileError.Code.cancelled` when the task is cancelled (the
    ///   export is then removed).
    public func append<Bytes: ContiguousBytes & Sendable>(_ bytes: Bytes) throws(TileError) {
        if Task.isCancelled {
            exporter.cancel()
            throw TileError(.cancelled, "the task was cancelled")
        }
        try exporter.append(bytes)
    }

    /// Reads a JPEG file (`-`: standard input) chunk by chunk into the export, on the export's own
    /// queue, up to the end of its image.
    /// - Throws: `TileError.Code.io` naming the file, the export's errors, `TileError.Code.cancelled`.
    public func appendFile(at path: String, chunkSize: Int = 1 << 20) throws(TileError) {
        let file = try InputFile(path: path)
        var chunk = Data(count: max(1, chunkSize))
        while !exporter.hasReachedEndOfImage {
            chunk.count = max(1, chunkSize)
            var result: Result<Int, TileError> = .success(0)
            chunk.withUnsafeMutableBytes { raw in
                do throws(TileError) { result = .success(try file.read(into: raw)) } catch { result = .failure(error) }
            }
            let n = try result.get()
            if n == 0 { return }
            chunk.count = n
            try append(chunk)
        }
    }

    /// Decodes the rest, writes the last tiles and publishes the export.
    public func finish() throws(TileError) -> TileExporter.Result { try exporter.finish() }

    /// Stops and removes the export.
    public func cancel() { exporter.cancel() }
}
