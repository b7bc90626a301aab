internal import CJpegShim
#if canImport(Glibc)
import Glibc
#endif

/// Where the tiles of a TIFF pyramid come from, and how each is decoded: a TIFF file read once
/// through libtiff (``TIFFFileReader``), or the TIFF being built (its writer knows where each tile
/// written so far is).
///
/// `@unchecked Sendable`: everything here is immutable after init, the C reader's and writer's
/// lookups are thread-safe (a lock in C), tiles are read with `pread`, and a non-JPEG tile is decoded
/// under its directory's lock in C.
final class TIFFSource: @unchecked Sendable {
    /// One level of the pyramid: which directory of the file holds it, and its coding.
    struct Level: Sendable {
        var directory: UInt32
        var width: Int
        var height: Int
        var tileWidth: Int
        var tileHeight: Int
        var columns: Int
        var rows: Int
        var compression: Int32
        var photometric: Int32
        var tables: [UInt8]
    }

    /// The file read, or the writer of a TIFF being built. (Two optionals rather than an enum of two
    /// references: such an enum keeps its case in the pointer's spare bits, where LeakSanitizer cannot
    /// see the pointer, and reports what is still alive as leaked.)
    struct Backing {
        let reader: TIFFFileReader?
        let writer: TIFFPyramidWriter?
        /// Whether reads never wait on a writer's lock: a file's, or a build's once finished.
        var isSettled: Bool { reader != nil || writer?.isFinished == true }

        static func file(_ reader: TIFFFileReader) -> Backing { Backing(reader: reader, writer: nil) }
        static func building(_ writer: TIFFPyramidWriter) -> Backing { Backing(reader: nil, writer: writer) }
    }

    let levels: [Level]
    let backing: Backing
    /// The ICC profile of the TIFF's first directory (or of the TIFF being built).
    let colorProfile: ColorProfile?
    /// Per level, what comes before a stored JPEG tile's bytes after its SOI to make it a whole JPEG:
    /// SOI, the profile's APP2 segments when it describes the level's tiles, the JPEGTables' markers
    /// (without their SOI and EOI) when they splice. Only SOI when there is nothing to add.
    let jpegPrefixes: [[UInt8]]
    /// Whether level 0's tiles hold the source JPEG's own coefficients (a store built so; unknown, so
    /// `false`, for a bare TIFF).
    let isLevelZeroCopied: Bool
    /// The largest tile read (bytes): anything bigger is a corrupt table, not a tile.
    static let maximumTileByteCount = 64 << 20

    init(levels: [Level], backing: Backing, isLevelZeroCopied: Bool = false, colorProfile: ColorProfile? = nil) {
        self.levels = levels
        self.backing = backing
        self.isLevelZeroCopied = isLevelZeroCopied
        self.colorProfile = colorProfile
        jpegPrefixes = levels.map { level in
            var prefix: [UInt8] = [0xFF, 0xD8]
            if let colorProfile, colorProfile.describes(channels: Self.channels(of: level)) { prefix += colorProfile.jpegSegments }
            if Self.splices(level.tables) { prefix += level.tables[2..<(level.tables.count - 2)] }
            return prefix
        }
    }

    /// Colour channels of a level's tiles (3 but for gray ones).
    static func channels(of level: Level) -> Int {
        level.photometric == Int32(CJS_PHOTOMETRIC_GRAY.rawValue) ? 1 : 3
    }

    /// The source of a TIFF being built by `writer`.
    convenience init(building writer: TIFFPyramidWriter, isLevelZeroCopied: Bool) {
        let levels = writer.levels.enumerated().map { index, l in
            Level(
                directory: UInt32(index), width: l.width, height: l.height, tileWidth: writer.tileSize,
                tileHeight: writer.tileSize, columns: (l.width + writer.tileSize - 1) / writer.tileSize,
                rows: (l.height + writer.tileSize - 1) / writer.tileSize, compression: l.compression,
                photometric: l.photometric, tables: l.tables)
        }
        self.init(levels: levels, backing: .building(writer), isLevelZeroCopied: isLevelZeroCopied, colorProfile: writer.colorProfile)
    }

