public import Foundation

extension TileBuilder {
    /// Builds a pyramid from a file, streamed `chunkSize` bytes at a time (never read whole), up to the
    /// end-of-image marker.
    /// - Parameters:
    ///   - path: the JPEG file; `-` reads standard input.
    ///   - options: see ``BuildOptions``.
    ///   - chunkSize: bytes per read, default 1 MiB.
    /// - Throws: ``TileError/Code/io`` naming the path when it cannot be read, and what
    ///   ``append(_:)-(UnsafeRawBufferPointer)`` and ``finish()`` throw.
    public static func build(
        contentsOfFile path: String, options: BuildOptions = BuildOptions(), chunkSize: Int = 1 << 20
    ) throws(TileError) -> TiledImage {
        let file = try InputFile(path: path)
        let builder = try TileBuilder(options: options)
        if path != "-" { builder.sourcePath = path }  // a TIFF is read from its file, not a spool
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(chunkSize, 1), alignment: 16)
        defer { buffer.deallocate() }
        // Bytes after the end-of-image marker are never read: the pyramid is complete there.
        while !builder.isComplete {
            let n: Int
            do { n = try file.read(into: buffer) } catch {
                builder.cancel()
                throw error
            }
            if n == 0 { break }
            try builder.append(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
        }
        return try builder.finish()
    }

    /// Builds a pyramid from bytes in memory (`Data`, `[UInt8]`, ...), fed in one piece.
    public static func build<Bytes: ContiguousBytes>(data: Bytes, options: BuildOptions = BuildOptions())
        throws(TileError) -> TiledImage
    {
        let builder = try TileBuilder(options: options)
        try builder.append(data)
        return try builder.finish()
    }
}
