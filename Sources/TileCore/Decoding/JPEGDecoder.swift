internal import CJpegShim
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The one Swift owner of a `cjs_decoder`: a push decoder over libjpeg's suspending source.
///
/// Not thread-safe; its owner (a builder) serializes every call.
final class JPEGDecoder: RowDecoder {
    typealias Step = DecodeStep

    let handle: OpaquePointer
    /// The TIFF whose level 0 the decoder's transcoder writes: kept alive as long as the decoder.
    var transcodeTarget: TIFFPyramidWriter?

    /// - Parameters:
    ///   - warningLimit: corrupt-data warnings tolerated (`nil`: no limit).
    ///   - maximumScanCount: scans tolerated (`nil`: no limit); with a limit, also no more than
    ///     ``maximumBlockPasses`` passes of the scans over the image's blocks.
    ///   - allowsTruncation: whether scan data that ends early is accepted (libjpeg fills in the rest)
    ///     rather than refused at the first sign.
    init(warningLimit: Int?, maximumScanCount: Int?, allowsTruncation: Bool) throws(TileError) {
        var options = cjs_decoder_options(
            warning_limit: warningLimit.map { UInt32(clamping: max($0, 1)) } ?? 0,
            max_scans: maximumScanCount.map { UInt32(clamping: max($0, 1)) } ?? 0,
            max_block_passes: maximumScanCount == nil ? 0 : Self.maximumBlockPasses,
            allow_truncated: allowsTruncation ? 1 : 0)
        var handle: OpaquePointer?
        guard cjs_decoder_create(&options, &handle) == CJS_OK, let handle else {
            throw TileError(.io, "cannot allocate a JPEG decoder", errno: ENOMEM)
        }
        self.handle = handle
    }

    deinit { cjs_decoder_destroy(handle) }

    /// How many times over a stream's scans may cover its image's blocks (after the first 2^24
    /// block-scans): real progressive encoders cover each component 4 to 10 times; a stream of
    /// hundreds of empty scans (492 of an 8192 x 8192 image of zeros, 192 KB, took 19 s) is refused as
    /// ``TileError/Code/tooManyScans`` once it passes this.
    static let maximumBlockPasses: UInt32 = 16

    var rowsRead: Int { Int(cjs_decoder_rows_read(handle)) }
    var bytesBuffered: Int { cjs_decoder_bytes_buffered(handle) }
    var warningCount: Int { Int(cjs_decoder_warning_count(handle)) }
    var isTruncated: Bool { cjs_decoder_is_truncated(handle) != 0 }
    var bytesAfterEnd: Int { Int(cjs_decoder_bytes_after_end(handle)) }
    var lastMessage: String { String(cString: cjs_decoder_message(handle)) }

    /// Makes the decode in progress on another thread fail as ``TileError/Code/cancelled`` soon (at
    /// its next row of input); the one method that may be called from any thread.
    func requestStop() { cjs_decoder_request_stop(handle) }

    /// Copies the bytes in (`cjs_decoder_feed`).
    func feed(_ bytes: UnsafeRawBufferPointer) throws(TileError) {
        try check(cjs_decoder_feed(handle, bytes.baseAddress, bytes.count), "feed")
    }

