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
    /// (`cjs_decoder_transcode_into`); keeps `writer` alive as long as the decoder. Call after
    /// ``transcodePlan(tileSize:orientation:)`` and ``storeCoefficients(_:in:windowBytes:)``, before ``start()``.
    func transcode(into writer: TIFFPyramidWriter) throws(TileError) {
        let status = cjs_decoder_transcode_into(handle, writer.handle)
        guard status == CJS_OK else {
            if status == CJS_ERR_NOMEM { throw TileError(.io, "out of memory for the transcoder", errno: ENOMEM) }
            throw TileError(.invalidArgument, "level 0 cannot be transcoded now (status \(status.rawValue))")
        }
        transcodeTarget = writer
    }

    /// For a turned plan: each row of coefficients, once final, goes to an anonymous file in `directory`
    /// (`cjs_decoder_transcode_turned`, 128 bytes an 8x8 block) while the rows come out as before; after
    /// the decode, ``startTurnedLevelZero(into:)`` codes the upright tiles from it. Call after
    /// ``transcodePlan(tileSize:orientation:)`` and ``storeCoefficients(_:in:windowBytes:)``, before
    /// ``start()``.
    func transcodeTurned(in directory: String) throws(TileError) {
        let fd = try SystemCall.createAnonymous(in: directory, what: "a file of turned coefficients")
        // The C decoder owns it from here, also when this fails.
        let status = cjs_decoder_transcode_turned(handle, fd.take())
        guard status == CJS_OK else {
            if status == CJS_ERR_NOMEM { throw TileError(.io, "out of memory for the transcoder", errno: ENOMEM) }
            throw TileError(.invalidArgument, "level 0 cannot be turned now (status \(status.rawValue))")
        }
    }

    /// Starts coding level 0 of `writer` from the coefficients ``transcodeTurned(in:)`` kept, turned
    /// upright, on the transcoder's thread (`cjs_decoder_transcode_write_turned`), and returns; the
    /// caller keeps `writer` until ``waitForTurnedLevelZero()`` returns, also when it fails meanwhile.
    /// Call after ``finish()`` returned `.done`.
    func startTurnedLevelZero(into writer: TIFFPyramidWriter) throws(TileError) {
        try checkTurned(cjs_decoder_transcode_write_turned(handle, writer.handle))
    }

    /// Waits until the turned level 0 is in the writer (`cjs_decoder_transcode_wait_turned`).
    func waitForTurnedLevelZero() throws(TileError) {
        try checkTurned(cjs_decoder_transcode_wait_turned(handle))
    }

    private func checkTurned(_ status: cjs_status) throws(TileError) {
        guard status == CJS_OK else {
            if status == CJS_ERR_IO { throw TileError(.io, lastMessage, errno: cjs_decoder_errno(handle)) }
            throw TileError(.invalidArgument, "the turned level 0 is not being written (status \(status.rawValue))")
        }
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