    /// Whether the level's tiles are JPEG (and can be sent as stored).
    func isJPEG(level: Int) -> Bool { levels[level].compression == Int32(CJS_COMPRESSION_JPEG.rawValue) }
    /// Whether the level's tiles are WebP (decoded from their bytes by libwebp, built or read).
    func isWebP(level: Int) -> Bool { levels[level].compression == Int32(CJS_COMPRESSION_WEBP.rawValue) }

    /// Bytes of tiles written so far (a build), or the file's size.
    var byteCount: Int {
        if let writer = backing.writer { return writer.bytesWritten }
        return backing.reader?.fileByteCount ?? 0
    }

    /// The TIFF file's size now (a build's: its level 0 and, once finished, everything).
    var fileByteCount: Int {
        if let writer = backing.writer {
            var info = stat()
            return fstat(writer.files.descriptors[0], &info) == 0 ? Int(info.st_size) : 0
        }
        return backing.reader?.fileByteCount ?? 0
    }

    /// The bytes a tile holds in its file, read with one `pread`.
    /// - Throws: ``TileError/Code/notReady`` for a tile not written yet, ``TileError/Code/corrupt`` for a
    ///   tile past the end of the file or absurdly large, ``TileError/Code/io``.
    func storedBytes(level: Int, column: Int, row: Int, path: String?) throws(TileError) -> [UInt8] {
        let location = try locate(level: level, column: column, row: row)
        return try [UInt8](unsafeUninitializedCapacity: location.length) { buffer, count throws(TileError) in
            try SystemCall.readFully(
                location.descriptor, into: buffer.baseAddress!, count: location.length, offset: location.offset,
                what: "a tile of level \(level)", path: path)
            count = location.length
        }
    }

    /// ``storedBytes(level:column:row:path:)`` with one read that never waits for the disk: nil when
    /// the page cache does not hold the whole tile.
    func storedBytesIfCached(level: Int, column: Int, row: Int) throws(TileError) -> [UInt8]? {
        let location = try locate(level: level, column: column, row: row)
        let bytes = [UInt8](unsafeUninitializedCapacity: location.length) { buffer, count in
            let read =
                location.length == 0
                || SystemCall.readIfCached(location.descriptor, into: buffer.baseAddress!, count: location.length, offset: location.offset)
            count = read ? location.length : 0
        }
        return bytes.count == location.length ? bytes : nil
    }

    /// Where a tile's bytes lie, checked against the file's size and a tile's largest size.
    func locate(level: Int, column: Int, row: Int) throws(TileError) -> (descriptor: Int32, offset: Int, length: Int) {
        let location: (descriptor: Int32, offset: Int, length: Int)
        if let writer = backing.writer {
            guard let found = writer.locate(level: level, column: column, row: row) else {
                throw TileError(.notReady, "tile (\(column), \(row)) of level \(level) is not written yet")
            }
            location = found
        } else if let reader = backing.reader {
            location = try reader.locate(directory: levels[level].directory, column: column, row: row)
            guard location.length <= reader.fileByteCount, location.offset <= reader.fileByteCount - location.length else {
                throw TileError(.corrupt, "tile (\(column), \(row)) of level \(level) lies past the end of the file")
            }
        } else {
            preconditionFailure("a TIFF source reads a file or a build")
        }
        guard location.length > 0, location.length <= Self.maximumTileByteCount, location.offset >= 0 else {
            throw TileError(.corrupt, "tile (\(column), \(row)) of level \(level) claims \(location.length) bytes")
        }
        return location
    }

