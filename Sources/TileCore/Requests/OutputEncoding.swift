/// How rendered answers are encoded: the quality of each lossy format, whether WebP is lossless, and
/// the effort the WebP and AVIF encoders spend on their bytes.
///
/// A server keeps one and encodes each answer in the format its request names
/// (``TiledImage/renderEncoded(_:quality:lossless:effort:waitingUntil:isCancelled:)`` with
/// ``quality(of:)``, ``webpLossless`` and ``effort``). The defaults are chosen by measurement
/// (BENCHMARKS.md, `formats`): each format's default keeps within 1 dB PSNR of a JPEG at
/// ``TileJPEGEncoder/defaultQuality``, in fewer bytes, and an answer's first encode near a tenth of a
/// second or less.
public struct OutputEncoding: Sendable, Hashable {
    /// The WebP quality, 1...100, by default.
    public static let defaultWebPQuality = 85
    /// The AVIF quality, 1...100, by default.
    public static let defaultAVIFQuality = 72

    /// JPEG quality, 1...100.
    public var jpegQuality: Int
    /// WebP quality, 1...100 (with ``webpLossless``, the effort spent on size).
    public var webpQuality: Int
    /// Whether WebP answers are lossless (every pixel as rendered).
    public var webpLossless: Bool
    /// AVIF quality, 1...100.
    public var avifQuality: Int
    /// The encoders' effort and AVIF's chroma (``Effort``).
    public var effort: Effort

    /// Each quality clamped to 1...100.
    public init(
        jpegQuality: Int = TileJPEGEncoder.defaultQuality, webpQuality: Int = Self.defaultWebPQuality, webpLossless: Bool = false,
        avifQuality: Int = Self.defaultAVIFQuality, effort: Effort = Effort()
    ) {
        self.jpegQuality = Self.clamped(jpegQuality)
        self.webpQuality = Self.clamped(webpQuality)
        self.webpLossless = webpLossless
        self.avifQuality = Self.clamped(avifQuality)
        self.effort = effort
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

    /// A short name of how `format` is encoded (`80`, `webp85m4`, `webp85m6-sharp`, `webp-lossless85m4`,
    /// `avif72s6`, `avif72s4-444`, `png`): what an answer's entity tag says of it, so that a change of
    /// settings changes the tags.
    public func label(of format: ImageRequest.Format) -> String {
        switch format {
        case .webp:
            "webp\(webpLossless ? "-lossless" : "")\(quality(of: .webp))m\(effort.encodedWebPMethod)\(effort.webpSharpYUV && !webpLossless ? "-sharp" : "")"
        case .avif: "avif\(quality(of: .avif))s\(effort.encodedAVIFSpeed)\(effort.avifFullChroma ? "-444" : "")"
        case .png: "png"
        default: "\(quality(of: .jpg))"
        }
    }

    private static func clamped(_ quality: Int) -> Int { min(100, max(1, quality)) }
}

extension OutputEncoding {
    /// How much work the WebP and AVIF encoders spend on an answer's bytes, and how much colour an AVIF
    /// keeps: fewer bytes at the same fidelity for more encode time (BENCHMARKS.md, `formats`, has each
    /// setting's bytes at JPEG's PSNR and its encode time).
    ///
    /// The defaults keep an answer's first encode near a tenth of a second for 512x512 pixels on one
    /// core, and every AVIF within AVIF's baseline profile.
    public struct Effort: Sendable, Hashable {
        /// libwebp's method by default.
        public static let defaultWebPMethod = 4
        /// libavif's speed by default (avifenc's default too).
        public static let defaultAVIFSpeed = 6
        /// Pixels past which an AVIF is encoded at speed 8 or faster whatever ``avifSpeed`` says: an AVIF
        /// cannot be stopped once started (libavif 0.11), and at speed 6 one of 2^24 pixels takes about
        /// 5 s of a core (2.6 s at 8). 2^22.
        public static let avifLargePixels = 1 << 22

        /// libwebp's method, 0 (fastest) ... 6 (smallest).
        public var webpMethod: Int
        /// Whether a lossy WebP's colour is turned into YUV 4:2:0 by libwebp's iterative ("sharp")
        /// conversion, which keeps colour edges and fine colour detail better than averaging.
        public var webpSharpYUV: Bool
        /// libavif's speed, 0 (slowest, smallest) ... 10 (fastest), for AVIFs of at most
        /// ``avifLargePixels`` pixels (larger ones: at least 8).
        public var avifSpeed: Int
        /// Whether an AVIF keeps its colour at full resolution (YUV 4:4:4) instead of halving it each
        /// way (4:2:0). Fewer bytes at the same PSNR, but AV1's High profile: outside AVIF's baseline
        /// profile, so a decoder that implements only that (some hardware) cannot show it.
        public var avifFullChroma: Bool

        /// The method a WebP is encoded with: ``webpMethod`` within 0...6, whatever was set.
        public var encodedWebPMethod: Int { min(6, max(0, webpMethod)) }
        /// The speed an AVIF is encoded at: ``avifSpeed`` within 0...10, whatever was set (at least 8 past
        /// ``avifLargePixels``: ``avifSpeed(pixels:)``).
        public var encodedAVIFSpeed: Int { min(10, max(0, avifSpeed)) }

        /// The speed an AVIF of `pixels` pixels is encoded at: ``encodedAVIFSpeed``, at least 8 past
        /// ``avifLargePixels``.
        public func avifSpeed(pixels: Int) -> Int { pixels > Self.avifLargePixels ? max(encodedAVIFSpeed, 8) : encodedAVIFSpeed }

        /// `webpMethod` clamped to 0...6 and `avifSpeed` to 0...10.
        public init(
            webpMethod: Int = Self.defaultWebPMethod, webpSharpYUV: Bool = false, avifSpeed: Int = Self.defaultAVIFSpeed,
            avifFullChroma: Bool = false
        ) {
            self.webpMethod = min(6, max(0, webpMethod))
            self.webpSharpYUV = webpSharpYUV
            self.avifSpeed = min(10, max(0, avifSpeed))
            self.avifFullChroma = avifFullChroma
        }
    }
}
