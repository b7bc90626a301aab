internal import CSpool
internal import CPngDecoder
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The one Swift owner of a `cpng_decoder`: a push decoder of PNG masters over libpng's progressive
/// reader, giving RGBA rows of 8-bit samples (gray expanded to RGB, palettes expanded, `tRNS` made
/// alpha, 16-bit samples scaled to 8 with rounding: `round(v * 255 / 65535)`, libpng's
/// `png_set_scale_16`; alpha 255 where the image has none). Rows held are bounded by what one small
/// piece of compressed bytes inflates to, never by the image. An Adam7-interlaced PNG's last pass
/// completes every row, so its passes are combined, row by row, into a spool file of the whole image
/// on disk (never in memory), whose rows are given once the last pass has been read.
///
/// Not thread-safe; its owner (a builder) serializes every call.
final class PNGDecoder: RowDecoder {
    private let handle: OpaquePointer

    /// - Parameter spoolDirectory: where an Adam7-interlaced PNG's spool file is made (anonymous, the
    ///   image's size as RGBA): its last pass completes every row, so the passes are combined on disk.
    init(spoolDirectory: String) throws(TileError) {
        var handle: OpaquePointer?
        guard cpng_decoder_create(&handle) == CMASTER_OK, let handle else {
            throw TileError(.io, "cannot allocate a PNG decoder", errno: ENOMEM)
        }
        self.handle = handle
        guard cpng_decoder_set_spool_directory(handle, spoolDirectory) == CMASTER_OK else {
            throw TileError(.io, "cannot allocate a PNG decoder", errno: ENOMEM)
        }
    }

    deinit { cpng_decoder_destroy(handle) }

    /// Whether `bytes` begin as a PNG file does (its 8-byte signature, as far as they go).
    static func isSignature(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        return !bytes.isEmpty && zip(bytes, signature).allSatisfy { $0 == $1 }
    }

    var rowsRead: Int { Int(cpng_decoder_rows_read(handle)) }
    var bytesBuffered: Int { cpng_decoder_bytes_buffered(handle) }
    var warningCount: Int { Int(cpng_decoder_warning_count(handle)) }
    var isTruncated: Bool { false }  // a PNG that ends early is an error (`.truncated`), never filled in
    /// The interlaced image's spool file on disk (counted as the build's scratch bytes).
    var coefficientFileByteCount: Int { Int(cpng_decoder_spool_bytes(handle)) }

    var lastMessage: String {
        var text = [CChar](repeating: 0, count: 256)
        cpng_decoder_copy_message(handle, &text, text.count)
        return String(cMessage: text)
    }

    func feed(_ bytes: UnsafeRawBufferPointer) throws(TileError) {
        try check(cpng_decoder_feed(handle, bytes.baseAddress, bytes.count))
    }

    func endInput() throws(TileError) { try check(cpng_decoder_end_input(handle)) }

    func readSourceHeader() throws(TileError) -> SourceHeader? {
        var header = cpng_header()
        let status = cpng_decoder_read_header(handle, &header)
        if status == CMASTER_NEED_DATA { return nil }
        try check(status)
        var bytes: UnsafeRawPointer?
        var length = 0
        cpng_decoder_icc_profile(handle, &bytes, &length)
        let icc = bytes.map { [UInt8](UnsafeRawBufferPointer(start: $0, count: length)) }
        var (unit, x, y): (Int32, UInt32, UInt32) = (-1, 0, 0)
        cpng_decoder_density(handle, &unit, &x, &y)
        var info = ImageInfo(
            png: Int(header.width), height: Int(header.height), bitDepth: Int(header.bit_depth),
            isGray: header.is_gray != 0, hasAlpha: header.has_alpha != 0,
            iccProfile: length > 0 ? icc : nil, pixelsPerMetre: unit >= 0 ? (Int(unit), Int(x), Int(y)) : nil)
        info.gamma = header.gamma > 0 ? header.gamma : nil
        info.sRGBIntent = header.srgb_intent >= 0 ? Int(header.srgb_intent) : nil
        return .other(info)
    }

    func start() throws(TileError) -> DecodeStep { .ready }

    func readRows(into buffer: UnsafeMutableRawBufferPointer, stride: Int, maxRows: Int) throws(TileError)
        -> (rows: Int, step: DecodeStep)
    {
        precondition(buffer.count >= stride * maxRows, "row buffer too small")
        var rows: UInt32 = 0
        let status = cpng_decoder_read_rows(handle, buffer.baseAddress, stride, UInt32(clamping: maxRows), &rows)
        return (Int(rows), try MasterStatus.step(status, format: "PNG", message: { lastMessage }, errorNumber: errorNumber))
    }

    /// Reads on to the end of the file (`IEND`) once every row has been given.
    func finish() throws(TileError) -> DecodeStep {
        var rows: UInt32 = 0
        var none: UInt32 = 0  // no row is asked for: a buffer only to say rows (none) are wanted
        let status = withUnsafeMutableBytes(of: &none) { cpng_decoder_read_rows(handle, $0.baseAddress, 4, 0, &rows) }
        if status == CMASTER_OK || status == CMASTER_NEED_DATA { return .needData }
        try check(status)
        return .done
    }

    private func check(_ status: cmaster_status) throws(TileError) {
        try MasterStatus.check(status, format: "PNG", message: { lastMessage }, errorNumber: errorNumber)
    }

    private func errorNumber() -> Int32 { Int32(cpng_decoder_error_number(handle)) }
}
