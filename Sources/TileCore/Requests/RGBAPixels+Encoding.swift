internal import CJpegShim
internal import CWebEncoders
public import Foundation

extension RGBAPixels {
    /// Encodes the pixels as a JPEG (the tiles' pooled compressor, ``TileJPEGEncoder``: 4:2:0, no EXIF,
    /// so a browser never turns it a second time; transparency composited onto white), a PNG (libpng:
    /// RGB, or RGBA when some pixel is not opaque; gray, or gray and alpha), a WebP (libwebp: lossy, or
    /// lossless with `lossless`; alpha kept when some pixel is not opaque) or an AVIF (libavif's aom
    /// encoder: YUV 4:2:0 or 4:4:4 as `effort` says, or luma only for gray pixels, which then carries only
    /// a gray profile; alpha kept likewise, losslessly). A WebP is at most 16383 pixels a side; an AVIF's rows at most 4 GiB.
    /// - Parameters:
    ///   - format: ``ImageRequest/Format/jpg``, ``ImageRequest/Format/png``, ``ImageRequest/Format/webp``
    ///     or ``ImageRequest/Format/avif``.
    ///   - quality: 1...100; nil: the format's default (``OutputEncoding``'s). PNG has none.
    ///   - lossless: a lossless WebP (the other formats ignore it).
    ///   - effort: the WebP and AVIF encoders' effort and AVIF's chroma (``OutputEncoding/Effort``).
    ///   - gray: the pixels are gray (R = G = B): a one-component JPEG, a gray PNG, a luma-only AVIF.
    ///   - colorProfile: a colour profile to carry (JPEG APP2 chunks, PNG `iCCP`, WebP `ICCP`, AVIF
    ///     `colr`) when it describes the output's channels (``ColorProfile/describes(channels:)``);
    ///     otherwise left out.
    ///   - isCancelled: asked every 64 rows of a PNG and as a WebP's encode progresses (a large one takes
    ///     seconds), and before an AVIF's (which cannot be stopped once started): true stops it.
    /// - Throws: ``TileError/Code/unsupported`` for other formats and for a WebP over 16383 pixels a
    ///   side, ``TileError/Code/invalidArgument`` for a quality out of range,
    ///   ``TileError/Code/cancelled``, what the encoders throw.
    public func encoded(
        as format: ImageRequest.Format, quality: Int? = nil, lossless: Bool = false, effort: OutputEncoding.Effort = .init(),
        gray: Bool = false, colorProfile: ColorProfile? = nil, isCancelled: (() -> Bool)? = nil
    ) throws(TileError) -> Data {
        let quality = quality ?? OutputEncoding().quality(of: format)
        guard (1...100).contains(quality) else { throw TileError(.invalidArgument, "quality \(quality) is not within 1...100") }
        let profile = colorProfile.flatMap { $0.describes(channels: gray && format != .webp ? 1 : 3) ? $0 : nil }
        switch format {
        case .jpg:
            let jpeg = try TileJPEGEncoderPool.shared.withEncoder(quality: quality, gray: gray) { encoder throws(TileError) in
                let result = bytes.withUnsafeBytes { raw in
                    Result { () throws(TileError) in try encoder.encode(raw, stride: width * 4, width: width, height: height) }
                }
                return try result.get()
            }
            guard let profile else { return jpeg }
            return Data(profile.inserted(into: [UInt8](jpeg)))
        case .png:
            // Gray: one byte a pixel, or two (gray and alpha) when some pixel is not opaque.
            let grayAlpha = gray && hasTransparency
            let rows = gray ? lumaBytes(keepingAlpha: grayAlpha) : bytes
            let rowBytes = width * (grayAlpha ? 2 : gray ? 1 : 4)
            let icc = profile?.bytes ?? []
            var pointer: UnsafeMutableRawPointer?
            var length = 0
            let status = Self.withCancellationCallback(isCancelled) { check, context in
                rows.withUnsafeBytes { raw in
                    icc.withUnsafeBytes {
                        cjs_png_encode(
                            raw.baseAddress, rowBytes, UInt32(width), UInt32(height), grayAlpha ? 2 : gray ? 1 : 0, $0.baseAddress, $0.count,
                            &pointer, &length, check, context)
                    }
                }
            }
            if status == CJS_ERR_CANCELLED { throw TileError(.cancelled, "the PNG encode was stopped") }
            guard status == CJS_OK, let pointer else {
                throw TileError(.io, "libpng could not encode a \(width)x\(height) image (status \(status.rawValue))")
            }
            defer { cjs_free(pointer) }
            return Data(bytes: pointer, count: length)
        case .webp, .avif:
            // An AVIF cannot be stopped once started (libavif 0.11): asked here first, for both.
            if isCancelled?() == true { throw TileError(.cancelled, "the \(format.rawValue) encode was stopped") }
            return try webOrAVIF(
                format, quality: quality, lossless: lossless, effort: effort, gray: gray, icc: profile?.bytes ?? [], isCancelled: isCancelled)
        default:
            throw TileError(.unsupported, "the \(format.rawValue) format is not offered (jpg, png, webp and avif are)")
        }
    }

