internal import CJpegShim
public import Foundation

/// Encodes pixels into an in-memory JPEG with libjpeg (`jpeg_mem_dest`), a strip of rows at a time.
///
/// Used for resized copies, the demo image and tests that make their own inputs.
public final class JPEGEncoder {
    /// Chroma subsampling of a colour JPEG.
    public enum Subsampling: Sendable, Hashable {
        case s444, s422, s420
        /// Luma 4x1 (4:1:1) and 1x2 (4:4:0): rarer samplings, for tests of what readers accept.
        case s411, s440
    }

    /// Encoding settings.
    public struct Options: Sendable, Hashable {
        /// 1...100, default ``TileJPEGEncoder/defaultQuality``.
        public var quality = TileJPEGEncoder.defaultQuality
        /// Colour images only; default 4:2:0.
        public var subsampling = Subsampling.s420
        public var progressive = false
        /// A restart marker every this many MCU rows (0: none).
        public var restartRows = 0
        public var optimizeCoding = false
        /// Arithmetic coding instead of Huffman (libjpeg-turbo writes and reads it; browsers do not).
        public var arithmeticCoding = false
        public init() {}
    }

    /// Pixel layout of the rows passed in.
    public enum Input: Sendable, Hashable {
        /// 4 bytes a pixel (the 4th is ignored); encodes a 3-component YCbCr JPEG.
        case rgba
        /// 1 byte a pixel; encodes a 1-component JPEG.
        case grayscale
    }

    public let width: Int
    public let height: Int
    public let input: Input
    private let handle: OpaquePointer
    private var rowsWritten = 0

    /// Starts an encoder (`jpeg_start_compress`).
    /// - Throws: ``TileError/Code/invalidArgument`` for sizes out of 1...65500.
    public init(width: Int, height: Int, input: Input = .rgba, options: Options = Options()) throws(TileError) {
        guard (1...65500).contains(width), (1...65500).contains(height) else {
            throw TileError(.invalidArgument, "cannot encode a \(width)x\(height) JPEG")
        }
        let sampling: (Int32, Int32) =
            switch options.subsampling {
            case .s444: (1, 1)
            case .s422: (2, 1)
            case .s420: (2, 2)
            case .s411: (4, 1)
            case .s440: (1, 2)
            }
        var o = cjs_encoder_options(
            width: UInt32(width), height: UInt32(height), components: input == .rgba ? 3 : 1,
            quality: Int32(options.quality), h_sampling: sampling.0, v_sampling: sampling.1,
            progressive: options.progressive ? 1 : 0, restart_rows: Int32(options.restartRows),
            optimize_coding: options.optimizeCoding ? 1 : 0, arithmetic: options.arithmeticCoding ? 1 : 0)
        var handle: OpaquePointer?
        guard cjs_encoder_create(&o, &handle) == CJS_OK, let handle else {
            throw TileError(.invalidArgument, "libjpeg refused the encoder settings")
        }
        self.width = width
        self.height = height
        self.input = input
        self.handle = handle
    }

    deinit { cjs_encoder_destroy(handle) }

    /// Writes an APPn or COM marker (before the first row), e.g. `0xE1` with an `Exif\0\0` block.
    public func writeMarker(_ marker: UInt8, _ payload: [UInt8]) throws(TileError) {
        let status = payload.withUnsafeBytes { cjs_encoder_write_marker(handle, Int32(marker), $0.baseAddress, $0.count) }
        guard status == CJS_OK else { throw TileError(.invalidArgument, "cannot write marker \(marker)") }
    }

    /// Writes an ICC profile as APP2 chunks (before the first row).
    public func writeICCProfile(_ profile: [UInt8]) throws(TileError) {
        let status = profile.withUnsafeBytes { cjs_encoder_write_icc(handle, $0.baseAddress, $0.count) }
        guard status == CJS_OK else { throw TileError(.invalidArgument, "cannot write the ICC profile") }
    }

    /// Writes `count` rows, `stride` bytes apart (`jpeg_write_scanlines`).
    public func writeRows(_ rows: UnsafeRawBufferPointer, stride: Int, count: Int) throws(TileError) {
        let rowBytes = width * (input == .rgba ? 4 : 1)
        guard count >= 0, stride >= rowBytes, count == 0 || rows.count >= stride * (count - 1) + rowBytes,
            rowsWritten + count <= height
        else { throw TileError(.invalidArgument, "rows do not fit the encoder") }
        guard count > 0 else { return }
        let status = cjs_encoder_write_rows(handle, rows.baseAddress, stride, UInt32(count))
        guard status == CJS_OK else { throw TileError(.io, "libjpeg: \(String(cString: cjs_encoder_message(handle)))") }
        rowsWritten += count
    }

    /// Finishes the stream (`jpeg_finish_compress`) and returns the JPEG.
    public func finish() throws(TileError) -> Data {
        var pointer: UnsafeRawPointer?
        var length = 0
        guard rowsWritten == height, cjs_encoder_finish(handle, &pointer, &length) == CJS_OK, let pointer else {
            throw TileError(.invalidArgument, "the encoder has \(rowsWritten) of \(height) rows")
        }
        return Data(bytes: pointer, count: length)
    }

    /// Encodes a whole image in one call.
    public static func encode(
        pixels: [UInt8], width: Int, height: Int, input: Input = .rgba, options: Options = Options()
    ) throws(TileError) -> Data {
        let encoder = try JPEGEncoder(width: width, height: height, input: input, options: options)
        let stride = width * (input == .rgba ? 4 : 1)
        var failure: TileError?
        pixels.withUnsafeBytes { raw in
            do throws(TileError) { try encoder.writeRows(raw, stride: stride, count: height) } catch { failure = error }
        }
        if let failure { throw failure }
        return try encoder.finish()
    }
}
