internal import CSpool
internal import CTiffDecoder
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The one Swift owner of a `ctiff_decoder`: TIFF masters read through libtiff, giving RGBA rows of
/// 8-bit samples by the rules of ``ImageInfo`` for TIFFs: gray repeated into R, G and B (MinIsWhite
/// inverted), palettes looked up (16-bit colour maps rounded to 8 bits), CMYK as
/// R = round((255 - C)(255 - K) / 255) (likewise G and B), 16-bit samples as round(v * 255 / 65535),
/// associated (premultiplied) alpha undone, alpha 255 where there is none.
///
/// A TIFF's directory may sit anywhere in the file, often at its end, so the decoder reads from a
/// file: the master's own when the builder knows its path, otherwise an anonymous spool file the
/// bytes are written to as they arrive (on disk, never in memory), read once the input has ended.
/// Rows are read a band at a time: one scanline of contiguous strips, one strip of each plane, or one
/// row of tiles, never the image; TIFFs whose band would be over 64 MiB are refused
/// (``TileError/Code/unsupported``).
///
/// Not thread-safe; its owner (a builder) serializes every call.
final class TIFFDecoder: RowDecoder {
    private let handle: OpaquePointer

    /// - Parameters:
    ///   - path: the master's file, read directly (the bytes fed are then only counted); nil: spool.
    ///     A path that is not a regular file (a FIFO, a pipe) throws ``TileError/Code/invalidArgument``.
    ///   - spoolDirectory: where the anonymous spool file is made when `path` is nil.
    ///   - page: the page (directory) read, 0 the first.
    init(path: String?, spoolDirectory: String, page: Int = 0) throws(TileError) {
        var handle: OpaquePointer?
        var number: Int32 = 0
        let status = cTIFFCreate(path, spoolDirectory, UInt32(clamping: page), &handle, &number)
        guard status == CMASTER_OK, let handle else {
            if status == CMASTER_ERR_NOMEM { throw TileError(.io, "cannot allocate a TIFF decoder", errno: ENOMEM) }
            if status == CMASTER_ERR_ARGUMENT { throw TileError(.invalidArgument, "\(path ?? "-") is not a regular file") }
            let target = path ?? "a spool file in \(spoolDirectory)"
            throw TileError(.io, "cannot open \(target): \(String(cString: strerror(number)))", errno: number)
        }
        self.handle = handle
    }

    deinit { ctiff_decoder_destroy(handle) }

    /// Whether `bytes` begin as a TIFF or BigTIFF file does (`II*\0`, `MM\0*`, `II+\0`, `MM\0+`), as far as they go.
    static func isSignature(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let signatures: [[UInt8]] = [[0x49, 0x49, 0x2A, 0x00], [0x4D, 0x4D, 0x00, 0x2A], [0x49, 0x49, 0x2B, 0x00], [0x4D, 0x4D, 0x00, 0x2B]]
        return !bytes.isEmpty && signatures.contains { signature in zip(bytes, signature).allSatisfy { $0 == $1 } }
    }

    var rowsRead: Int { Int(ctiff_decoder_rows_read(handle)) }
    var bytesBuffered: Int { 0 }  // spooled bytes are on disk
    var warningCount: Int { 0 }  // libtiff's warnings (unknown tags, ...) are not counted
    var isTruncated: Bool { false }  // a TIFF that ends early is an error (`.truncated`), never filled in

    var lastMessage: String {
        var text = [CChar](repeating: 0, count: 256)
        ctiff_decoder_copy_message(handle, &text, text.count)
        return String(cMessage: text)
    }

    func feed(_ bytes: UnsafeRawBufferPointer) throws(TileError) {
        try check(ctiff_decoder_feed(handle, bytes.baseAddress, bytes.count))
    }

    func endInput() throws(TileError) { try check(ctiff_decoder_end_input(handle)) }

    func readSourceHeader() throws(TileError) -> SourceHeader? {
        var header = ctiff_header()
        let status = ctiff_decoder_read_header(handle, &header)
        if status == CMASTER_NEED_DATA { return nil }
        try check(status)
        var bytes: UnsafeRawPointer?
        var length = 0
        ctiff_decoder_icc_profile(handle, &bytes, &length)
        let icc = bytes.map { [UInt8](UnsafeRawBufferPointer(start: $0, count: length)) }
        var info = ImageInfo(tiff: header, iccProfile: length > 0 ? icc : nil)
        // The directory's descriptive text, named as EXIF names the same tags (EXIF's IFD0 is a TIFF's).
        for (tag, name) in [(270, "ImageDescription"), (306, "DateTime"), (315, "Artist"), (33432, "Copyright")] {
            guard let text = ctiff_decoder_text_tag(handle, UInt32(tag)) else { continue }
            info.exif[name] = .string(String(decoding: UnsafeRawBufferPointer(start: text, count: min(strlen(text), 4096)), as: UTF8.self))
        }
        return .other(info)
    }