    /// A WebP or an AVIF of the pixels (``encoded(as:quality:lossless:effort:gray:colorProfile:isCancelled:)``).
    private func webOrAVIF(
        _ format: ImageRequest.Format, quality: Int, lossless: Bool, effort: OutputEncoding.Effort, gray: Bool, icc: [UInt8],
        isCancelled: (() -> Bool)?
    ) throws(TileError) -> Data {
        if format == .webp, max(width, height) > Int(CWEB_WEBP_MAX_SIDE) {
            throw TileError(.unsupported, "a WebP is at most \(CWEB_WEBP_MAX_SIDE) pixels a side (asked: \(width)x\(height)); ask for jpg or png")
        }
        let alpha: Int32 = hasTransparency ? 1 : 0
        let (method, sharp) = (Int32(effort.encodedWebPMethod), Int32(effort.webpSharpYUV ? 1 : 0))
        let (speed, fullChroma) = (Int32(effort.avifSpeed(pixels: width * height)), Int32(effort.avifFullChroma ? 1 : 0))
        var pointer: UnsafeMutableRawPointer?
        var length = 0
        var detail: Int32 = 0
        let status = Self.withCancellationCallback(isCancelled) { check, context in
            bytes.withUnsafeBytes { raw in
                icc.withUnsafeBytes { profile in
                    let rows = raw.bindMemory(to: UInt8.self).baseAddress
                    return format == .webp
                        ? cweb_webp_encode(
                            rows, width * 4, UInt32(width), UInt32(height), Int32(quality), lossless ? 1 : 0, method, sharp, alpha,
                            profile.baseAddress, profile.count, check, context, &pointer, &length, &detail)
                        : cweb_avif_encode(
                            rows, width * 4, UInt32(width), UInt32(height), Int32(quality), speed, fullChroma, alpha, gray ? 1 : 0,
                            profile.baseAddress, profile.count, &pointer, &length, &detail)
                }
            }
        }
        let library = format == .webp ? "libwebp" : "libavif"
        switch status {
        case CWEB_OK:
            guard let pointer else { throw TileError(.io, "\(library) gave no bytes") }
            defer { cweb_free(pointer) }
            return Data(bytes: pointer, count: length)
        case CWEB_ERR_CANCELLED: throw TileError(.cancelled, "the \(format.rawValue) encode was stopped")
        case CWEB_ERR_MEMORY: throw TileError(.io, "\(library) ran out of memory encoding a \(width)x\(height) image")
        case CWEB_ERR_ARGUMENT: throw TileError(.invalidArgument, "\(library) cannot encode a \(width)x\(height) image at quality \(quality)")
        default: throw TileError(.io, "\(library) could not encode a \(width)x\(height) image (its error \(detail))")
        }
    }

