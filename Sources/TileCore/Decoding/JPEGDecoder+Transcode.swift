internal import CJpegShim
#if canImport(Glibc)
import Glibc
#endif

extension JPEGDecoder {
    /// Level 0's coding when it is copied from this JPEG's coefficients (`cjs_decoder_transcode_plan`),
    /// turned upright by `orientation` in the DCT domain when it is not the identity: its size,
    /// photometric interpretation, subsampling and JPEGTables; `nil` when they cannot make TIFF JPEG
    /// tiles (CMYK, RGB-coded, sampling TIFF cannot state, an MCU that does not divide the tile; turned:
    /// a flipped side that is not a whole number of MCUs, 4:2:2 transposed), with the reason. Call after
    /// the header, before ``start()``.
    func transcodePlan(tileSize: Int, orientation: ImageOrientation) throws(TileError)
        -> (coding: TIFFLevelCoding?, reason: String?)
    {
        var level = cjs_tiff_level()
        let status = cjs_decoder_transcode_plan(handle, UInt32(tileSize), Int32(orientation.rawValue), &level)
        switch status {
        case CJS_OK:
            let tables = [UInt8](UnsafeRawBufferPointer(start: level.jpeg_tables, count: level.jpeg_tables_length))
            return (TIFFLevelCoding(level, tables: tables), nil)
        case CJS_ERR_ARGUMENT: return (nil, lastMessage)
        case CJS_ERR_NOMEM: throw TileError(.io, "out of memory planning level 0", errno: ENOMEM)
        default: throw TileError(.invalidArgument, "the transcode plan was asked for in the wrong state")
        }
    }

    /// Makes level 0 of `writer` from this JPEG's coefficients while the rows come out as before
    /// (`cjs_decoder_transcode_into`), turned upright as the plan says (a tile's rows at a time: the
    /// upright tiles they hold); keeps `writer` alive as long as the decoder. Call after
    /// ``transcodePlan(tileSize:orientation:)`` and ``storeCoefficients(_:in:windowBytes:)``, before ``start()``.
    func transcode(into writer: TIFFPyramidWriter) throws(TileError) {
        let status = cjs_decoder_transcode_into(handle, writer.handle)
        guard status == CJS_OK else {
            if status == CJS_ERR_NOMEM { throw TileError(.io, "out of memory for the transcoder", errno: ENOMEM) }
            throw TileError(.invalidArgument, "level 0 cannot be transcoded now (status \(status.rawValue))")
        }
        transcodeTarget = writer
    }

    /// Waits until the level-0 tiles of the rows decoded so far are in the writer
    /// (`cjs_decoder_transcode_sync`); nothing when the decoder is not transcoding.
    func syncTranscode() throws(TileError) {
        guard transcodeTarget != nil else { return }
        if cjs_decoder_transcode_sync(handle) != CJS_OK {
            throw TileError(.io, "cannot write level 0's tiles", errno: cjs_decoder_errno(handle))
        }
    }

    /// Waits until every level-0 tile is in the writer (`cjs_decoder_transcode_wait`). Call after
    /// ``finish()`` returned `.done`.
    func waitForTranscode() throws(TileError) {
        let status = cjs_decoder_transcode_wait(handle)
        guard status == CJS_OK else {
            throw TileError(.io, lastMessage, errno: cjs_decoder_errno(handle))
        }
    }
}
