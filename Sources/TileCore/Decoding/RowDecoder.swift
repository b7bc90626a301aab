import Foundation

extension ImageFormat {
    /// The format `bytes` (a file's first bytes: 12 are enough) begin as: PNG, TIFF or JPEG 2000 by
    /// their signatures, anything else JPEG (whose decoder says what is wrong with what is not one).
    public init(sniffing bytes: UnsafeRawBufferPointer) {
        if PNGDecoder.isSignature(bytes) {
            self = .png
        } else if TIFFDecoder.isSignature(bytes) {
            self = .tiff
        } else if JPEG2000Decoder.isSignature(bytes) {
            self = .jpeg2000
        } else {
            self = .jpeg
        }
    }
}

extension ImageFormat {
    /// The refusal of bytes that begin as none of the formats read here (not a JPEG's SOI either):
    /// one wording wherever a master is read (builds, `info`, uploads); nil for anything else.
    static func refusal(ofFirst bytes: UnsafeRawBufferPointer) -> TileError? {
        guard bytes.count >= 2, bytes[0] != 0xFF || bytes[1] != 0xD8, ImageFormat(sniffing: bytes) == .jpeg else { return nil }
        let start = String(format: "0x%02x 0x%02x", bytes[0], bytes[1])
        return TileError(.corrupt, "not an image this package reads (JPEG, PNG, TIFF or JPEG 2000): it starts with \(start)")
    }

    /// The decoder of a PNG, TIFF or JPEG 2000 master: from the master's own file at `path` when it is
    /// a regular file (TIFF and JPEG 2000, which are read out of order), else from a spool file in
    /// `spoolDirectory` (PNG's interlaced passes too). A JPEG's decoder has options of its own: its
    /// callers make it.
    func masterDecoder(path: String?, spoolDirectory: String, page: Int = 0) throws(TileError) -> any RowDecoder {
        switch self {
        case .jpeg: preconditionFailure("a JPEG's decoder is made by its caller, with its options")
        case .png: return try PNGDecoder(spoolDirectory: spoolDirectory)
        case .tiff:
            // Anything at the path that is not a regular file (a FIFO, a pipe's /dev/fd) is spooled.
            if let path, let decoder = try? TIFFDecoder(path: path, spoolDirectory: spoolDirectory, page: page) { return decoder }
            return try TIFFDecoder(path: nil, spoolDirectory: spoolDirectory, page: page)
        case .jpeg2000:
            if let path, let decoder = try? JPEG2000Decoder(path: path, spoolDirectory: spoolDirectory) { return decoder }
            return try JPEG2000Decoder(path: nil, spoolDirectory: spoolDirectory)
        }
    }
}

/// Where a decoder is: what it needs next.
enum DecodeStep { case needData, ready, done }

/// What a master's header says, as its decoder read it.
enum SourceHeader {
    /// A JPEG's frame header (its metadata is read from the header segments).
    case jpeg(JPEGHeader)
    /// Another format's header and metadata.
    case other(ImageInfo)

    var width: Int {
        switch self {
        case .jpeg(let header): header.width
        case .other(let info): info.width
        }
    }

    var height: Int {
        switch self {
        case .jpeg(let header): header.height
        case .other(let info): info.height
        }
    }
}

/// What the pyramid builder reads a master through, whatever its format: bytes pushed in as they
/// arrive, a header, then rows of RGBA (4 bytes a pixel, 8-bit samples). ``JPEGDecoder`` and
/// ``PNGDecoder`` are the two; the format is told from the first bytes (``TileBuilder``), never from a
/// file name. A JPEG's level 0 can also be copied from its DCT coefficients into a TIFF store; the
/// coefficient calls do nothing for other formats (their level 0 is encoded from the rows).
///
/// Not thread-safe: one owner (a builder) calls it.
protocol RowDecoder: AnyObject {
    /// Rows given so far.
    var rowsRead: Int { get }
    /// Bytes held that are not decoded yet.
    var bytesBuffered: Int { get }
    /// Warnings (corrupt data tolerated, chunks dropped).
    var warningCount: Int { get }
    /// The last error's or warning's text.
    var lastMessage: String { get }
    /// Whether the input ended before the image and the rest was filled in (JPEG's `allowTruncated`).
    var isTruncated: Bool { get }

    func feed(_ bytes: UnsafeRawBufferPointer) throws(TileError)
    /// No more bytes will come.
    func endInput() throws(TileError)
    /// The header; `nil` until enough bytes have arrived.
    func readSourceHeader() throws(TileError) -> SourceHeader?
    /// Starts the rows; `.needData` while the decoder still absorbs input (a progressive JPEG's scans).
    func start() throws(TileError) -> DecodeStep
    /// Up to `maxRows` RGBA rows into `buffer` (rows `stride` apart).
    func readRows(into buffer: UnsafeMutableRawBufferPointer, stride: Int, maxRows: Int) throws(TileError)
        -> (rows: Int, step: DecodeStep)
    /// `.done` once the end of the stream has been read.
    func finish() throws(TileError) -> DecodeStep

    /// Bytes of the coefficient file, while one exists (JPEG).
    var coefficientFileByteCount: Int { get }
    /// Puts a multi-scan JPEG's coefficients in a file when `storage` says so; whether it did.
    @discardableResult
    func storeCoefficients(_ storage: CoefficientStorage, in directory: String, windowBytes: Int?) throws(TileError) -> Bool
    /// How level 0 can be copied into a TIFF store, turned upright by `orientation` (nil coding: it
    /// cannot, and why).
    func transcodePlan(tileSize: Int, orientation: ImageOrientation) throws(TileError)
        -> (coding: TIFFLevelCoding?, reason: String?)
    func transcode(into writer: TIFFPyramidWriter) throws(TileError)
    func syncTranscode() throws(TileError)
    func waitForTranscode() throws(TileError)
}

/// What decoders of formats without DCT coefficients (PNG, TIFF) answer: no coefficient file, no copy
/// of level 0 (a TIFF store encodes it from the rows).
extension RowDecoder {
    var coefficientFileByteCount: Int { 0 }
    @discardableResult
    func storeCoefficients(_ storage: CoefficientStorage, in directory: String, windowBytes: Int?) throws(TileError) -> Bool {
        false
    }
    func transcodePlan(tileSize: Int, orientation: ImageOrientation) throws(TileError)
        -> (coding: TIFFLevelCoding?, reason: String?)
    {
        (nil, "the source is not a JPEG: level 0 is encoded from its rows")
    }
    func transcode(into writer: TIFFPyramidWriter) throws(TileError) {}
    func syncTranscode() throws(TileError) {}
    func waitForTranscode() throws(TileError) {}
}
