internal import CJpegShim
#if canImport(Glibc)
import Glibc
#endif

/// The one Swift owner of a `cjs_tiff_level_encoder`: a level's rows into its JPEG tiles in a TIFF.
/// Used where rows come from a finished pyramid rather than the decoder (a turned image's TIFF).
final class TIFFLevelEncoder {
    private let handle: OpaquePointer
    private let writer: TIFFPyramidWriter

    /// - Throws: ``TileError/Code/invalidArgument`` when the level's JPEGTables are not `coding`'s.
    init(writer: TIFFPyramidWriter, level: Int, coding: TIFFWriting) throws(TileError) {
        var handle: OpaquePointer?
        let status = cjs_tiff_level_encoder_create(
            writer.handle, UInt32(level), Int32(coding.quality), coding.tablesCode, &handle)
        guard status == CJS_OK, let handle else {
            if status == CJS_ERR_NOMEM { throw TileError(.io, "out of memory for a level encoder", errno: ENOMEM) }
            throw TileError(.invalidArgument, "level \(level) cannot be encoded at quality \(coding.quality)")
        }
        self.handle = handle
        self.writer = writer
    }

    deinit { cjs_tiff_level_encoder_destroy(handle) }

    /// The level's next row, RGBA (`cjs_tiff_level_encoder_push_row`); each tile row's tiles go to the
    /// TIFF as its last row comes.
    func push(_ row: UnsafeRawBufferPointer) throws(TileError) {
        let status = cjs_tiff_level_encoder_push_row(handle, row.baseAddress)
        switch status {
        case CJS_OK: return
        case CJS_ERR_IO: throw writer.failure("cannot write a tile")
        case CJS_ERR_NOMEM: throw TileError(.io, "out of memory encoding a tile", errno: ENOMEM)
        default: throw TileError(.invalidArgument, "a level encoder refused a row (status \(status.rawValue))")
        }
    }
}
