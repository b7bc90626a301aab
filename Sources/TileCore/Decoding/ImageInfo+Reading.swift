public import Foundation

extension ImageInfo {
    /// Reads the header of an in-memory master (JPEG, PNG, TIFF or JPEG 2000, told from its first bytes).
    /// - Throws: ``TileError/Code/corrupt`` when there is no frame header before the first scan (a
    ///   JPEG) or the header cannot be read, ``TileError/Code/truncated`` when the bytes end inside the
    ///   header, ``TileError/Code/unsupported`` for a PNG or TIFF this package does not read.
    public static func read(data: some ContiguousBytes) throws(TileError) -> ImageInfo {
        if data.withUnsafeBytes({ $0.isEmpty }) { throw TileError(.truncated, "empty input") }
        if let refusal = data.withUnsafeBytes({ ImageFormat.refusal(ofFirst: $0) }) { throw refusal }
        let format = data.withUnsafeBytes { ImageFormat(sniffing: $0) }
        if format != .jpeg {
            var failure: TileError?
            let info = data.withUnsafeBytes { bytes -> ImageInfo? in
                do throws(TileError) {
                    // A JPEG 2000's header is read in memory: no spool file, no system call.
                    if format == .jpeg2000 { return try JPEG2000Decoder.info(bytes: bytes) }
                    return try readOther(format, bytes: bytes, path: nil)
                } catch {
                    failure = error
                    return nil
                }
            }
            guard let info else { throw failure ?? TileError(.corrupt, "the header cannot be read") }
            return info
        }
        let segments = data.withUnsafeBytes { HeaderSegments.parse($0) }
        if !segments.reachedScan && segments.problem == nil && segments.frame == nil {
            throw TileError(.truncated, "the data ends inside the JPEG header")
        }
        return try ImageInfo(segments: segments)
    }

    /// A PNG's, TIFF's or JPEG 2000's header from `bytes` (the whole file), or from the file at `path`
    /// (a TIFF or JPEG 2000 read directly; `bytes` are then its first bytes only).
    private static func readOther(_ format: ImageFormat, bytes: UnsafeRawBufferPointer, path: String?) throws(TileError)
        -> ImageInfo
    {
        let decoder = try format.masterDecoder(path: path, spoolDirectory: LevelFiles.defaultDirectory)
        if path == nil {
            try decoder.feed(bytes)
            try decoder.endInput()
        }
        guard case .other(let info)? = try decoder.readSourceHeader() else {
            throw TileError(.truncated, "the data ends inside the \(format.rawValue.uppercased()) header")
        }
        return info
    }

    /// Reads the directory of page `page` (0 the first) of the TIFF at `path` (a regular file).
    /// - Throws: ``TileError/Code/invalidArgument`` for a path that is not a regular file; else as
    ///   ``read(contentsOfFile:)`` (a page past the last is ``TileError/Code/corrupt`` or
    ///   ``TileError/Code/unsupported``, as the TIFF decoder says).
    public static func read(tiffPage page: Int, ofFile path: String) throws(TileError) -> ImageInfo {
        let decoder = try ImageFormat.tiff.masterDecoder(path: path, spoolDirectory: LevelFiles.defaultDirectory, page: page)
        guard case .other(let info)? = try decoder.readSourceHeader() else {
            throw TileError(.truncated, "the data ends inside the TIFF header")
        }
        return info
    }

    /// Every page's stored size and orientation of the TIFF at `path` (a regular file), in order: one
    /// walk of its directories, as the header's read counts its pages (``TIFFDetails/pageCount``, at
    /// most 4,096). Blocking.
    /// - Throws: as ``read(tiffPage:ofFile:)`` for page 0.
    package static func tiffPageSizes(ofFile path: String) throws(TileError) -> [(width: Int, height: Int, orientation: ImageOrientation)] {
        let decoder = try TIFFDecoder(path: path, spoolDirectory: LevelFiles.defaultDirectory)
        guard case .other? = try decoder.readSourceHeader() else { throw TileError(.truncated, "the data ends inside the TIFF header") }
        return decoder.pageSizes()
    }

