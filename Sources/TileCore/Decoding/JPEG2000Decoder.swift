internal import CSpool
internal import CJp2Decoder
import Foundation

/// The one Swift owner of a `cjp2_decoder`: JPEG 2000 masters (JP2 files and bare J2K codestreams)
/// read through OpenJPEG, giving RGBA rows of 8-bit samples by the rules of ``ImageInfo``: gray
/// repeated into R, G and B, CMYK as R = round((255 - C)(255 - K) / 255) (likewise G and B), samples of
/// P bits as round(v * 255 / (2^P - 1)), alpha 255 where there is none.
///
/// OpenJPEG finds tiles through the codestream's header, so the decoder reads a file
/// (``MasterFile``): the master's own when its path is known (rows then keep pace with the bytes fed),
/// otherwise a spool of the bytes, read once the input has ended. Rows come a band at a time: a window
/// of whole rows within one row of tiles, at most about 48 MiB of OpenJPEG's 32-bit samples, decoded by
/// a codec of its own that decodes only the code-blocks the window crosses. An image of one tile has
/// that tile's compressed bytes held while each band is decoded, and its lower resolutions decoded again
/// for each band: memory grows with the file, time with the bands (BENCHMARKS.md).
///
/// Not thread-safe; its owner (a builder) serializes every call.
final class JPEG2000Decoder: RowDecoder {
    private let file: MasterFile
    private var handle: OpaquePointer?
    private var header = cjp2_header()
    private var fileSize = 0
    private let bandBudget: Int

    /// - Parameters:
    ///   - path: the master's file, read directly (the bytes fed are then only counted); nil: spool.
    ///   - spoolDirectory: where the anonymous spool file is made when `path` is nil.
    ///   - bandBudget: the most bytes of OpenJPEG's 32-bit samples a band holds (at least a row).
    init(path: String?, spoolDirectory: String, bandBudget: Int = 48 << 20) throws(TileError) {
        self.bandBudget = bandBudget
        if let path { file = try MasterFile(path: path) } else { file = try MasterFile(spoolIn: spoolDirectory) }
    }

    deinit { cjp2_decoder_destroy(handle) }

    /// Whether `bytes` begin as a JP2 file or a J2K codestream does, as far as they go (a codestream
    /// needs two bytes to be told from a JPEG).
    static func isSignature(_ bytes: UnsafeRawBufferPointer) -> Bool {
        cjp2_is_signature(bytes.baseAddress, bytes.count) != 0
    }

    var rowsRead: Int { handle.map { Int(cjp2_decoder_rows_read($0)) } ?? 0 }
    var bytesBuffered: Int { 0 }  // spooled bytes are on disk
    var warningCount: Int { 0 }
    var isTruncated: Bool { false }  // data that ends early is an error (`.truncated`), never filled in
    /// The largest band of OpenJPEG's samples decoded so far (bytes).
    var bandByteCount: Int { handle.map { Int(cjp2_decoder_band_bytes($0)) } ?? 0 }

    var lastMessage: String {
        guard let handle else { return "" }
        var text = [CChar](repeating: 0, count: 256)
        cjp2_decoder_copy_message(handle, &text, text.count)
        return String(cMessage: text)
    }

    func feed(_ bytes: UnsafeRawBufferPointer) throws(TileError) { try file.append(bytes) }

    func endInput() throws(TileError) { file.end() }

    func readSourceHeader() throws(TileError) -> SourceHeader? {
        if handle == nil {
            if file.isSpool && !file.hasEnded { return nil }
            try open()
        }
        guard let handle else { return nil }
        var bytes: UnsafeRawPointer?
        var length = 0
        cjp2_decoder_icc_profile(handle, &bytes, &length)
        let icc = bytes.map { [UInt8](UnsafeRawBufferPointer(start: $0, count: length)) }
        return .other(ImageInfo(jpeg2000: header, iccProfile: length > 0 ? icc : nil))
    }

    private func open() throws(TileError) {
        fileSize = try file.size()
        BlockingCallCheck.check("read a JPEG 2000 header")
        var message = [CChar](repeating: 0, count: 256)
        var opened: OpaquePointer?
        let threads = UInt32(min(4, ProcessInfo.processInfo.activeProcessorCount))
        let status = cjp2_decoder_open(file.descriptor, nil, UInt64(fileSize), 1, threads, UInt64(bandBudget), &opened, &message, message.count)
        guard status == CMASTER_OK, let opened else { throw Self.error(status, String(cMessage: message)) }
        handle = opened
        cjp2_decoder_header(opened, &header)
    }

