internal import CJpegShim
#if canImport(Glibc)
import Glibc
#endif

/// The one Swift owner of a `cjs_tiff_reader`: the tiled directories of a TIFF file, read once.
///
/// `@unchecked Sendable`: after init the C reader only answers lookups (immutable tables) and decodes
/// non-JPEG tiles under a lock per directory, in C.
final class TIFFFileReader: @unchecked Sendable {
    private let handle: OpaquePointer
    /// The file's size when opened.
    let fileByteCount: Int
    let directories: [cjs_tiff_directory]
    /// The descriptor the reader was opened on.
    let fileDescriptor: Int32
    /// The first directory's ICC profile.
    let colorProfile: ColorProfile?

    /// Reads the TIFF in `fd` (not owned: it must stay open as long as this reader).
    /// - Throws: ``TileError/Code/invalidStore`` when it is not a TIFF with a tiled image,
    ///   ``TileError/Code/io``.
    convenience init(fd: Int32, path: String) throws(TileError) {
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw SystemCall.error("cannot read", path: path) }
        var message = [CChar](repeating: 0, count: 256)
        var handle: OpaquePointer?
        let status = cjs_tiff_reader_open(fd, 0, &handle, &message, message.count)
        guard status == CJS_OK, let handle else { throw Self.failure(status, message, path) }
        self.init(handle: handle, fd: fd, byteCount: Int(info.st_size))
    }

    /// What a TIFF of which only some parts are at hand gives: its reader, or the range libtiff wants next.
    enum Opening {
        case reader(TIFFFileReader)
        case needs(Range<Int>)
    }

    /// Reads the directories of a TIFF of `byteCount` bytes from `parts` (its bytes at their offsets,
    /// sorted and not overlapping, touching ones read as one: a remote object's ranges fetched so far). The reader has no descriptor: its
    /// tiles are located, to be read elsewhere.
    /// - Returns: the reader, or the first range libtiff wanted outside `parts` (fetch it and call again).
    /// - Throws: ``TileError/Code/invalidStore`` when it is not a TIFF with a tiled image.
    static func open(parts: [(offset: Int, bytes: [UInt8])], byteCount: Int, name: String) throws(TileError) -> Opening {
        var message = [CChar](repeating: 0, count: 256)
        var handle: OpaquePointer?
        var (missingOffset, missingLength): (UInt64, UInt64) = (0, 0)
        // The segments point into `parts`' arrays only for the call.
        let status = withSegments(parts[...], []) { segments in
            cjs_tiff_reader_open_segments(
                segments, segments.count, UInt64(byteCount), 0, &handle, &missingOffset, &missingLength, &message, message.count)
        }
        if missingLength > 0 { return .needs(Int(missingOffset)..<Int(missingOffset + missingLength)) }
        guard status == CJS_OK, let handle else { throw failure(status, message, name) }
        return .reader(TIFFFileReader(handle: handle, fd: -1, byteCount: byteCount))
    }

    /// Calls `body` with `parts` as C segments, each array's storage pinned for the call.
    private static func withSegments<R>(
        _ parts: ArraySlice<(offset: Int, bytes: [UInt8])>, _ done: [cjs_tiff_segment], _ body: ([cjs_tiff_segment]) -> R
    ) -> R {
        guard let part = parts.first else { return body(done) }
        return part.bytes.withUnsafeBytes { bytes in
            withSegments(
                parts.dropFirst(), done + [cjs_tiff_segment(offset: UInt64(part.offset), bytes: bytes.baseAddress, length: bytes.count)], body)
        }
    }

    private static func failure(_ status: cjs_status, _ message: [CChar], _ name: String) -> TileError {
        if status == CJS_ERR_NOMEM { return TileError(.io, "out of memory reading \(name)", errno: ENOMEM) }
        return TileError(.invalidStore, "\(name) is not a tiled TIFF: \(String(cMessage: message))")
    }

    private init(handle: OpaquePointer, fd: Int32, byteCount: Int) {
        self.handle = handle
        fileDescriptor = fd
        fileByteCount = byteCount
        var profile: UnsafeRawPointer?
        var profileLength = 0
        cjs_tiff_reader_icc_profile(handle, &profile, &profileLength)
        colorProfile = profile.flatMap { ColorProfile([UInt8](UnsafeRawBufferPointer(start: $0, count: profileLength))) }
        directories = (0..<cjs_tiff_reader_directory_count(handle)).map { index in
            var d = cjs_tiff_directory()
            _ = cjs_tiff_reader_directory(handle, index, &d)
            return d
        }
    }

    deinit { cjs_tiff_reader_destroy(handle) }

    /// Directory `index`'s JPEGTables (empty when it has none).
    func tables(_ index: Int) -> [UInt8] {
        let d = directories[index]
        guard let pointer = d.jpeg_tables else { return [] }
        return [UInt8](UnsafeRawBufferPointer(start: pointer, count: d.jpeg_tables_length))
    }

    func locate(directory: UInt32, column: Int, row: Int) throws(TileError) -> (descriptor: Int32, offset: Int, length: Int) {
        var offset: UInt64 = 0
        var length: UInt64 = 0
        guard cjs_tiff_reader_locate(handle, directory, UInt32(column), UInt32(row), &offset, &length) == CJS_OK,
            offset <= UInt64(Int.max), length <= UInt64(Int.max)
        else { throw TileError(.corrupt, "tile (\(column), \(row)) is outside directory \(directory)") }
        return (fileDescriptor, Int(offset), Int(length))
    }

    func decode(directory: UInt32, column: Int, row: Int, into destination: UnsafeMutableRawPointer, stride: Int)
        throws(TileError)
    {
        var message = [CChar](repeating: 0, count: 256)
        let status = cjs_tiff_reader_decode(
            handle, directory, UInt32(column), UInt32(row), destination, stride, &message, message.count)
        let text = String(cMessage: message)
        switch status {
        case CJS_OK: return
        case CJS_ERR_NOMEM: throw TileError(.io, "out of memory decoding a tile", errno: ENOMEM)
        case CJS_ERR_ARGUMENT: throw TileError(.unsupported, text)
        default: throw TileError(.corrupt, "tile (\(column), \(row)) cannot be decoded: \(text)")
        }
    }
}