    /// Reads the header of a JPEG file, 64 KiB at a time until the first SOS.
    /// - Parameter path: the file; `-` reads standard input.
    /// - Returns: the info; ``headerByteCount`` tells how far the header went.
    /// - Throws: ``TileError/Code/io`` when the file cannot be read (naming the cause),
    ///   ``TileError/Code/truncated`` for an empty file or one that ends inside the header, else as
    ///   ``read(data:)``.
    public static func read(contentsOfFile path: String) throws(TileError) -> ImageInfo {
        try read(contentsOfFile: path, bytesRead: nil)
    }

    /// As ``read(contentsOfFile:)``, counting the bytes read from the file in `bytesRead`.
    public static func read(contentsOfFile path: String, bytesRead: UnsafeMutablePointer<Int>?) throws(TileError)
        -> ImageInfo
    {
        let file = try InputFile(path: path)
        return try read(file, bytesRead: bytesRead)
    }

    /// As ``read(contentsOfFile:)`` for a regular file only: opened without following a final symlink
    /// and without blocking (a FIFO or a device planted at the path fails at once, never waits for a
    /// writer). For servers, which must not wait on what appears in a folder.
    /// - Throws: as ``read(contentsOfFile:)``; ``TileError/Code/invalidStore`` for what is not a
    ///   regular file.
    public static func read(regularFile path: String) throws(TileError) -> ImageInfo {
        try read(try InputFile(regularFile: path))
    }

    /// Reads the header from `file`'s current position, 64 KiB at a time until the first SOS; each byte
    /// is walked once (a header of 1,200 ICC chunks reads as fast as its bytes arrive). A PNG is read
    /// up to its first IDAT; a TIFF's directory and a JPEG 2000's header are read from the file itself
    /// (from a spool of the input when it is not a regular file).
    static func read(_ file: InputFile, bytesRead: UnsafeMutablePointer<Int>? = nil) throws(TileError) -> ImageInfo {
        var reader = HeaderReader()
        let chunk = 64 * 1024
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
        defer { buffer.deallocate() }
        var total = 0
        var other: (any RowDecoder)?
        while !reader.segments.isFinished {
            let n = try file.read(into: buffer)
            let bytes = UnsafeRawBufferPointer(rebasing: buffer[0..<n])
            if total == 0, let refusal = ImageFormat.refusal(ofFirst: bytes) { throw TileError(refusal.code, "\(file.name): \(refusal.message)") }
            if total == 0, n > 0, case let format = ImageFormat(sniffing: bytes), format != .jpeg {
                do throws(TileError) {
                    let path = file.isRegularFile && file.name != "stdin" ? file.name : nil
                    other = try format.masterDecoder(path: path, spoolDirectory: LevelFiles.defaultDirectory)
                } catch { throw TileError(error.code, "\(file.name): \(error.message)") }
            }
            if let decoder = other {
                total += n
                bytesRead?.pointee = total
                do throws(TileError) {
                    if n == 0 { try decoder.endInput() } else { try decoder.feed(bytes) }
                    if case .other(let info)? = try decoder.readSourceHeader() { return info }
                } catch { throw TileError(error.code, "\(file.name): \(error.message)") }
                if n == 0 { throw TileError(.truncated, "\(file.name): the file ends inside its header") }
                continue
            }
            total += n
            bytesRead?.pointee = total
            if n == 0 {
                reader.endOfInput()
                if reader.segments.problem == nil || total < 2 {
                    if total == 0 { throw TileError(.truncated, "\(file.name): empty input") }
                    throw TileError(.truncated, "\(file.name): the file ends inside the JPEG header")
                }
                break
            }
            reader.feed(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
        }
        do throws(TileError) { return try ImageInfo(segments: reader.segments) } catch {
            throw TileError(error.code, "\(file.name): \(error.message)")
        }
    }
}