    /// The header of a JPEG 2000 in memory (`bytes`: the whole file, or as much as has arrived), read
    /// from its markers and boxes without OpenJPEG, without a file and without a system call: fit for a
    /// server's event loop or Swift's pool, and cheap whatever the header declares.
    /// - Throws: ``TileError/Code/truncated`` when the bytes end inside the header, as the decoder throws.
    static func info(bytes: UnsafeRawBufferPointer) throws(TileError) -> ImageInfo {
        var message = [CChar](repeating: 0, count: 256)
        var opened: OpaquePointer?
        let status = cjp2_decoder_open(-1, bytes.baseAddress, UInt64(bytes.count), 0, 1, 0, &opened, &message, message.count)
        guard status == CMASTER_OK, let opened else { throw error(status, String(cMessage: message)) }
        defer { cjp2_decoder_destroy(opened) }
        var header = cjp2_header()
        cjp2_decoder_header(opened, &header)
        var icc: UnsafeRawPointer?
        var length = 0
        cjp2_decoder_icc_profile(opened, &icc, &length)
        let profile = icc.map { [UInt8](UnsafeRawBufferPointer(start: $0, count: length)) }
        return ImageInfo(jpeg2000: header, iccProfile: length > 0 ? profile : nil)
    }

    func start() throws(TileError) -> DecodeStep { .ready }

    func readRows(into buffer: UnsafeMutableRawBufferPointer, stride: Int, maxRows: Int) throws(TileError)
        -> (rows: Int, step: DecodeStep)
    {
        precondition(buffer.count >= stride * maxRows, "row buffer too small")
        guard let handle else { return (0, .needData) }
        let height = Int(header.height)
        let allowed = file.rowsAllowed(of: height, fileSize: fileSize) - rowsRead
        guard allowed > 0 else { return (0, rowsRead == height ? .done : .needData) }
        BlockingCallCheck.check("decode JPEG 2000 rows")
        var rows: UInt32 = 0
        let status = cjp2_decoder_read_rows(handle, buffer.baseAddress, stride, UInt32(clamping: min(maxRows, allowed)), &rows)
        switch status {
        case CMASTER_OK: return (Int(rows), rowsRead < height && allowed > Int(rows) ? .ready : (rowsRead == height ? .done : .needData))
        case CMASTER_DONE: return (Int(rows), .done)
        default: throw Self.error(status, lastMessage, errorNumber: cjp2_decoder_error_number(handle))
        }
    }

    /// Done once every row has been given and the input has ended (a file read directly is still
    /// fed to the builder to the end: its fingerprint covers every byte).
    func finish() throws(TileError) -> DecodeStep {
        file.hasEnded && handle != nil && rowsRead == Int(header.height) ? .done : .needData
    }

    /// The error `status` is (one that is none: a call in the wrong state).
    private static func error(_ status: cmaster_status, _ message: String, errorNumber: Int32 = 0) -> TileError {
        do {
            _ = try MasterStatus.step(status, format: "JPEG 2000", message: { message }, errorNumber: { errorNumber })
            return TileError(.invalidArgument, "the JPEG 2000 decoder was called in the wrong state")
        } catch {
            return error
        }
    }
}

extension ImageInfo {
    /// A JPEG 2000's header, as the decoder read it.
    init(jpeg2000 h: cjp2_header, iccProfile: [UInt8]?) {
        self.init(
            png: Int(h.width), height: Int(h.height), bitDepth: Int(h.precision), isGray: h.is_gray != 0,
            hasAlpha: h.has_alpha != 0, iccProfile: iccProfile, pixelsPerMetre: nil)
        format = .jpeg2000
        if h.is_cmyk != 0 {
            components = 4
            colorSpace = .cmyk
        }
        jpeg2000 = JPEG2000Details(
            isCodestream: h.is_jp2 == 0, isHighThroughput: h.is_htj2k != 0, tileWidth: Int(h.tile_width), tileHeight: Int(h.tile_height),
            tileCount: Int(h.tiles_across) * Int(h.tiles_down), resolutionLevels: Int(h.resolutions))
    }
}
