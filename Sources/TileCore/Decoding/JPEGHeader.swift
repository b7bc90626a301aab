/// What a JPEG's frame header says, as libjpeg reads it (`jpeg_read_header`).
public struct JPEGHeader: Sendable, Hashable {
    /// The JPEG colour space, as libjpeg assumes it.
    public enum ColorSpace: String, Sendable, Hashable, Codable {
        case grayscale, rgb, ycbcr, cmyk, ycck, unknown
    }
    /// Stored size.
    public var width: Int
    public var height: Int
    /// Components in the stream (1, 3 or 4).
    public var components: Int
    public var colorSpace: ColorSpace
    public var bitsPerSample: Int
    public var isProgressive: Bool
    public var isArithmetic: Bool
}
