/// An IIIF Image API 3.0 image request: region, size, rotation, quality and format, as parsed from the
/// path segments `{region}/{size}/{rotation}/{quality}.{format}`.
///
/// Parsing checks the syntax only; ``resolve(width:height:limits:)`` applies the request to an image's
/// size (cropping the region, computing the output size, checking the limits) and gives the
/// canonical form. Every malformed request throws a ``TileError`` naming the parameter:
/// ``TileError/Code/invalidArgument`` for bad syntax or values the specification forbids (an HTTP
/// server answers 400), ``TileError/Code/unsupported`` for valid requests of features not offered
/// (arbitrary rotations, formats other than `jpg`, `png`, `webp` and `avif`; 501), and
/// ``TileError/Code/tooLarge`` for outputs past the limits (400).
public struct ImageRequest: Sendable, Hashable {
    /// The part of the full image requested, in display orientation.
    public enum Region: Sendable, Hashable {
        /// The whole image.
        case full
        /// A centred square as large as the shorter side.
        case square
        /// Pixels (non-negative integers).
        case pixels(x: Int, y: Int, width: Int, height: Int)
        /// Percentages of the full image's width and height.
        case percent(x: Double, y: Double, width: Double, height: Double)
    }

    /// The size the region is scaled to.
    public enum Size: Sendable, Hashable {
        /// The region's own size, or smaller where the limits say so (`max`); with
        /// ``ImageRequest/upscales``, as large as the limits allow (`^max`).
        case max
        /// This width, the height keeping the aspect ratio (`w,`).
        case width(Int)
        /// This height, the width keeping the aspect ratio (`,h`).
        case height(Int)
        /// This percentage of the region's size (`pct:n`).
        case percent(Double)
        /// Exactly this size, distorting if need be (`w,h`).
        case exactly(width: Int, height: Int)
        /// As large as fits in this size, keeping the aspect ratio (`!w,h`).
        case fitting(width: Int, height: Int)
    }

    /// The colour of the output.
    public enum Quality: String, Sendable, Hashable, CaseIterable {
        case `default`, color, gray, bitonal
    }

    /// The encoding of the output.
    public enum Format: String, Sendable, Hashable, CaseIterable {
        case jpg, tif, png, gif, jp2, pdf, webp, avif

        /// The media type (`image/jpeg`, ...).
        public var mediaType: String {
            switch self {
            case .jpg: "image/jpeg"
            case .tif: "image/tiff"
            case .png: "image/png"
            case .gif: "image/gif"
            case .jp2: "image/jp2"
            case .pdf: "application/pdf"
            case .webp: "image/webp"
            case .avif: "image/avif"
            }
        }

        /// The formats answers are encoded in: `jpg` and `png` (which every IIIF server at level 2
        /// offers), `webp` and `avif` (listed in an image's `extraFormats`).
        public static let offered: [Format] = [.jpg, .png, .webp, .avif]

        /// Whether answers are encoded in it (``offered``).
        public var isOffered: Bool {
            switch self {
            case .jpg, .png, .webp, .avif: true
            default: false
            }
        }
    }

    public var region: Region
    public var size: Size
    /// Whether the size may be larger than the region (the `^` prefix).
    public var upscales: Bool
    /// Degrees of clockwise rotation, 0 to 360.
    public var rotation: Double
    /// Whether the image is mirrored (on the vertical axis) before the rotation (the `!` prefix).
    public var mirrored: Bool
    public var quality: Quality
    public var format: Format

    /// A request from its parts.
    public init(
        region: Region = .full, size: Size = .max, upscales: Bool = false, rotation: Double = 0, mirrored: Bool = false,
        quality: Quality = .default, format: Format = .jpg
    ) {
        self.region = region
        self.size = size
        self.upscales = upscales
        self.rotation = rotation
        self.mirrored = mirrored
        self.quality = quality
        self.format = format
    }

    /// Parses the four path segments of a request (percent-decoded).
    /// - Throws: ``TileError/Code/invalidArgument`` for bad syntax (naming the parameter and the value).
    public init(region: String, size: String, rotation: String, qualityAndFormat: String) throws(TileError) {
        self.region = try Self.parseRegion(region)
        (self.size, upscales) = try Self.parseSize(size)
        (self.rotation, mirrored) = try Self.parseRotation(rotation)
        (quality, format) = try Self.parseQualityAndFormat(qualityAndFormat)
    }

    /// Parses `{region}/{size}/{rotation}/{quality}.{format}` (percent-decoded, no leading slash).
    public init(path: String) throws(TileError) {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 4 else {
            throw TileError(
                .invalidArgument, "an image request has 4 segments, {region}/{size}/{rotation}/{quality}.{format}: \(Self.quoted(path))")
        }
        try self.init(
            region: String(parts[0]), size: String(parts[1]), rotation: String(parts[2]), qualityAndFormat: String(parts[3]))
    }

    // MARK: - Parsing

