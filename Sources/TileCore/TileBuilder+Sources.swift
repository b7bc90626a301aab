public import Foundation

extension TileBuilder {
    /// Builds a pyramid from a file, streamed `chunkSize` bytes at a time (never read whole).
    /// - Parameters:
    ///   - path: the JPEG file.
    ///   - options: see ``BuildOptions``.
    ///   - chunkSize: bytes per read, default 1 MiB.
    /// - Throws: ``TileError/Code/io`` naming the path when it cannot be read, and what
    ///   ``append(_:)-(UnsafeRawBufferPointer)`` and ``finish()`` throw.
    public static func build(
        contentsOfFile path: String, options: BuildOptions = BuildOptions(), chunkSize: Int = 1 << 20
    ) throws(TileError) -> TiledImage {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw SystemCall.error("cannot open", path: path) }
        defer { close(fd) }
        let builder = try TileBuilder(options: options)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(chunkSize, 1), alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let n = SystemCall.retrying { read(fd, buffer.baseAddress!, buffer.count) }
            if n < 0 {
                let error = SystemCall.error("cannot read", path: path)
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