    /// Decodes one tile into RGBA at `destination` (`stride` bytes a row; the tile's own size).
    /// - Throws: ``TileError/Code/corrupt`` for bytes that are not such a tile, ``TileError/Code/unsupported``
    ///   for a coding that is not read, and what ``storedBytes(level:column:row:path:)`` throws.
    func decode(level: Int, column: Int, row: Int, into destination: UnsafeMutableRawPointer, stride: Int, path: String?)
        throws(TileError)
    {
        let l = levels[level]
        var message = [CChar](repeating: 0, count: 256)
        if isWebP(level: level) {
            let bytes = try storedBytes(level: level, column: column, row: row, path: path)
            let status = bytes.withUnsafeBytes { tile in
                cjs_webp_tile_decode(
                    tile.baseAddress, tile.count, UInt32(l.tileWidth), UInt32(l.tileHeight), destination, stride, &message, message.count)
            }
            guard status == CJS_OK else {
                throw TileError(.corrupt, "tile (\(column), \(row)) of level \(level) is not a valid WebP tile: \(String(cMessage: message))")
            }
            return
        }
        guard isJPEG(level: level) else {
            guard let reader = backing.reader else { preconditionFailure("a TIFF being built has JPEG or WebP tiles only") }
            try reader.decode(directory: l.directory, column: column, row: row, into: destination, stride: stride)
            return
        }
        let bytes = try storedBytes(level: level, column: column, row: row, path: path)
        let status = l.tables.withUnsafeBytes { tables in
            bytes.withUnsafeBytes { tile in
                cjs_jpeg_tile_decode(
                    tables.baseAddress, tables.count, tile.baseAddress, tile.count, l.photometric, UInt32(l.tileWidth),
                    UInt32(l.tileHeight), destination, stride, &message, message.count)
            }
        }
        switch status {
        case CJS_OK: return
        case CJS_ERR_NOMEM: throw TileError(.io, "out of memory decoding a tile", errno: ENOMEM)
        default:
            let text = String(cMessage: message)
            throw TileError(.corrupt, "tile (\(column), \(row)) of level \(level) is not a valid JPEG tile: \(text)")
        }
    }

    /// A whole JPEG of a stored tile: the level's prefix (``jpegPrefixes``: SOI, the ICC profile, the
    /// JPEGTables' markers), then the tile without its SOI (TIFF's abbreviated streams made complete).
    /// `nil` when the level's tiles are not JPEG.
    /// A WebP level's stored tile as it is: a RIFF WebP file (checked by its first 12 bytes).
    func storedWebP(level: Int, column: Int, row: Int, path: String?) throws(TileError) -> [UInt8]? {
        guard isWebP(level: level) else { return nil }
        let tile = try storedBytes(level: level, column: column, row: row, path: path)
        guard tile.count >= 12, tile[0..<4].elementsEqual("RIFF".utf8), tile[8..<12].elementsEqual("WEBP".utf8) else {
            throw TileError(.corrupt, "tile (\(column), \(row)) of level \(level) is not a WebP file")
        }
        return tile
    }

    func completeJPEG(level: Int, column: Int, row: Int, path: String?) throws(TileError) -> [UInt8]? {
        guard isJPEG(level: level) else { return nil }
        return try completeJPEG(level: level, column: column, row: row, stored: try storedBytes(level: level, column: column, row: row, path: path))
    }

    /// `tile`, a stored JPEG tile of `level` read elsewhere (a remote object's range), made a whole JPEG
    /// as ``completeJPEG(level:column:row:path:)`` makes it.
    func completeJPEG(level: Int, column: Int, row: Int, stored tile: [UInt8]) throws(TileError) -> [UInt8] {
        guard tile.count >= 4, tile[0] == 0xFF, tile[1] == 0xD8 else {
            throw TileError(.corrupt, "tile (\(column), \(row)) of level \(level) does not start a JPEG stream")
        }
        return jpegPrefixes[level] + tile[2...]
    }
}