    /// Calls `body` with a C callback and its context that answer `isCancelled` (nil for both without one).
    private static func withCancellationCallback<R>(
        _ isCancelled: (() -> Bool)?, _ body: ((@convention(c) (UnsafeMutableRawPointer?) -> Int32)?, UnsafeMutableRawPointer?) -> R
    ) -> R {
        guard let isCancelled else { return body(nil, nil) }
        return withoutActuallyEscaping(isCancelled) { escaping in
            let check = CancellationCheck(escaping)
            return withExtendedLifetime(check) {
                body(
                    { context in Unmanaged<CancellationCheck>.fromOpaque(context!).takeUnretainedValue().isCancelled() ? 1 : 0 },
                    Unmanaged.passUnretained(check).toOpaque())
            }
        }
    }

    /// The first channel of each pixel (for gray pixels, its luma), followed by its alpha when
    /// `keepingAlpha`.
    private func lumaBytes(keepingAlpha: Bool = false) -> [UInt8] {
        let step = keepingAlpha ? 2 : 1
        var out = [UInt8](repeating: 0, count: width * height * step)
        for i in 0..<(width * height) {
            out[i * step] = bytes[i * 4]
            if keepingAlpha { out[i * step + 1] = bytes[i * 4 + 3] }
        }
        return out
    }

    /// Whether some pixel's alpha is below 255.
    private var hasTransparency: Bool { stride(from: 3, to: bytes.count, by: 4).contains { bytes[$0] != 255 } }
}

extension TiledImage {
    /// Renders a request (``render(_:waitingUntil:)``) and encodes it in its format (gray and bitonal
    /// qualities as gray images), carrying the image's ``colorProfile`` where it describes the output.
    /// - Parameters:
    ///   - request: the request, resolved against this image's size.
    ///   - quality: the format's quality, 1...100; nil: its default (``OutputEncoding``'s).
    ///   - lossless: a lossless WebP (``RGBAPixels/encoded(as:quality:lossless:effort:gray:colorProfile:isCancelled:)``).
    ///   - effort: the WebP and AVIF encoders' effort and AVIF's chroma (``OutputEncoding/Effort``).
    ///   - deadline: until when to wait for tiles still being built.
    ///   - isCancelled: asked between tile rows; true stops the render (``render(_:waitingUntil:isCancelled:)``).
    public func renderEncoded(
        _ request: ImageRequest.Resolved, quality: Int? = nil, lossless: Bool = false, effort: OutputEncoding.Effort = .init(),
        waitingUntil deadline: ContinuousClock.Instant? = nil, isCancelled: (() -> Bool)? = nil
    ) throws(TileError) -> Data {
        guard request.format.isOffered else {
            throw TileError(.unsupported, "the \(request.format.rawValue) format is not offered (jpg, png, webp and avif are)")
        }
        // A stored tile asked for as it is (a viewer's tile requests): read and encoded, nothing more.
        if request.format == .jpg, let tile = geometry.layout.tile(exactly: request), tile.level < levelCount {
            let jpeg = try encodedTile(tile, quality: quality ?? TileJPEGEncoder.defaultQuality)
            guard let colorProfile, colorProfile.describes(channels: 3) else { return jpeg }
            return Data(colorProfile.inserted(into: [UInt8](jpeg)))
        }
        let pixels = try render(request, waitingUntil: deadline, isCancelled: isCancelled)
        return try pixels.encoded(
            as: request.format, quality: quality, lossless: lossless, effort: effort, gray: request.quality == .gray || request.quality == .bitonal,
            colorProfile: colorProfile, isCancelled: isCancelled)
    }
}

/// A cancellation check handed to C as a context pointer
/// (``RGBAPixels/encoded(as:quality:lossless:effort:gray:colorProfile:isCancelled:)``).
private final class CancellationCheck {
    let isCancelled: () -> Bool
    init(_ isCancelled: @escaping () -> Bool) { self.isCancelled = isCancelled }
}
