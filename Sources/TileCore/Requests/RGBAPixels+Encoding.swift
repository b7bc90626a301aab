internal import CJpegShim
public import Foundation

extension RGBAPixels {
    /// Encodes the pixels as a JPEG (libjpeg through the shim, 4:2:0, no EXIF, so a browser never
    /// turns it a second time: the tiles' pooled compressor, ``TileJPEGEncoder``; with an ICC profile,
    /// a ``JPEGEncoder`` that keeps it as APP2) or a PNG (libpng, RGB).
    /// - Parameters:
    ///   - format: ``ImageRequest/Format/jpg`` or ``ImageRequest/Format/png``.
    ///   - quality: JPEG quality, 1...100 (default ``TileJPEGEncoder/defaultQuality``).
    ///   - gray: the pixels are gray (R = G = B): a one-component JPEG or a gray PNG.
    ///   - iccProfile: a colour profile for the JPEG (the source's).
    /// - Throws: ``TileError/Code/unsupported`` for other formats, ``TileError/Code/invalidArgument``
    ///   for a quality out of range, what the encoders throw.
    public func encoded(
        as format: ImageRequest.Format, quality: Int = TileJPEGEncoder.defaultQuality, gray: Bool = false,
        iccProfile: [UInt8]? = nil
    ) throws(TileError) -> Data {
        guard (1...100).contains(quality) else { throw TileError(.invalidArgument, "JPEG quality \(quality) is not within 1...100") }
        if format == .jpg, iccProfile?.isEmpty ?? true {
            return try TileJPEGEncoderPool.shared.withEncoder(quality: quality, gray: gray) { encoder throws(TileError) in
                let result = bytes.withUnsafeBytes { raw in
                    Result { () throws(TileError) in try encoder.encode(raw, stride: width * 4, width: width, height: height) }
                }
                return try result.get()
            }
        }
        let rows = gray ? lumaBytes() : bytes
        let rowBytes = width * (gray ? 1 : 4)
        switch format {
        case .jpg:
            var options = JPEGEncoder.Options()
            options.quality = quality
            let encoder = try JPEGEncoder(width: width, height: height, input: gray ? .grayscale : .rgba, options: options)
            if let iccProfile, !iccProfile.isEmpty { try encoder.writeICCProfile(iccProfile) }
            var failure: TileError?
            rows.withUnsafeBytes { raw in
                do throws(TileError) { try encoder.writeRows(raw, stride: rowBytes, count: height) } catch { failure = error }
            }
            if let failure { throw failure }
            return try encoder.finish()
        case .png:
            var pointer: UnsafeMutableRawPointer?
            var length = 0
            let status = rows.withUnsafeBytes {
                cjs_png_encode($0.baseAddress, rowBytes, UInt32(width), UInt32(height), gray ? 1 : 0, &pointer, &length)
            }
            guard status == CJS_OK, let pointer else {
                throw TileError(.io, "libpng could not encode a \(width)x\(height) image (status \(status.rawValue))")
            }
            defer { cjs_free(pointer) }
            return Data(bytes: pointer, count: length)
        default:
            throw TileError(.unsupported, "the \(format.rawValue) format is not offered (jpg and png are)")
        }
    }

    /// The first channel of each pixel (for gray pixels, its luma).
    private func lumaBytes() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: width * height)
        for i in 0..<(width * height) { out[i] = bytes[i * 4] }
        return out
    }
}

extension TiledImage {
    /// Renders a request (``render(_:waitingUntil:)``) and encodes it in its format (gray and bitonal
    /// qualities as gray images).
    /// - Parameters:
    ///   - request: the request, resolved against this image's size.
    ///   - quality: JPEG quality, default ``TileJPEGEncoder/defaultQuality``.
    ///   - iccProfile: the source's colour profile, kept in JPEGs (``ImageInfo/iccProfile``).
    ///   - deadline: until when to wait for tiles still being built.
    public func renderEncoded(
        _ request: ImageRequest.Resolved, quality: Int = TileJPEGEncoder.defaultQuality, iccProfile: [UInt8]? = nil,
        waitingUntil deadline: ContinuousClock.Instant? = nil
    ) throws(TileError) -> Data {
        guard request.format == .jpg || request.format == .png else {
            throw TileError(.unsupported, "the \(request.format.rawValue) format is not offered (jpg and png are)")
        }
        // A stored tile asked for as it is (a viewer's tile requests): read and encoded, nothing more.
        if request.format == .jpg, iccProfile?.isEmpty ?? true, let tile = geometry.layout.tile(exactly: request),
            tile.level < levelCount
        {
            return try encodedTile(tile, quality: quality)
        }
        let pixels = try render(request, waitingUntil: deadline)
        return try pixels.encoded(
            as: request.format, quality: quality, gray: request.quality == .gray || request.quality == .bitonal,
            iccProfile: iccProfile)
    }
}