    static func parseRegion(_ text: String) throws(TileError) -> Region {
        switch text {
        case "full": return .full
        case "square": return .square
        default: break
        }
        if text.hasPrefix("pct:") {
            let values = try numbers(String(text.dropFirst(4)), count: 4, parameter: "region", parse: decimal)
            guard values[2] > 0, values[3] > 0 else { throw invalid("region", text, "width and height must be above 0") }
            return .percent(x: values[0], y: values[1], width: values[2], height: values[3])
        }
        let values = try numbers(text, count: 4, parameter: "region", parse: integer)
        guard values[2] > 0, values[3] > 0 else { throw invalid("region", text, "width and height must be above 0") }
        return .pixels(x: values[0], y: values[1], width: values[2], height: values[3])
    }

    static func parseSize(_ text: String) throws(TileError) -> (Size, Bool) {
        let upscales = text.hasPrefix("^")
        let body = upscales ? String(text.dropFirst()) : text
        if body == "max" { return (.max, upscales) }
        if body.hasPrefix("pct:") {
            let n = try numbers(String(body.dropFirst(4)), count: 1, parameter: "size", parse: decimal)[0]
            guard n > 0 else { throw invalid("size", text, "the percentage must be above 0") }
            return (.percent(n), upscales)
        }
        let fits = body.hasPrefix("!")
        let pair = fits ? String(body.dropFirst()) : body
        let halves = pair.split(separator: ",", omittingEmptySubsequences: false)
        guard halves.count == 2 else { throw invalid("size", text, "not max, pct:n, w, ,h, w,h or !w,h") }
        let width = halves[0].isEmpty ? nil : try integer(String(halves[0]), parameter: "size", whole: text)
        let height = halves[1].isEmpty ? nil : try integer(String(halves[1]), parameter: "size", whole: text)
        if width == 0 || height == 0 { throw invalid("size", text, "width and height must be above 0") }
        switch (width, height, fits) {
        case (let w?, nil, false): return (.width(w), upscales)
        case (nil, let h?, false): return (.height(h), upscales)
        case (let w?, let h?, false): return (.exactly(width: w, height: h), upscales)
        case (let w?, let h?, true): return (.fitting(width: w, height: h), upscales)
        default: throw invalid("size", text, "not max, pct:n, w, ,h, w,h or !w,h")
        }
    }

    static func parseRotation(_ text: String) throws(TileError) -> (Double, Bool) {
        let mirrored = text.hasPrefix("!")
        let degrees = try decimal(mirrored ? String(text.dropFirst()) : text, parameter: "rotation", whole: text)
        guard degrees <= 360 else { throw invalid("rotation", text, "degrees must be within 0...360") }
        return (degrees, mirrored)
    }

    static func parseQualityAndFormat(_ text: String) throws(TileError) -> (Quality, Format) {
        guard let dot = text.lastIndex(of: "."), text[..<dot].count > 0 else {
            throw invalid("quality", text, "the last segment is {quality}.{format}")
        }
        let qualityText = String(text[..<dot])
        let formatText = String(text[text.index(after: dot)...])
        guard let quality = Quality(rawValue: qualityText) else {
            throw invalid("quality", qualityText, "not default, color, gray or bitonal")
        }
        guard let format = Format(rawValue: formatText) else {
            throw invalid("format", formatText, "not jpg, tif, png, gif, jp2, pdf or webp")
        }
        return (quality, format)
    }

    /// Comma-separated numbers, exactly `count` of them.
    private static func numbers<T>(
        _ text: String, count: Int, parameter: String, parse: (String, String, String) throws(TileError) -> T
    ) throws(TileError) -> [T] {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
        guard parts.count == count else { throw invalid(parameter, text, "expected \(count) comma-separated numbers") }
        var values: [T] = []
        for part in parts { values.append(try parse(String(part), parameter, text)) }
        return values
    }

    /// A non-negative integer: decimal digits only, at most 9 of them.
    private static func integer(_ text: String, parameter: String, whole: String) throws(TileError) -> Int {
        guard !text.isEmpty, text.count <= 9, text.utf8.allSatisfy({ (48...57).contains($0) }), let value = Int(text) else {
            throw invalid(parameter, whole, "\(quoted(text)) is not a non-negative integer (at most 9 digits)")
        }
        return value
    }

    /// A non-negative decimal: digits and at most one ".", with a digit on each side of it.
    private static func decimal(_ text: String, parameter: String, whole: String) throws(TileError) -> Double {
        let pieces = text.split(separator: ".", omittingEmptySubsequences: false)
        let digits = { (piece: Substring) in !piece.isEmpty && piece.utf8.allSatisfy { (48...57).contains($0) } }
        guard text.count <= 32, (1...2).contains(pieces.count), pieces.allSatisfy(digits), let value = Double(text) else {
            throw invalid(parameter, whole, "\(quoted(text)) is not a non-negative decimal number")
        }
        return value
    }

    static func invalid(_ parameter: String, _ value: String, _ reason: String) -> TileError {
        TileError(.invalidArgument, "invalid \(parameter) \(quoted(value)): \(reason)")
    }

    /// A value quoted for a message, shortened and with control characters escaped.
    static func quoted(_ text: String) -> String {
        let short = text.count > 64 ? String(text.prefix(64)) + "..." : text
        return "\"" + short.unicodeScalars.map { $0.value < 32 || $0.value == 127 ? "\\u{\(String($0.value, radix: 16))}" : String($0) }.joined()
            + "\""
    }
}