    /// Every page's stored size and orientation (as ``ImageInfo/orientation`` reads the tag), in order,
    /// as the header's read counted them (at most 4,096); empty before the header is read.
    func pageSizes() -> [(width: Int, height: Int, orientation: ImageOrientation)] {
        var sizes = [ctiff_page_size](repeating: ctiff_page_size(), count: 4096)
        let count = Int(ctiff_decoder_page_sizes(handle, &sizes, UInt32(sizes.count)))
        return sizes.prefix(count).map {
            (Int($0.width), Int($0.height), ImageOrientation(rawValue: Int($0.orientation)) ?? .identity)
        }
    }

    func start() throws(TileError) -> DecodeStep { .ready }

    func readRows(into buffer: UnsafeMutableRawBufferPointer, stride: Int, maxRows: Int) throws(TileError)
        -> (rows: Int, step: DecodeStep)
    {
        precondition(buffer.count >= stride * maxRows, "row buffer too small")
        var rows: UInt32 = 0
        let status = ctiff_decoder_read_rows(handle, buffer.baseAddress, stride, UInt32(clamping: maxRows), &rows)
        return (Int(rows), try MasterStatus.step(status, format: "TIFF", message: { lastMessage }, errorNumber: errorNumber))
    }

    /// Done once every row has been given and the input has ended (a file read directly is still
    /// fed to the builder to the end: its fingerprint covers every byte).
    func finish() throws(TileError) -> DecodeStep {
        var ended: Int32 = 0
        try check(ctiff_decoder_state(handle, &ended))
        return ended != 0 ? .done : .needData
    }

    private func check(_ status: cmaster_status) throws(TileError) {
        try MasterStatus.check(status, format: "TIFF", message: { lastMessage }, errorNumber: errorNumber)
    }

    private func errorNumber() -> Int32 { ctiff_decoder_error_number(handle) }
}

/// `ctiff_decoder_create` with Swift strings (NULL for a nil path).
private func cTIFFCreate(
    _ path: String?, _ spoolDirectory: String, _ page: UInt32, _ handle: inout OpaquePointer?, _ number: inout Int32
) -> cmaster_status {
    spoolDirectory.withCString { directory in
        guard let path else { return ctiff_decoder_create(nil, directory, page, &handle, &number) }
        return path.withCString { ctiff_decoder_create($0, directory, page, &handle, &number) }
    }
}

extension ImageInfo {
    /// A TIFF's directory, as the decoder read it.
    init(tiff h: ctiff_header, iccProfile: [UInt8]?) {
        self.init(
            png: Int(h.width), height: Int(h.height), bitDepth: Int(h.bits_per_sample), isGray: h.is_gray != 0,
            hasAlpha: h.has_alpha != 0, iccProfile: iccProfile, pixelsPerMetre: nil)
        format = .tiff
        if h.is_cmyk != 0 {
            components = 4
            colorSpace = .cmyk
        }
        exifOrientation = h.orientation > 0 ? Int(h.orientation) : nil
        // ResolutionUnit 2 (inch) and 3 (centimetre) are JFIF's units 1 and 2; 1 (none) its 0.
        if h.resolution_unit > 0, h.x_resolution > 0, h.y_resolution > 0, h.x_resolution < 1e6, h.y_resolution < 1e6 {
            density = Density(
                unit: Int(h.resolution_unit) - 1, x: Int(h.x_resolution.rounded()), y: Int(h.y_resolution.rounded()))
        }
        tiff = TIFFDetails(
            compression: Int(h.compression), photometric: Int(h.photometric), samplesPerPixel: Int(h.samples_per_pixel),
            isTiled: h.tiled != 0, isPlanar: h.planar == 2, isBigTIFF: h.big_tiff != 0, isBigEndian: h.big_endian != 0,
            alphaIsAssociated: h.alpha_associated != 0, pageCount: Int(h.page_count))
    }
}