    /// Copies the bytes of `Data`, `[UInt8]`, ... in (`cjs_decoder_feed`).
    func feed(_ bytes: some ContiguousBytes) throws(TileError) {
        var failure: TileError?
        bytes.withUnsafeBytes { raw in
            do throws(TileError) { try feed(raw) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    func endInput() throws(TileError) { try check(cjs_decoder_end_input(handle), "end input") }

    func readSourceHeader() throws(TileError) -> SourceHeader? { try readHeader().map { .jpeg($0) } }

    /// Calls `jpeg_read_header`; `nil` until enough bytes have arrived.
    func readHeader() throws(TileError) -> JPEGHeader? {
        var h = cjs_header()
        let status = cjs_decoder_read_header(handle, &h)
        if status == CJS_NEED_DATA { return nil }
        try check(status, "read header")
        let spaces: [Int32: JPEGHeader.ColorSpace] = [
            Int32(CJS_COLOR_GRAYSCALE.rawValue): .grayscale, Int32(CJS_COLOR_RGB.rawValue): .rgb,
            Int32(CJS_COLOR_YCBCR.rawValue): .ycbcr, Int32(CJS_COLOR_CMYK.rawValue): .cmyk,
            Int32(CJS_COLOR_YCCK.rawValue): .ycck
        ]
        return JPEGHeader(
            width: Int(h.width), height: Int(h.height), components: Int(h.components),
            colorSpace: spaces[h.color_space] ?? .unknown, bitsPerSample: Int(h.bits_per_sample),
            isProgressive: h.is_progressive != 0, isArithmetic: h.is_arithmetic != 0)
    }

    /// Bytes of the whole-image coefficient arrays the image needs (0 for a single-scan image).
    /// Valid once the header has been read.
    var coefficientByteCount: Int { Int(cjs_decoder_coefficient_bytes(handle)) }

    /// Bytes of the coefficient file while it exists (0 before it is created and once it is closed).
    var coefficientFileByteCount: Int { Int(cjs_decoder_coefficient_file_bytes(handle)) }

    /// Puts the coefficient arrays of a multi-scan image in an anonymous file in `directory` when
    /// `storage` says so for their size. Call after the header, before ``start()``.
    /// - Parameter windowBytes: memory for each component's window of block rows (`nil`: 1 MiB); tests
    ///   make it tiny so that every access moves the window.
    /// - Returns: whether they go to disk.
    /// - Throws: ``TileError/Code/io`` when the file cannot be created.
    @discardableResult
    func storeCoefficients(_ storage: CoefficientStorage, in directory: String, windowBytes: Int? = nil) throws(TileError)
        -> Bool
    {
        guard storage.usesDisk(forByteCount: coefficientByteCount) else { return false }
        let fd = try SystemCall.createAnonymous(in: directory, what: "a coefficient file")
        // The C decoder owns it from here, also when this fails.
        try check(cjs_decoder_use_coefficient_file(handle, fd.take(), max(windowBytes ?? 0, 0)), "use a coefficient file")
        return true
    }

    /// Asks for DCT-domain scaling by 1/`denominator` (`jpeg_calc_output_dimensions`); returns the
    /// output size. Call after the header, before ``start()``.
    func setScale(denominator: Int) throws(TileError) -> (width: Int, height: Int) {
        var width: UInt32 = 0
        var height: UInt32 = 0
        try check(cjs_decoder_set_scale(handle, UInt32(denominator), &width, &height), "set scale")
        return (Int(width), Int(height))
    }

    /// Calls `jpeg_start_decompress`; `.needData` while libjpeg suspends.
    func start() throws(TileError) -> Step {
        let status = cjs_decoder_start(handle)
        if status == CJS_NEED_DATA { return .needData }
        try check(status, "start")
        return .ready
    }

    /// Calls `jpeg_read_scanlines` for up to `maxRows` rows into `buffer` (RGBA rows `stride` apart).
    func readRows(into buffer: UnsafeMutableRawBufferPointer, stride: Int, maxRows: Int) throws(TileError)
        -> (rows: Int, step: Step)
    {
        precondition(buffer.count >= stride * maxRows, "row buffer too small")
        var rows: UInt32 = 0
        let status = cjs_decoder_read_rows(handle, buffer.baseAddress, stride, UInt32(maxRows), &rows)
        switch status {
        case CJS_OK: return (Int(rows), .ready)
        case CJS_NEED_DATA: return (Int(rows), .needData)
        case CJS_DONE: return (Int(rows), .done)
        default:
            try check(status, "read scanlines")
            return (Int(rows), .ready)
        }
    }

    /// Calls `jpeg_finish_decompress`; `.needData` until the end of the stream has arrived.
    func finish() throws(TileError) -> Step {
        let status = cjs_decoder_finish(handle)
        if status == CJS_NEED_DATA { return .needData }
        if status == CJS_DONE { return .done }
        try check(status, "finish")
        return .done
    }

    private func check(_ status: cjs_status, _ operation: String) throws(TileError) {
        switch status {
        case CJS_OK, CJS_DONE, CJS_NEED_DATA: return
        case CJS_ERR_LIBJPEG: throw libjpegError()
        case CJS_ERR_NOMEM: throw TileError(.io, "out of memory in \(operation)", errno: ENOMEM)
        default: throw TileError(.invalidArgument, "JPEG decoder \(operation) called in the wrong state")
        }
    }

    private func libjpegError() -> TileError {
        let message = lastMessage
        let code = Int(cjs_decoder_message_code(handle))
        switch cjs_failure_kind(UInt32(cjs_decoder_failure_kind(handle))) {
        case CJS_FAILURE_UNSUPPORTED: return TileError(.unsupported, message, libjpegMessageCode: code)
        case CJS_FAILURE_TOO_LARGE: return TileError(.tooLarge, message, libjpegMessageCode: code)
        case CJS_FAILURE_EMPTY: return TileError(.truncated, "empty input: \(message)", libjpegMessageCode: code)
        case CJS_FAILURE_NOMEM: return TileError(.io, message, errno: ENOMEM, libjpegMessageCode: code)
        case CJS_FAILURE_TRUNCATED:
            var error = TileError(.truncated, "scan data ends early (\(message))", libjpegMessageCode: code)
            error.isFillable = true
            return error
        case CJS_FAILURE_TOO_MANY_SCANS: return TileError(.tooManyScans, message)
        case CJS_FAILURE_IO: return TileError(.io, message, errno: cjs_decoder_errno(handle))
        case CJS_FAILURE_STOPPED: return TileError(.cancelled, message)
        case CJS_FAILURE_TOO_MANY_WARNINGS:
            return TileError(
                .tooManyWarnings, "more than \(warningCount - 1) corrupt-data warnings; last: \(message)",
                libjpegMessageCode: code)
        default: return TileError(.corrupt, message, libjpegMessageCode: code)
        }
    }
}
