/// How rendered answers are encoded: the quality of each lossy format, and whether WebP is lossless.
///
/// A server keeps one and encodes each answer in the format its request names
/// (``TiledImage/renderEncoded(_:quality:lossless:waitingUntil:isCancelled:)`` with
/// ``quality(of:)`` and ``webpLossless``). The defaults are chosen by measurement (BENCHMARKS.md,
/// `formats`): each format's default keeps within 1 dB PSNR of a JPEG at
/// ``TileJPEGEncoder/defaultQuality``, in fewer bytes.
public struct OutputEncoding: Sendable, Hashable {
    /// The WebP quality, 1...100, by default.
    public static let defaultWebPQuality = 85
    /// The AVIF quality, 1...100, by default.
    public static let defaultAVIFQuality = 72
    /// libwebp's method (0 fastest ... 6 smallest) every WebP is encoded with.
    public static let webpMethod: Int32 = 4
    /// libavif's speed (0 slowest ... 10 fastest) every AVIF is encoded with.
    public static let avifSpeed: Int32 = 8

    /// JPEG quality, 1...100.
    public var jpegQuality: Int
    /// WebP quality, 1...100 (with ``webpLossless``, the effort spent on size).
    public var webpQuality: Int
    /// Whether WebP answers are lossless (every pixel as rendered).
    public var webpLossless: Bool
    /// AVIF quality, 1...100.
    public var avifQuality: Int

    /// Each quality clamped to 1...100.
    public init(
        jpegQuality: Int = TileJPEGEncoder.defaultQuality, webpQuality: Int = Self.defaultWebPQuality, webpLossless: Bool = false,
        avifQuality: Int = Self.defaultAVIFQuality
    ) {
        self.jpegQuality = Self.clamped(jpegQuality)
        self.webpQuality = Self.clamped(webpQuality)
        self.webpLossless = webpLossless
        self.avifQuality = Self.clamped(avifQuality)
    }

    /// The quality `format` is encoded at, within 1...100 whatever was set (JPEG's for the formats that
    /// have none).
    public func quality(of format: ImageRequest.Format) -> Int {
        switch format {
        case .webp: Self.clamped(webpQuality)
        case .avif: Self.clamped(avifQuality)
        default: Self.clamped(jpegQuality)
        }
    }

    /// A short name of how `format` is encoded (`80`, `webp85m4`, `webp-lossless85m4`, `avif72s8`, `png`):
    /// what an answer's entity tag says of it, so that a change of settings changes the tags.
    public func label(of format: ImageRequest.Format) -> String {
        switch format {
        case .webp: "webp\(webpLossless ? "-lossless" : "")\(quality(of: .webp))m\(Self.webpMethod)"
        case .avif: "avif\(quality(of: .avif))s\(Self.avifSpeed)"
        case .png: "png"
        default: "\(quality(of: .jpg))"
        }
    }

    private static func clamped(_ quality: Int) -> Int { min(100, max(1, quality)) }
}