extension TIFFSource {
    /// A JPEG tile cropped to its top-left `width` x `height` pixels without decoding
    /// (`cjs_jpeg_tile_crop`: the coefficients copied under a smaller frame). `nil` when the level's
    /// tiles are not JPEG, or not YCbCr or gray (the crop is written as a JFIF JPEG, which says YCbCr).
    /// - Throws: ``TileError/Code/corrupt`` for a tile that is not a JPEG stream, and what
    ///   ``storedBytes(level:column:row:path:)`` throws.
    /// - Parameter waitsForDisk: false to read the stored tile only if the page cache holds it (nil
    ///   otherwise).
    func croppedJPEG(level: Int, column: Int, row: Int, width: Int, height: Int, path: String?, waitsForDisk: Bool = true)
        throws(TileError) -> [UInt8]?
    {
        let photometric = levels[level].photometric
        guard isJPEG(level: level),
            photometric == Int32(CJS_PHOTOMETRIC_YCBCR.rawValue) || photometric == Int32(CJS_PHOTOMETRIC_GRAY.rawValue)
        else { return nil }
        let stored =
            waitsForDisk
            ? try storedBytes(level: level, column: column, row: row, path: path)
            : try storedBytesIfCached(level: level, column: column, row: row)
        guard let tile = stored else { return nil }
        var message = [CChar](repeating: 0, count: 256)
        var pointer: UnsafeMutableRawPointer?
        var length = 0
        let status = levels[level].tables.withUnsafeBytes { tables in
            tile.withUnsafeBytes { bytes in
                cjs_jpeg_tile_crop(
                    tables.baseAddress, tables.count, bytes.baseAddress, bytes.count, UInt32(levels[level].tileWidth),
                    UInt32(levels[level].tileHeight), UInt32(width), UInt32(height), &pointer, &length, &message, message.count)
            }
        }
        defer { cjs_free(pointer) }
        switch status {
        case CJS_OK:
            guard let pointer else { return nil }
            let cropped = [UInt8](UnsafeRawBufferPointer(start: pointer, count: length))
            guard let colorProfile, colorProfile.describes(channels: Self.channels(of: levels[level])) else { return cropped }
            return colorProfile.inserted(into: cropped)
        case CJS_ERR_NOMEM: throw TileError(.io, "out of memory cropping a tile", errno: ENOMEM)
        case CJS_ERR_ARGUMENT: return nil
        default:
            let text = String(cMessage: message)
            throw TileError(.corrupt, "tile (\(column), \(row)) of level \(level) cannot be cropped: \(text)")
        }
    }
}

extension TIFFSource {
    /// Whether JPEGTables are a whole tables-only stream (SOI ... EOI), to splice before tiles.
    static func splices(_ tables: [UInt8]) -> Bool {
        tables.count >= 4 && tables[0] == 0xFF && tables[1] == 0xD8 && tables[tables.count - 2] == 0xFF
            && tables[tables.count - 1] == 0xD9
    }

    /// The byte count of ``completeJPEG(level:column:row:path:)``'s answer, and where the tile lies.
    func completeJPEGLength(level: Int, column: Int, row: Int) throws(TileError) -> (
        length: Int, tile: (descriptor: Int32, offset: Int, length: Int)
    )? {
        guard isJPEG(level: level) else { return nil }
        let tile = try locate(level: level, column: column, row: row)
        guard tile.length >= 4 else { throw TileError(.corrupt, "tile (\(column), \(row)) of level \(level) does not start a JPEG stream") }
        return (jpegPrefixes[level].count - 2 + tile.length, tile)
    }

    /// ``completeJPEG(level:column:row:path:)`` into `destination` (``completeJPEGLength(level:column:row:)``
    /// bytes) with one read that never waits for the disk: the prefix copied but its last two bytes, the
    /// tile read after them (its SOI landing on those two, checked, then the prefix's bytes put back).
    /// - Returns: false when the page cache does not hold the whole tile.
    /// - Parameters:
    ///   - tile: where the tile lies, and `length` the complete JPEG's (``completeJPEGLength(level:column:row:)``).
    func readCompleteJPEGIfCached(
        level: Int, column: Int, row: Int, tile: (descriptor: Int32, offset: Int, length: Int), length: Int,
        into destination: UnsafeMutableRawBufferPointer
    ) throws(TileError) -> Bool {
        guard destination.count == length, let base = destination.baseAddress else { return false }
        let prefix = jpegPrefixes[level]
        let start = prefix.count - 2
        if start > 0 { prefix.withUnsafeBytes { base.copyMemory(from: $0.baseAddress!, byteCount: start) } }
        guard SystemCall.readIfCached(tile.descriptor, into: base + start, count: tile.length, offset: tile.offset) else { return false }
        guard destination[start] == 0xFF, destination[start + 1] == 0xD8 else {
            throw TileError(.corrupt, "tile (\(column), \(row)) of level \(level) does not start a JPEG stream")
        }
        destination[start] = prefix[start]
        destination[start + 1] = prefix[start + 1]
        return true
    }
}
